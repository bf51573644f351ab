"""The training plan: every setting of a run decided once, before its first update.

`resolve_plan` takes what was asked (a `TrainConfig` whose `auto` preset `recipe.settle` has
already chosen), the model's width, the data and the run's state (fresh or resumed), and returns a
frozen `TrainPlan`: the schedule object with its horizon, how often to validate and save, the
weight average, subword dropout, and the line that says so. A new run records the plan in
recipe.json; a resumed run reads it back from there, so it follows the same plan step for step.
The `Trainer` applies the plan; the only thing that moves during training is a time budget's
horizon, re-planned from the pace at each validation (`time_horizon`).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vaswani.config import TrainConfig
from vaswani.safe_io import write_atomic
from vaswani.train import recipe
from vaswani.train.recipe import PAPER_EVAL_EVERY
from vaswani.train.schedule import Schedule, paper_peak, schedule_named
from vaswani.train.state import TrainState


@dataclass(frozen=True)
class TrainPlan:
    """What a run does, decided before its first update."""

    schedule: Schedule
    eval_every: int
    ema_decay: float
    """The weight average's decay per update; 0: no average."""
    bpe_dropout: float
    horizon_from_time: bool
    """The time budget, not max_steps, sets the end: each validation re-plans it from the pace."""
    reasons: tuple[str, ...] = ()
    """What was decided, in words (printed by `vaswani train`)."""


def resolve_plan(
    tc: TrainConfig,
    d_model: int,
    state: TrainState,
    record: dict,
    update_seconds: Callable[[], float],
    run_dir: Path | None,
) -> TrainPlan:
    """The plan of run `tc` with model width `d_model` from `state` (a resumed run's horizon is
    kept unless the budget changed). `record`: recipe.json so far; a new plan is added to it and
    written to `run_dir` (None: another process writes it). `update_seconds`: one update's time
    on this machine, asked only when a new run's time budget needs it."""
    schedule_kind = schedule_named(tc.schedule)
    before = state.horizon
    horizon_from_time = plan_horizon(tc, state, update_seconds)
    reasons = []
    if before is not None and before != state.horizon:
        reasons.append(
            f"budget changed to {tc.max_steps or '-'} steps / {tc.max_minutes or '-'} minutes: "
            f"the schedule now ends at update {state.horizon} instead of {before} (from update "
            f"{state.step + 1} the rate follows the {tc.schedule} schedule to the new end)"
        )
    if "plan" not in record:
        chosen = recipe.plan(tc, d_model, state.horizon or 1)
        if not schedule_kind.knows_end:  # the paper's recipe: only what was asked for
            chosen = dataclasses.replace(
                chosen,
                warmup=tc.warmup,
                eval_every=tc.eval_every or PAPER_EVAL_EVERY,
                lr=tc.lr or paper_peak(d_model, tc.warmup, tc.lr_scale),
                ema_decay=tc.ema_decay or 0.0,
            )
        record.update(schedule=tc.schedule, plan=dataclasses.asdict(chosen))
        if run_dir is not None:
            write_atomic(run_dir / recipe.RECORD, json.dumps(record, indent=1).encode())
    chosen = recipe.Plan(**record["plan"])
    schedule = schedule_kind(
        chosen.lr, chosen.warmup, state.horizon if schedule_kind.knows_end else None
    )
    eval_every = chosen.eval_every
    reasons.append(
        schedule.describe()
        + f"; validation every {eval_every} updates"
        + (f", weight average decay {chosen.ema_decay:.4f}" if chosen.ema_decay else "")
        + (f", subword dropout {chosen.bpe_dropout:g}" if chosen.bpe_dropout else "")
    )
    return TrainPlan(
        schedule,
        eval_every,
        chosen.ema_decay,
        chosen.bpe_dropout,
        horizon_from_time,
        tuple(reasons),
    )


def plan_horizon(tc: TrainConfig, state: TrainState, update_seconds: Callable[[], float]) -> bool:
    """Set `state.horizon`, the update at which the schedule ends: max_steps, or with a time
    budget the updates it buys at the measured pace (a new run's `update_seconds()`; a resumed
    run's own pace so far), whichever is smaller. A resume re-plans only when the budget changed.
    Returns whether the time budget sets it."""
    from_time = tc.max_minutes is not None
    budget = [tc.max_steps, tc.max_minutes]
    if state.horizon is not None and state.horizon_budget == budget:
        return from_time
    horizon = tc.max_steps if tc.max_steps is not None else None
    if tc.max_minutes is not None:
        if state.step > 0:
            pace = state.elapsed_seconds / state.step
        else:
            pace = update_seconds() / (1 - recipe.EVAL_SHARE)
        by_time = time_horizon(tc, state, pace)
        from_time = horizon is None or by_time < horizon
        horizon = by_time if horizon is None else min(horizon, by_time)
    state.horizon, state.horizon_budget = horizon, budget
    return from_time


def time_horizon(tc: TrainConfig, state: TrainState, pace: float) -> int:
    """The update at which the time budget runs out, at `pace` seconds an update (at most
    max_steps); each validation moves it by the pace so far."""
    remaining = max(tc.max_minutes * 60 - state.elapsed_seconds, 0.0)
    horizon = state.step + max(int(remaining / pace), 1)
    return horizon if tc.max_steps is None else min(horizon, tc.max_steps)


def print_plan(plan: TrainPlan) -> None:
    for line in plan.reasons:
        print(line, file=sys.stderr)
