"""What `auto` picks for a training run: the model size (`--preset auto`), the precision, batch
and dropout fitted to the machine and the budget (`settle`), and the settings a schedule that
knows its end derives from the run's horizon (warm-up, peak rate, how often to validate, the
weight average's decay).

The rule for the size follows compute-optimal scaling (Hoffmann et al. 2022: the best model for a
compute budget grows with its square root, at a fixed ratio of training tokens to parameters):
the budget buys a number of training tokens on this machine, measured by timing a few updates of
each candidate, and auto takes the largest candidate that still sees `TOKENS_PER_PARAMETER`
target tokens per parameter. The ratio was measured with `benchmarks/learning_curve.py` (docs/training.md,
"How good a model will I get?").
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from vaswani.config import AUTO, PRESET_TRAINING, ModelConfig, TrainConfig
from vaswani.data import Position, PreparedData, TokenBatchSampler
from vaswani.device import Placement, grad_scaler
from vaswani.safe_io import read_json
from vaswani.tasks import Task, get_task
from vaswani.train.distributed import Distributed
from vaswani.train.schedule import paper_peak, schedule_named
from vaswani.train.state import Learner
from vaswani.train.step import adam, model_config_for, train_update

RECORD = "recipe.json"
"""In the run directory: what auto chose (`Choice`) and the schedule's `Plan`, kept on resume."""
CANDIDATES = ("micro", "mini", "small", "base")
"""The sizes auto chooses among, smallest first (base with pre-norm: it trains stably with the
short warm-ups a budget allows, where the paper's post-norm needs its 4,000 steps). micro (d_model
96) against mini (128), measured on Debian's Spanish catalogs (a 4,000-token vocabulary: 1.17M and
1.90M parameters), two runs side by side on one thread each, 1,024-token batches, no dropout, test
chrF (2 cores of an Intel Xeon with AMX): 4 minutes, mini 1,509 updates (0.8 target tokens per
parameter), 47.13; micro 2,065, 48.39; 5 minutes, mini 1,745 (0.9), 48.17; micro 2,343, 50.24;
10 minutes, mini 3,264 (1.8), 55.41; micro 4,206, 55.41. Alone on both cores for 5 minutes
(mini 1.6): mini 52.02 (1,958 updates of 1,408 tokens), micro 51.84 (2,090 of 1,920) and 51.82
(3,142 of 1,024). The smaller wins below the ratio TOKENS_PER_PARAMETER draws, and about ties at
it."""
AUTO_MODEL = {"base": {"norm": "pre"}}
TOKENS_PER_PARAMETER = 2.0
"""Target tokens a budget must buy per parameter for auto to take a size; measured with
benchmarks/learning_curve.py (docs/training.md): below it the smaller model scored higher."""
EVAL_SHARE = 0.1
"""The share of a time budget expected to go to validation before the first one is timed."""
WARMUP_SHARE = 0.1
"""Warm-up as a share of the horizon for the schedules that know their end."""
MAX_WARMUP = 4000
"""The paper's warm-up (§5.3): a longer run never warms up longer."""
PEAK_LR_AT_256 = 2e-3
"""Peak learning rate of a d_model=256 model with the linear and wsd schedules; other widths
scale it by (256 / d_model)^0.5, as the paper's schedule does with d_model^-0.5."""
EVALUATIONS = 8
"""Validations in a run whose horizon is known (each also saves a checkpoint)."""
MIN_UPDATES = 2000
"""Updates a time budget's run should make at least: where its preset's batches would give
fewer, they shrink to fit (`fitted_batch`). Measured on Debian's Spanish catalogs, mini, fp32,
test chrF (2 cores of an Intel Xeon with AMX): 5 minutes alone, 2048-token batches 1,243 updates,
47.2; 1024: 2,108, 49.1. 4 minutes on one thread (two runs side by side): 2048: 673, 35.8; 1024:
1,252, 39.7; 768: 1,407, 39.9; 512: 1,890, 38.0. Halving the batch buys 1.7-1.9x the updates."""
MIN_BATCH = 1024
"""The smallest batch (tokens) `fitted_batch` makes: 768-1,024 were the best measured sizes, and
a run beside two busy processes fitted to 576-640 tokens processed half the tokens of one on
2,048 (0.55M against 0.98M in 5 minutes) and scored no better (test chrF 26.4 and 23.7 against
27.1)."""
BF16_MARGIN = 1.3
"""A run times a few updates in bf16 and in fp32 on a CPU that computes bf16 natively, and
trains in bf16 only where it was this many times the faster: those updates repeat a few batch
shapes, and through a run every new shape costs bf16 oneDNN's making of its kernels again (its
cache of them holds 1,024), which the timing does not see. Measured on 2 cores of an Intel Xeon
with AMX, Debian's Spanish catalogs, timed (2,048-token batches) and run: mini took 0.322 s
in bf16 and 0.280 in fp32 (runs' own timings: 0.87-1.07x), where 300 updates of 1,280 tokens
ran 58.6 s in bf16 and 45.7 in fp32 (47.4 in bf16 with a cache of 8,192); small 0.423 and 0.544
(1.29x), where 150 updates ran 69.7 s and 68.2. Those runs held 1.7 and 2.7 GiB in bf16,
0.5 and 0.8 in fp32."""
FEW_EPOCHS = 6.0
"""A run of a size auto chose whose budget shows it its training data fewer times than this
trains without dropout (`few_epochs`). Measured on Debian's Spanish catalogs (46,177 pairs, 0.70M
target tokens), mini, fp32, two runs side by side on one thread each (2 cores of an Intel Xeon with
AMX), test chrF with dropout 0.1 and 0: 4 minutes, 1,024-token batches (about 1.9 passes over
the data): 38.75 and 44.25; 8 minutes, 1,024 (3.1): 47.54 and 52.45; 18 minutes, 2,048 (7.9):
55.93 and 56.64. The gain shrinks toward 8 passes; the line is drawn short of where it ends."""

