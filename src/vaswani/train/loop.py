"""`vaswani train`: the paper's training recipe; `Trainer.run` is the loop, on one screen.

`train` settles what `auto` leaves open (`recipe.py`), sets the run up (`setup.py`), resolves the
`TrainPlan` once (`plan.py`) and hands it to the `Trainer`, which updates (`step.py`), validates
(`validation.py`) and saves (`state.py`, `checkpoint.py`) until the budget (`budget.py`) is spent.

The same loop trains the three model families, by the task the data was prepared for: a
translation `Transformer` (loss over target tokens, best weights by validation chrF), a `DecoderOnly`
language model (loss over its text's tokens, best by validation loss), an `EncoderClassifier`
(loss over examples, best by validation accuracy).

The run directory it writes is described in `vaswani.run`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from vaswani import checkpoint as ckpt
from vaswani.config import ModelConfig, TrainConfig
from vaswani.data import Position, PreparedData, TokenBatchSampler
from vaswani.data.dropout import SubwordDropout
from vaswani.device import Placement, grad_scaler, keep_freed_memory, place
from vaswani.progress import progress_bar
from vaswani.run import CHECKPOINTS, append_metrics, data_fingerprint, truncate_metrics
from vaswani.tasks import DECODING, Task, get_task
from vaswani.train import recipe
from vaswani.train.average import WeightAverage
from vaswani.train.board import Board, require_tensorboard
from vaswani.train.budget import Clock, Closing, Ledger
from vaswani.train.distributed import Distributed, init_distributed
from vaswani.train.guided import GuidedAlignment
from vaswani.train.pace import PaceWatch, Pacing
from vaswani.train.plan import TrainPlan, print_plan, resolve_plan
from vaswani.train.schedule import Schedule
from vaswani.train.setup import open_run, subword_dropout
from vaswani.train.state import (
    Learner,
    TrainResult,
    TrainState,
    Update,
    load_checkpoint,
    save_checkpoint,
)
from vaswani.train.step import TrainingError, adam, train_update
from vaswani.train.stop import StopRequest
from vaswani.train.threads import ThreadChoice, kept_threads
from vaswani.train.validation import evaluate, evaluation_line, record_evaluation


def train(
    tc: TrainConfig,
    resume: bool = False,
    progress: bool = True,
    reset_data_position: bool = False,
    started: float | None = None,
    calibrating: bool = False,
) -> TrainResult:
    """Train (or resume) the run `tc` describes, until its step or time budget is spent.

    `tc.device` and `tc.precision` "auto" are resolved here, from the hardware (`vaswani.device`);
    with `progress`, the choice is printed (stderr) and it is always recorded in environment.json.
    `started`: when the time budget began, on `time.perf_counter` (`vaswani train`: when its
    process started); None: now. `calibrating`: a confidence calibration follows (of a
    translation model), and a time budget keeps time for it (`budget.Closing`).
    """
    started = time.perf_counter() if started is None else started
    if tc.tensorboard:
        require_tensorboard()  # before anything is written
    world_size, threads = int(os.environ.get("WORLD_SIZE", "1")), torch.get_num_threads()
    kept = kept_threads(tc) if resume else None
    placement = place(tc.device, tc.precision, world_size, threads=tc.threads or kept)
    if kept is not None and tc.threads is None:
        why = "kept from the run's start, so that it resumes bit for bit"
        placement = dataclasses.replace(placement, threads_reason=why)
    dist = init_distributed(placement.device)
    placement = dataclasses.replace(placement, device=dist.device)
    if placement.device.type == "cpu":
        keep_freed_memory()
    try:
        return _train(
            tc, dist, placement, resume, progress, reset_data_position, started, calibrating
        )
    finally:
        dist.close()
        torch.set_num_threads(threads)  # a count chosen for this run ends with it


def _train(
    tc: TrainConfig,
    dist: Distributed,
    placement: Placement,
    resume: bool,
    progress: bool,
    reset_data_position: bool,
    started: float,
    calibrating: bool,
) -> TrainResult:
    data = PreparedData(Path(tc.data))
    task = get_task(data.task)
    if tc.task is not None and get_task(tc.task) is not task:
        raise TrainingError(
            f"{tc.data} was prepared for task={task.name!r}, not {tc.task}; prepare it again "
            f"with task={tc.task!r}"
        )
    if tc.accumulate % dist.world_size:
        raise TrainingError(
            f"accumulate={tc.accumulate} micro-batches cannot be shared evenly by "
            f"{dist.world_size} processes; use a multiple of {dist.world_size}"
        )
    settings, record, seconds = recipe.settle(tc, dist, placement, data, resume, progress)
    placement = recipe.placed_as_settled(placement, settings, record, resume)
    if progress and dist.is_main:
        for line in placement.lines():
            print(line, file=sys.stderr)
    # train_config.json keeps what was asked ("auto"), so that a resume on other hardware chooses
    # again; from here on the run uses what was chosen.
    cfg, initial = open_run(tc, settings, dist, placement, data, resume)
    trainer = Trainer(settings, dist, data, task, cfg, initial, started)
    if resume:
        trainer.resume(reset_data_position)

    def update_seconds() -> float:  # what auto measured, or a few updates timed now
        if seconds is not None:
            return seconds
        return recipe.update_seconds(settings, cfg, data, dist, settings.precision)

    run_dir = Path(tc.out) if dist.is_main else None
    plan = resolve_plan(settings, cfg.d_model, trainer.state, record, update_seconds, run_dir)
    if progress and dist.is_main:
        print_plan(plan)
    trainer.apply(plan)
    trainer.closing.calibrating = calibrating and task.parallel  # translation models only
    return trainer.run(progress)


class Trainer(Pacing):
    """One run's model, optimizer (§5.3: Adam with beta1 0.9, beta2 0.98, eps 1e-9), loss
    scaler, data order and `TrainState`, and the loop that trains them."""

    def __init__(
        self,
        tc: TrainConfig,
        dist: Distributed,
        data: PreparedData,
        task: Task,
        cfg: ModelConfig,
        initial: nn.Module | None,
        started: float,
    ) -> None:
        self.tc, self.dist, self.data, self.task, self.cfg = tc, dist, data, task, cfg
        self.started = started  # when the time budget began (`train`'s `started`)
        self.run_dir = Path(tc.out)
        torch.manual_seed(tc.seed)
        model = task.build_model(cfg)
        if initial is not None:
            model.load_state_dict(initial.state_dict())
        self.model = model.to(dist.device)
        if tc.freeze == "embeddings":  # (and the output layer, where tied to them)
            for name, weight in self.model.named_parameters():
                weight.requires_grad_(not name.endswith("embed.token.weight"))
        trained = [p for p in self.model.parameters() if p.requires_grad]
        self.net = DistributedDataParallel(self.model) if dist.enabled else self.model
        self.optimizer = adam(trained, dist.device, tc.adam_betas, tc.adam_eps)
        self.scaler = grad_scaler(dist.device, tc.precision)
        self.guide = None  # --guided-alignment: one cross-attention head learns word alignments
        if tc.guided_alignment > 0:
            if not task.parallel:
                raise TrainingError(
                    f"guided_alignment={tc.guided_alignment:g} is for translation models"
                )
            self.guide = GuidedAlignment(self.model, data, tc.guided_alignment)
        self.learner = Learner(self.net, self.optimizer, self.scaler, self.guide)
        self.split = data.split("train")
        self.sampler = TokenBatchSampler(
            self.split.src_lengths, self.split.tgt_lengths, tc.batch_tokens, seed=tc.seed
        )
        self.state = TrainState(task.selection[0], data_fingerprint(data.meta))
        self.last_eval: dict | None = None
        self.plan: TrainPlan | None = None  # what the run does, taken by `apply`
        self.schedule: Schedule | None = None  # the plan's, its end moved by a time budget
        self.average: WeightAverage | None = None
        self.resumed_from: Path | None = None
        self.board: Board | None = None  # --tensorboard, on the main process
        self.closing = Closing()
        self.ledger = Ledger()  # where this session's time goes (time.json)
        cpu, timed = dist.device.type == "cpu", tc.max_minutes is not None
        self.threads = ThreadChoice.for_run(cpu, timed, tc.threads, dist.world_size)
        self.clock: Clock | None = None  # the run's clock, from `run`
        self.pace = PaceWatch()  # the wall time between updates, for a time budget's plan
        self.last_end: float | None = None  # when the previous update's iteration ended
        self.first: tuple[int, float] | None = None  # this session's first update and its time
        self.skipped_eval: int | None = None  # a validation step out_of_time skipped
        self.validation_began = 0.0
        self.eval_count: int | None = None  # the sentences a validation decodes (`validated`)
        self.decoding = 0.0  # of the latest validation, the share of its time spent decoding
        self.max_seconds = tc.max_minutes * 60 if tc.max_minutes is not None else math.inf

    def apply(self, plan: TrainPlan) -> None:
        """Take the run's `TrainPlan`: its schedule, cadence, weight average and subword dropout."""
        self.plan, self.schedule = plan, plan.schedule
        if self.state.warmup is not None and plan.schedule.knows_end:  # re-fitted to the pace
            self.schedule = dataclasses.replace(plan.schedule, warmup=self.state.warmup)
        if plan.bpe_dropout > 0:
            dropout = (plan.bpe_dropout, self.tc.seed, self.cfg.max_len - 1)
            self.split = subword_dropout(self.split, self.data, self.task, *dropout)
        if plan.ema_decay > 0:
            decay = self.state.ema_decay or plan.ema_decay
            self.average = WeightAverage(self.model, decay, plan.schedule.warmup)
            ema = self.resumed_from / WeightAverage.FILE if self.resumed_from else None
            if ema is not None and ema.exists():
                ckpt.load_weights(self.average.model, ckpt.read_weights(ema), ema)

    def resume(self, reset_data_position: bool) -> None:
        """Continue from the newest valid checkpoint (metrics logged after it are dropped)."""
        path = ckpt.latest_valid(self.run_dir / CHECKPOINTS, clean=True)
        if path is None:
            raise TrainingError(f"{self.run_dir}: no valid checkpoint to resume from")
        state = load_checkpoint(path, self.model, self.optimizer, self.task, self.scaler)
        self.resumed_from = path
        fingerprint = self.state.data_fingerprint
        if state.data_fingerprint != fingerprint:
            if not reset_data_position:
                raise TrainingError(
                    f"the data in {self.tc.data} changed since this run started; resume with "
                    "reset_data_position=True to continue on the new data from its beginning"
                )
            state.position, state.data_fingerprint = (0, 0), fingerprint
        self.state = state
        if self.dist.is_main:
            truncate_metrics(self.run_dir, state.step)

    def run(self, progress: bool) -> TrainResult:
        """Update until the step or time budget is spent or a stop is asked for; log, validate
        and checkpoint on the way."""
        tc, state, dist = self.tc, self.state, self.dist
        steps = tc.max_steps if tc.max_steps is not None else math.inf
        max_seconds = self.max_seconds
        stream = self.sampler.iterate(Position(*state.position))
        clock = self.clock = Clock(state.elapsed_seconds, state.target_tokens, self.started)
        self.ledger.add("start-up", time.perf_counter() - self.started)
        self.model.train()
        if tc.tensorboard and dist.is_main:
            resumed_at = state.step if self.resumed_from is not None else None
            self.board = Board(self.run_dir, resumed_at)
        with (
            StopRequest() as stop,
            self.board or contextlib.nullcontext(),
            progress_bar(
                total=state.horizon,
                initial=state.step,
                enabled=progress and dist.is_main,
                desc="training",
                unit="step",
            ) as bar,
        ):
            while state.step < self.last_step(steps):
                update = self.next_update(stream, bar)
                state.elapsed_seconds = clock.elapsed()
                if dist.is_main and (
                    state.step % tc.log_every == 0 or not math.isfinite(update.loss)
                ):
                    self.log(update, clock, bar, max_seconds)
                bar.update(1)
                self.follow_pace(bar, update.tokens, bool(self.threads.trial))
                out_of_time = self.out_of_time(bar)
                finished = state.step >= self.last_step(steps)
                finished = finished or dist.any(out_of_time or stop.requested)
                patience_out = self.validate_and_save(finished, bar)
                if finished or patience_out:
                    break
        if stop.requested:
            stopped_by = "interrupt"
        elif patience_out and not finished:
            stopped_by = "patience"
            if progress and dist.is_main:
                print(
                    f"stopped at step {state.step}: {tc.patience} validations without a better "
                    f"{self.task.selection[0]} (--patience {tc.patience})",
                    file=sys.stderr,
                )
        elif state.step < self.last_step(steps) or self.plan.horizon_from_time:
            stopped_by = "max_minutes"
        else:
            stopped_by = "max_steps"
        self.ledger.close(time.perf_counter() - self.started)
        if dist.is_main:
            self.ledger.write(self.run_dir)
        return TrainResult(
            self.run_dir,
            state.step,
            stopped_by,
            state.best,
            self.last_eval,
            self.task.name,
            tc.precision,
            dist.is_main,
            clock.deadline(max_seconds),
        )

    def update(self, micro: list[tuple[Position, Any]]) -> Update:
        """One optimizer update on `micro` (positions and index arrays), by the NaN policy."""
        state, tc = self.state, self.tc
        step = state.step + 1
        assert self.schedule is not None, "apply() takes the plan before the first update"
        lr = self.schedule(step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if isinstance(self.split, SubwordDropout):
            self.split.at(step)
        micro_batches = [b for _, b in micro]
        with self.ledger.timed("updates"):
            tokens, loss, grad_norm = train_update(
                self.learner, self.task, self.split, micro_batches, tc, self.dist
            )
            update = Update(loss, grad_norm, lr, tokens)
            if self.scaler.is_enabled():
                # fp16 overflows are expected while the loss scale settles: the scaler skips
                # such a step and lowers the scale; they are counted, not failures.
                self.scaler.step(self.optimizer)
                self.scaler.update()
                state.overflow_steps += int(not update.finite)
            elif update.finite:
                self.optimizer.step()
            elif tc.nan_policy == "skip":
                state.skipped_steps += 1
            else:
                self.stop_on_nan(step, update)
        state.step, state.position = step, (micro[-1][0].epoch, micro[-1][0].index)
        state.target_tokens += tokens
        if self.average is not None:
            with self.ledger.timed("averaging"):
                self.average.update(step)
        return update

    def next_update(self, stream: Any, bar: Any) -> Update:
        """The update on the next batches of `stream`, on the thread count the choice asks for;
        what a trial of counts decided is said (and logged)."""
        self.threads.before()
        began = time.perf_counter()
        update = self.update([next(stream) for _ in range(self.tc.accumulate)])
        said = self.threads.after(time.perf_counter() - began, update.tokens)
        if said is not None:
            self.pace.reset()  # a trial's end may set another count: its pace is new
        if said is not None and self.dist.is_main:
            bar.write(said, file=sys.stderr)
            append_metrics(self.run_dir, {"step": self.state.step, "threads": self.threads.chosen})
        return update

    def stop_on_nan(self, step: int, update: Update) -> None:
        if self.dist.is_main:
            append_metrics(
                self.run_dir,
                {"step": step, "loss": update.loss, "grad_norm": update.grad_norm, "lr": update.lr},
            )
        latest = ckpt.latest_valid(self.run_dir / CHECKPOINTS)
        raise TrainingError(
            f"non-finite loss ({update.loss}) or gradient norm ({update.grad_norm}) at step "
            f"{step}; stopped without saving it. Last good checkpoint: {latest or 'none'}. Try "
            f"precision='fp32', lr_scale={self.tc.lr_scale / 2:g}, clip_norm=1.0, "
            "or nan_policy='skip'"
        )

    def log(self, update: Update, clock: Clock, bar: Any, max_seconds: float) -> None:
        """A metrics.jsonl record and the progress bar's figures."""
        state = self.state
        tokens_per_s = clock.rate(state.target_tokens)
        record = {
            "step": state.step,
            "loss": update.loss,
            "lr": update.lr,
            "grad_norm": update.grad_norm,
            "tokens_per_s": tokens_per_s,
            "elapsed_seconds": state.elapsed_seconds,
            "epoch": state.position[0],
            "skipped_steps": state.skipped_steps,
        }
        if self.scaler.is_enabled():
            record.update(overflow_steps=state.overflow_steps, scale=self.scaler.get_scale())
        append_metrics(self.run_dir, record)
        if self.board is not None:
            self.board.record(record)
        postfix = {
            "loss": f"{update.loss:.3f}",
            "lr": f"{update.lr:.2e}",
            "tok/s": f"{tokens_per_s:.0f}",
        }
        if max_seconds < float("inf"):
            postfix["left"] = f"{max(max_seconds - state.elapsed_seconds, 0.0) / 60:.1f}min"
        bar.set_postfix(postfix)

    def validate_and_save(self, finished: bool, bar: Any) -> bool:
        """Validate every eval_every steps and checkpoint every save_every, and both at the end.
        With a time budget each validation re-plans the horizon from the pace so far (validation
        time included). True when --patience says to stop."""
        tc, state, dist = self.tc, self.state, self.dist
        step = state.step
        patience_out = False
        validating = self.validates_at(step) or finished
        if validating:
            if dist.is_main:
                began = self.clock.now()
                with self.ledger.timed("validation"):
                    self.last_eval = self.validate(bar)
                self.closing.validate = self.clock.now() - began
                self.closing.final = self.end_validation(self.closing.validate)
            if tc.patience is not None:
                patience_out = dist.any(state.since_best >= tc.patience)
            if self.plan.horizon_from_time and not finished:
                self.replan(step, bar)
            dist.barrier()
        saving = step % tc.save_every == 0 if tc.save_every else validating
        if saving or finished or patience_out:
            began = self.clock.now()
            if dist.is_main:
                extra = {}
                if self.average is not None:
                    average = self.average.model
                    extra[WeightAverage.FILE] = lambda p: ckpt.save_weights(average, p)
                save_checkpoint(
                    self.run_dir / CHECKPOINTS, self.learner, state, tc.keep_last, extra
                )
            dist.barrier()
            self.closing.save = self.clock.now() - began
            self.ledger.add("saving", self.closing.save)
        return patience_out

    def validate(self, bar: Any) -> dict | None:
        """Validate the weights and, when kept, their moving average; best/ takes whichever
        scores higher. The record holds the weights' figures, and the average's as ema_*."""
        tc, state, device = self.tc, self.state, self.dist.device
        began = self.validation_began = time.perf_counter()
        averaging = self.average is not None and state.step > self.average.start
        tc = dataclasses.replace(tc, eval_sentences=self.eval_count or tc.eval_sentences)
        deadline = self.validation_deadline(2 if averaging else 1)  # each takes half
        result = evaluate(self.model, self.data, tc, device, deadline)
        if result is None:
            return None
        self.decoding = result.pop(DECODING, 0.0)
        model, key = self.model, self.task.selection[0]
        line = f"step {state.step}: {evaluation_line(result)}"
        count = result.get("valid_sentences", tc.eval_sentences)
        if count < self.tc.eval_sentences and "valid_chrf" in result:  # fewer than asked
            result["valid_sentences"] = count
        if averaging:  # on the sentences the weights were validated on, to compare the two
            same = dataclasses.replace(tc, eval_sentences=count)
            deadline = self.validation_deadline(1)
            averaged = evaluate(self.average.model, self.data, same, device, deadline)
            assert averaged is not None
            self.decoding += averaged.pop(DECODING, 0.0)
            if "valid_sentences" in result:
                averaged["valid_sentences"] = count
            sign = 1 if self.task.selection[1] else -1
            use_average = sign * averaged[key] > sign * result[key]
            if use_average:
                model = self.average.model
            chosen = dict(averaged if use_average else result)
            chosen.update({f"ema_{k}": v for k, v in averaged.items() if k != "samples"})
            chosen["weights"] = "ema" if use_average else "last"
            chosen.update({f"last_{k}": v for k, v in result.items() if k != "samples"})
            result = chosen
            line += f" | average: {evaluation_line(averaged)}"
        before = state.best
        record_evaluation(self.run_dir, model, state, result, self.task)
        if self.board is not None:
            self.board.record({"step": state.step, **result})
            if self.task.parallel:  # cross-attention, between a source and a target
                self.board.attention(model, self.data, state.step)
        state.since_best = 0 if state.best != before else state.since_best + 1
        took = time.perf_counter() - began
        self.decoding = min(self.decoding / took, 1.0) if took > 0 else 0.0  # as a share
        self.validated(took, count)
        bar.write(line)
        return result
