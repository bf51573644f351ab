"""What `auto` picks for a training run: the model size (`--preset auto`), and the settings a
schedule that knows its end derives from the run's horizon (warm-up, peak rate, how often to
validate, the weight average's decay).

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
from vaswani.device import grad_scaler
from vaswani.safe_io import read_json
from vaswani.tasks import Task, get_task
from vaswani.train.distributed import Distributed
from vaswani.train.schedule import paper_peak, schedule_named
from vaswani.train.state import Learner
from vaswani.train.step import adam, model_config_for, train_update

RECORD = "recipe.json"
"""In the run directory: what auto chose (`Choice`) and the schedule's `Plan`, kept on resume."""
CANDIDATES = ("mini", "small", "base")
"""The sizes auto chooses among, smallest first (base with pre-norm: it trains stably with the
short warm-ups a budget allows, where the paper's post-norm needs its 4,000 steps)."""
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
        updates = min(updates, tc.max_minutes * 60 * (1 - EVAL_SHARE) / step_seconds)
    return updates * batch_tokens * tc.accumulate


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
    precision: str,
    data: PreparedData,
    resume: bool,
    progress: bool,
) -> tuple[TrainConfig, dict, float | None]:
    """The run's settings with `auto` decided: the preset chosen (`choose_size`, timing
    candidates on this machine) or, on resume, the choice recorded in recipe.json; then the
    preset's values for what was left unset. Also the recipe record so far, and the measured
    seconds per update of the chosen size (None when nothing was timed)."""

    run = Path(tc.out)
    record: dict = {}
    if resume:
        path = run / RECORD
        # A run from before recipe.json trained with the paper's schedule, the only one then.
        record = read_json(path, "recipe", dict) if path.exists() else {"schedule": PAPER_SCHEDULE}
    seconds = None
    if tc.preset == AUTO and tc.init is None:
        if "choice" in record:
            choice = Choice(**record["choice"])
        else:
            fields = get_task(data.task).model_fields(
                data.meta["tokenizer"]["vocab_size"], data.meta["tokenizer"].get("shared", True)
            )

            def timed(preset: str, model: dict, batch_tokens: int) -> float:
                candidate = dataclasses.replace(
                    tc, preset=preset, model=model, batch_tokens=batch_tokens
                )
                cfg = model_config_for(candidate, data)
                return update_seconds(candidate, cfg, data, dist, precision)

            choice = choose_size(tc, get_task(data.task), fields, timed)
            record["choice"] = choice.to_dict()
            seconds = choice.measured[choice.preset].get("step_seconds")
        tc = choice.apply(tc)
        if progress and dist.is_main:
            print(f"preset: {choice.preset} (auto: {choice.reason})", file=sys.stderr)
    if tc.schedule is None and "schedule" in record:
        tc = dataclasses.replace(tc, schedule=record["schedule"])
    return resolved(tc), record, seconds


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