PAPER_PRESETS = ("base", "big")
"""Presets that, chosen by name with --max-steps, train with the paper's recipe exactly."""
PAPER_SCHEDULE, BUDGET_SCHEDULE = "inverse-sqrt", "linear"
"""The schedules a run gets when none is asked for: the paper's for its presets, else linear."""
PAPER_EVAL_EVERY = 500
"""Validations of a schedule with no end: every 500 updates unless asked otherwise."""


def resolved(tc: TrainConfig) -> TrainConfig:
    """`tc` with the preset's value for every setting left as None (`auto` is decided by
    `settle`, which replaces the preset first; a fine-tune (--init), whose model comes from
    that run, takes the small preset's training settings). A schedule with an end derives its
    warm-up and rate from the horizon instead (`plan`)."""
    preset = dict(PRESET_TRAINING["small" if tc.preset == AUTO else tc.preset])
    name = tc.schedule or (PAPER_SCHEDULE if tc.preset in PAPER_PRESETS else BUDGET_SCHEDULE)
    if schedule_named(name).knows_end:
        del preset["warmup"], preset["lr_scale"]
    preset["schedule"] = name
    return dataclasses.replace(
        tc, **{key: value for key, value in preset.items() if getattr(tc, key) is None}
    )


@dataclass(frozen=True)
class Choice:
    """What `--preset auto` chose and why: recorded as RUN/recipe.json, reused on resume."""

    preset: str
    model: dict[str, Any]
    reason: str
    measured: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def apply(self, tc: TrainConfig) -> TrainConfig:
        """`tc` with the chosen preset, its model fields under the user's own overrides."""
        return dataclasses.replace(tc, preset=self.preset, model={**self.model, **tc.model})


def parameter_count(
    task: Task | str, task_fields: dict[str, Any], preset: str, overrides: dict[str, Any]
) -> int:
    """Parameters of a preset's model for `task`, sized to the data, counted without allocating
    weights."""
    cfg = ModelConfig.from_preset(preset, **{**task_fields, **overrides})
    with torch.device("meta"):
        model = get_task(task).build_model(cfg)
    return sum(p.numel() for p in model.parameters())


def budget_tokens(tc: TrainConfig, batch_tokens: int, step_seconds: float | None) -> float:
    """Target tokens (at most; batches hold padding too) the budget buys: max_steps updates, or
    the time budget's updates at `step_seconds` each after validation's share."""
    updates = math.inf
    if tc.max_steps is not None:
        updates = tc.max_steps
    if tc.max_minutes is not None and step_seconds is not None:
        updates = min(updates, time_updates(tc.max_minutes, step_seconds))
    return updates * batch_tokens * tc.accumulate


def time_updates(max_minutes: float, step_seconds: float) -> float:
    """The updates a time budget buys at `step_seconds` each, after validation's share."""
    return max_minutes * 60 * (1 - EVAL_SHARE) / step_seconds


def choose_size(
    tc: TrainConfig,
    task: Task | str,
    task_fields: dict[str, Any],
    step_seconds: Callable[[str, dict[str, Any], int], float],
) -> Choice:
    """The largest candidate whose budget buys TOKENS_PER_PARAMETER target tokens per parameter
    (the smallest when none does). `step_seconds(preset, model_fields, batch_tokens)` times an
    update; it is called only under a time budget, smallest candidate first, and never for a size
    past the first that falls short."""
    chosen, measured, lines = CANDIDATES[0], {}, []
    for preset in CANDIDATES:
        overrides = {**AUTO_MODEL.get(preset, {}), **tc.model}
        batch = tc.batch_tokens or PRESET_TRAINING[preset]["batch_tokens"]
        seconds = None
        if tc.max_minutes is not None:
            seconds = step_seconds(preset, overrides, batch)
        params = parameter_count(task, task_fields, preset, overrides)
        ratio = budget_tokens(tc, batch, seconds) / params
        measured[preset] = {"parameters": params, "tokens_per_parameter": round(ratio, 2)}
        if seconds is not None:
            measured[preset]["step_seconds"] = round(seconds, 4)
        lines.append(f"{preset} {params / 1e6:.1f}M: {ratio:.1f} tokens/parameter")
        if ratio < TOKENS_PER_PARAMETER:
            break
        chosen = preset
    reason = (
        f"the budget buys {', '.join(lines)}; auto takes the largest size with at least "
        f"{TOKENS_PER_PARAMETER:g}"
    )
    return Choice(chosen, AUTO_MODEL.get(chosen, {}), reason, measured)


@dataclass(frozen=True)
class Plan:
    """The settings that follow from a run's horizon (in updates), for the schedules that know
    their end, where the user left them to auto."""

    warmup: int
    lr: float
    eval_every: int
    ema_decay: float
    bpe_dropout: float = 0.0


def plan(tc: TrainConfig, d_model: int, horizon: int) -> Plan:
    """Warm-up WARMUP_SHARE of the horizon (at most the paper's 4,000 steps), peak rate by width
    (or the paper's peak for a given lr_scale), EVALUATIONS validations, and an average over
    about the last 10% of updates."""
    warmup = tc.warmup or max(1, min(MAX_WARMUP, round(WARMUP_SHARE * horizon)))
    if tc.lr is not None:
        lr = tc.lr
    elif tc.lr_scale is not None:
        lr = paper_peak(d_model, warmup, tc.lr_scale)
    else:
        lr = PEAK_LR_AT_256 * (256 / d_model) ** 0.5
    eval_every = tc.eval_every or max(1, math.ceil(horizon / EVALUATIONS))
    ema_decay = tc.ema_decay if tc.ema_decay is not None else 1 - 1 / max(10, horizon / 10)
    return Plan(warmup, lr, eval_every, ema_decay, tc.bpe_dropout)


def validation_cadence(
    eval_every: int,
    updates_left: int,
    seconds_left: float,
    validation_seconds: float,
    asked: int | None = None,
) -> int:
    """Updates between validations from here on: the plan's `eval_every`, or fewer validations
    where those left would take more than `EVAL_SHARE` of the time left, at `validation_seconds`
    each (a short budget: in a 2-minute run 8 validations took half the time). A cadence the
    user `asked` for stays."""
    if asked is not None or validation_seconds <= 0 or updates_left <= 0:
        return eval_every
    affordable = max(int(EVAL_SHARE * seconds_left / validation_seconds), 1)
    return max(eval_every, math.ceil(updates_left / affordable))


def settle(
    tc: TrainConfig,
    dist: Distributed,
    placement: Placement,
    data: PreparedData,
    resume: bool,
    progress: bool,
) -> tuple[TrainConfig, dict, float | None]:
    """The run's settings with `auto` decided, each recorded in recipe.json and kept on resume:
    the preset (`choose_size`, timing candidates on this machine), the precision (the faster of
    `precisions_to_time`), the preset's values for what was left unset, and the batch size
    (`fitted_batch`). Also the record so far, and the measured seconds per update of the chosen
    size (None when nothing was timed)."""

    run = Path(tc.out)
    record: dict = {}
    if resume:
        path = run / RECORD
        # A run from before recipe.json trained with the paper's schedule, the only one then.
        record = read_json(path, "recipe", dict) if path.exists() else {"schedule": PAPER_SCHEDULE}
    timer = UpdateTimer(tc, data, dist, precisions_to_time(tc, placement))
    say = print if progress and dist.is_main else lambda *args, **kwargs: None
    asked_batch = tc.batch_tokens
    if tc.preset == AUTO and tc.init is None:
        if "choice" not in record:
            fields = get_task(data.task).model_fields(
                data.meta["tokenizer"]["vocab_size"], data.meta["tokenizer"].get("shared", True)
            )
            record["choice"] = choose_size(tc, get_task(data.task), fields, timer).to_dict()
        choice = Choice(**record["choice"])
        tc = choice.apply(tc)
        say(f"preset: {choice.preset} (auto: {choice.reason})", file=sys.stderr)
    if tc.schedule is None and "schedule" in record:
        tc = dataclasses.replace(tc, schedule=record["schedule"])
    tc = resolved(tc)
    tc = dataclasses.replace(tc, precision=timer.settle_precision(tc, record, resume))
    if "dropout" in record or ("choice" in record and not resume and "dropout" not in tc.model):
        tc = settle_dropout(tc, record, timer, data, say)
    if "batch" in record:  # chosen at the run's start
        tc = dataclasses.replace(tc, batch_tokens=record["batch"]["batch_tokens"])
    elif fits_its_batch(tc, asked_batch, resume):
        updates = time_updates(tc.max_minutes, timer.measured(tc)[tc.precision])
        wanted = min(MIN_UPDATES, tc.max_steps or MIN_UPDATES)
        batch = fitted_batch(tc.batch_tokens, updates, data, wanted)
        if batch < tc.batch_tokens:
            reason = (
                f"auto: the budget buys about {updates:.0f} updates of {tc.batch_tokens} tokens; "
                f"a short run learns more from {wanted} smaller ones"
            )
            record["batch"] = {"batch_tokens": batch, "reason": reason}
            tc = dataclasses.replace(tc, batch_tokens=batch)
            timer(tc.preset, tc.model, batch)  # the plan's pace at this size
            say(f"batch: {batch} tokens ({reason})", file=sys.stderr)
    return tc, record, timer.speeds.get((tc.preset, tc.batch_tokens), {}).get(tc.precision)


@dataclass
class UpdateTimer:
    """Times one update of the run `tc` would be with another preset or batch size, on this
    machine, in each of `precisions` (`update_seconds`), keeping what it measured."""

    tc: TrainConfig
    data: PreparedData
    dist: Distributed
    precisions: tuple[str, ...]
    speeds: dict[tuple[str, int | None], dict[str, float]] = dataclasses.field(default_factory=dict)
    """Seconds of an update by precision, for each (preset, batch_tokens) timed."""

    def __call__(self, preset: str, model: dict, batch_tokens: int | None) -> float:
        """Seconds of one update of `preset` in the fastest of `precisions`."""
        candidate = dataclasses.replace(
            self.tc, preset=preset, model=model, batch_tokens=batch_tokens
        )
        cfg = model_config_for(candidate, self.data)
        self.speeds[preset, batch_tokens] = {
            precision: update_seconds(candidate, cfg, self.data, self.dist, precision)
            for precision in self.precisions
        }
        return min(self.speeds[preset, batch_tokens].values())

    def measured(self, tc: TrainConfig) -> dict[str, float]:
        """Seconds of one update of `tc` (resolved) by precision, timed once (each of the
        precisions it is timed in from then on)."""
        if (tc.preset, tc.batch_tokens) not in self.speeds:
            self(tc.preset, tc.model, tc.batch_tokens)
        return self.speeds[tc.preset, tc.batch_tokens]

    def settle_precision(self, tc: TrainConfig, record: dict, resume: bool) -> str:
        """The precision of run `tc` (resolved): the one recorded at its start where
        this machine offers it (a resumed run computes as it began; one from before the record
        as placed), else the faster of `precisions` in an update of its model, recorded.
        bf16 is taken only where it is BF16_MARGIN times the faster. From here on the timer
        times that precision only."""
        if resume:
            kept = record.get("precision", {}).get("chosen")
            self.precisions = (kept,) if kept in self.precisions else self.precisions[:1]
        if len(self.precisions) > 1:  # bf16 and fp32 (`precisions_to_time`)
            measured = self.measured(tc)
            faster = measured["bf16"] * BF16_MARGIN < measured["fp32"]
            record["precision"] = {
                "chosen": "bf16" if faster else "fp32",
                "update_seconds": {name: round(value, 4) for name, value in measured.items()},
            }
            self.precisions = (record["precision"]["chosen"],)
        return self.precisions[0]


def settle_dropout(
    tc: TrainConfig, record: dict, timer: UpdateTimer, data: PreparedData, say: Callable
) -> TrainConfig:
    """Run `tc` (its size chosen by auto, resolved) without dropout where its budget shows it
    its training data fewer than FEW_EPOCHS times (`few_epochs`), said on `say` and recorded;
    a resume keeps what its start recorded."""
    if "dropout" not in record:
        seconds = timer.measured(tc)[tc.precision] if tc.max_minutes is not None else None
        reason = few_epochs(budget_tokens(tc, tc.batch_tokens, seconds), data)
        if reason is None:
            return tc
        record["dropout"] = {"dropout": 0.0, "reason": reason}
        say(f"dropout: 0 ({reason})", file=sys.stderr)
    return dataclasses.replace(tc, model={**tc.model, "dropout": record["dropout"]["dropout"]})


def few_epochs(tokens: float, data: PreparedData) -> str | None:
    """Why a run whose budget buys `tokens` target tokens trains without dropout: it shows the
    model its training data fewer than FEW_EPOCHS times, where dropout (§5.4, against
    overfitting) slows learning more than it guards; None where it shows it more often (or the
    data does not say its size)."""
    data_tokens = data.meta["splits"]["train"]["tgt_lengths"].get("tokens")
    if not data_tokens or tokens >= FEW_EPOCHS * data_tokens:
        return None
    return (
        f"auto: the budget shows the model its training data about {tokens / data_tokens:.1f} "
        f"times; below {FEW_EPOCHS:g}, dropout slows learning more than it prevents overfitting"
    )


def fits_its_batch(tc: TrainConfig, asked: int | None, resume: bool) -> bool:
    """Whether a run's batch size is fitted to its budget (`fitted_batch`): a new run with a
    time budget, a schedule that knows its end, and no batch size asked for; not a fine-tune."""
    budget = tc.max_minutes is not None and schedule_named(tc.schedule).knows_end
    return budget and asked is None and not resume and tc.init is None


def fitted_batch(
    batch_tokens: int, updates: float, data: PreparedData, wanted: int = MIN_UPDATES
) -> int:
    """The preset's `batch_tokens`, or, where the time budget buys fewer than `wanted` `updates`
    of them (MIN_UPDATES, or a step budget's max_steps where that is fewer: the steps end the run
    before it makes more), batches that much smaller (a multiple of 64, at least MIN_BATCH and
    the data's longest pair), so that the run makes about `wanted` updates (or as many as
    MIN_BATCH allows)."""
    if updates >= wanted:
        return batch_tokens
    train = data.meta["splits"]["train"]
    longest = 1 + max(train["src_lengths"]["max"], train["tgt_lengths"]["max"])
    smaller = int(batch_tokens * updates / wanted) // 64 * 64
    return min(batch_tokens, max(smaller, MIN_BATCH, longest))


def precisions_to_time(tc: TrainConfig, placement: Placement) -> tuple[str, ...]:
    """The precisions a run compares by timing its own updates: bf16 autocast and fp32 where
    `auto` placed it in bf16 on a CPU that computes bf16 natively, and a fresh model is trained
    (at a small width fp32 can be the faster: the mini preset trained 1.15-1.5x faster in fp32
    on 2 cores of an Intel Xeon with AMX); else only the precision placed."""
    cpu_bf16 = placement.device.type == "cpu" and placement.precision == "bf16"
    if tc.precision == AUTO and cpu_bf16 and tc.init is None:
        return ("bf16", "fp32")
    return (placement.precision,)


def placed_as_settled(
    placement: Placement, tc: TrainConfig, record: dict, resume: bool
) -> Placement:
    """`placement` with the precision `settle` chose for `tc`, and why."""
    measured = record.get("precision", {}).get("update_seconds")
    if resume and tc.precision != placement.precision:
        why = "kept from the run's start"
    elif measured and not resume:
        times = " and ".join(f"{seconds:.3f} s in {name}" for name, seconds in measured.items())
        why = f"auto: an update of the {tc.preset} model took {times} here"
        why += f"; bf16 where {BF16_MARGIN:g}x faster"
    else:
        return placement
    return dataclasses.replace(placement, precision=tc.precision, precision_reason=why)


def update_seconds(
    tc: TrainConfig,
    cfg: ModelConfig,
    data: PreparedData,
    dist: Distributed,
    precision: str,
    updates: int = 3,
) -> float:
    """Seconds one optimizer update of model `cfg` takes here, timed on the run's first batches
    with throwaway weights (the median of `updates` after one to warm up). The random generators
    are put back, so that timing changes nothing of the run itself; every process gets the mean."""

    rng = torch.get_rng_state()
    task = get_task(data.task)
    tc = dataclasses.replace(resolved(tc), precision=precision)
    alone = Distributed(device=dist.device)
    model = task.build_model(cfg).to(dist.device)
    optimizer = adam(model.parameters(), dist.device)
    scaler = grad_scaler(dist.device, tc.precision)
    split = data.split("train")
    sampler = TokenBatchSampler(split.src_lengths, split.tgt_lengths, tc.batch_tokens, seed=tc.seed)
    stream = sampler.iterate(Position(0, 0))
    times = []
    for _ in range(updates + 1):
        began = time.perf_counter()
        # This process's share of an update, timed alone: the throwaway model is not wrapped in
        # DDP, so no gradients are exchanged.
        micro = [next(stream)[1] for _ in range(max(tc.accumulate // dist.world_size, 1))]
        train_update(Learner(model, optimizer, scaler), task, split, micro, tc, alone)
        optimizer.step()
        times.append(time.perf_counter() - began)
    torch.set_rng_state(rng)
    seconds = sorted(times[1:])[len(times[1:]) // 2]
    return dist.sum(torch.tensor(seconds, dtype=torch.float64)).item() / dist.world_size
