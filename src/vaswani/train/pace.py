"""A time budget's plan fitted again to the pace the run has: on a shared machine a neighbour
comes or goes and an update takes twice or half as long as when the run was planned.

`PaceWatch` takes the wall time between the run's updates (validations and saves included, as
the deadline counts them; a thread trial's updates left out), per target token, and says when the
pace of the last `SPAN` seconds departs from the pace the current plan implies by more than
`DRIFT`; `refit` then fits the horizon, the
warm-up (while it is still running), the validation spacing and the weight average's decay to the
time left at the new pace, so that the learning rate ends its schedule at the deadline: no run
ends early, and none spends its last minutes at a rate of zero. Both are pure: tests give them a
fake pace. `Pacing` is the `Trainer`'s side of it: the deadline, the validations' cadence, and the
plan fitted again at each update where the pace departs and at each validation.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from vaswani.config import TrainConfig
from vaswani.run import append_metrics
from vaswani.tasks import FIRST_CHUNK
from vaswani.train import recipe
from vaswani.train.plan import time_horizon

DRIFT = 0.25
"""The pace departs from the plan's when it is this much slower or faster."""
WINDOW = 8
"""The fewest updates a pace is measured on."""
SPAN = 15.0
"""The seconds of recent updates a pace is measured on (at least WINDOW updates): on an idle
machine the pace of a few dozen short updates still swings by half as batch lengths change."""
KEPT = 4096
"""The most recent updates kept."""
VALIDATION_MOST = recipe.EVAL_SHARE / 2
"""The most of a time budget one validation takes (the last one and another fill the share)."""
END_DECODING = VALIDATION_MOST / 4
"""The most of a time budget kept for the final validation's decoding (and the calibration's)."""


@dataclass
class PaceWatch:
    """The wall time of the run's recent updates, against the pace its plan implies. Batches
    differ in size (an update's time varies by a third on a steady machine), so each update's
    time is taken per target token, and the pace of a stretch of updates is the median of those
    times the stretch's mean tokens an update."""

    kept: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=KEPT))
    """(seconds, target tokens) of each recent update, oldest first."""

    def observe(self, seconds: float, tokens: int) -> None:
        """Take the wall time since the previous update ended, and this update's tokens."""
        self.kept.append((seconds, max(tokens, 1)))

    def reset(self) -> None:
        """Forget the updates timed: what comes next is a new pace (another thread count)."""
        self.kept.clear()

    def window(self) -> list[tuple[float, int]]:
        """The latest updates that cover SPAN seconds and WINDOW updates, oldest first (empty:
        too few yet)."""
        total, window = 0.0, []
        for seconds, tokens in reversed(self.kept):
            total += seconds
            window.append((seconds, tokens))
            if total >= SPAN and len(window) >= WINDOW:
                return window[::-1]
        return []

    @staticmethod
    def _pace(updates: list[tuple[float, int]]) -> float:
        per_token = statistics.median(seconds / tokens for seconds, tokens in updates)
        return per_token * statistics.fmean(tokens for _, tokens in updates)

    @property
    def pace(self) -> float | None:
        """Seconds an update at the recent pace (None: too few updates timed yet)."""
        window = self.window()
        return self._pace(window) if window else None

    def departed(self, planned: float) -> float | None:
        """The pace of the latest half of the window where it and the whole window's both depart
        from `planned` (seconds an update) by more than DRIFT, the same way; else None. The
        updates kept start again then, so that the next verdict is on the new pace alone."""
        window = self.window()
        if not window or planned <= 0:
            return None
        latest = self._pace(window[len(window) // 2 :])
        ratios = (self._pace(window) / planned, latest / planned)
        if not (all(r > 1 + DRIFT for r in ratios) or all(r < 1 / (1 + DRIFT) for r in ratios)):
            return None
        self.reset()
        return latest


@dataclass(frozen=True)
class Refit:
    """A plan fitted to the time left: where the schedule ends, its warm-up, updates between
    validations, the average's decay (None: none kept); the pace it was fitted to and the one
    the plan before it implied (seconds an update)."""

    horizon: int
    warmup: int
    eval_every: int
    ema_decay: float | None
    pace: float = 0.0
    planned: float = 0.0

    def line(self, step: int) -> str:
        why = "slower" if self.pace > self.planned else "faster"
        decay = f", average decay {self.ema_decay:.4f}" if self.ema_decay else ""
        return (
            f"re-planned at update {step}: {self.pace:.2f} s an update, {why} than the "
            f"{self.planned:.2f} s planned (the machine's load changed): the schedule ends at "
            f"update {self.horizon}, warm-up {self.warmup}, validation every {self.eval_every}"
            f"{decay}"
        )

    def record(self, step: int) -> dict:
        """The metrics.jsonl record of it."""
        return {
            "step": step,
            "replanned": {
                "pace_seconds": self.pace,
                "planned_seconds": self.planned,
                "horizon": self.horizon,
                "warmup": self.warmup,
                "eval_every": self.eval_every,
                "ema_decay": self.ema_decay,
            },
        }


@dataclass(frozen=True)
class Fitting:
    """What `refit` starts from: the run at `step`, the seconds left, the schedule's warm-up,
    the seconds a validation takes, and what the user fixed (None: the plan chooses)."""

    step: int
    seconds_left: float
    warmup: int
    validation_seconds: float
    max_steps: int | None = None
    asked_warmup: int | None = None
    asked_eval_every: int | None = None
    averaging: bool = True
    asked_ema_decay: float | None = None


def refit(at: Fitting, pace: float) -> Refit:
    """The plan for the time left at `pace` seconds an update (validations apart): the horizon
    the time buys once the validations left are paid for (at most max_steps), a warm-up still to
    come shortened to the recipe's share of the new horizon, validations spaced so that they
    take at most `recipe.EVAL_SHARE` of the time left, and the average's decay of a run of the
    new length."""
    updates = max(int(at.seconds_left * (1 - recipe.EVAL_SHARE) / pace), 1)
    horizon = at.step + updates
    if at.max_steps is not None:
        horizon = min(horizon, at.max_steps)
    left = max(horizon - at.step, 1)
    warmup = at.warmup
    if at.asked_warmup is None and at.step < at.warmup:
        share = round(recipe.WARMUP_SHARE * horizon)
        warmup = max(at.step + 1, min(at.warmup, share, recipe.MAX_WARMUP))
    planned = at.asked_eval_every or max(1, math.ceil(horizon / recipe.EVALUATIONS))
    eval_every = recipe.validation_cadence(
        planned, left, at.seconds_left, at.validation_seconds, at.asked_eval_every
    )
    decay = None
    if at.averaging:
        decay = at.asked_ema_decay or 1 - 1 / max(10, horizon / 10)
    return Refit(horizon, warmup, eval_every, decay)


class Pacing:
    """The `Trainer`'s keeping of a time budget: when to stop, when to validate, and the plan
    fitted to the pace, at each update where it departs (`follow_pace`) and at each validation
    (`replan`). It reads and sets the trainer's state, schedule, plan and weight average."""

    state: Any
    tc: TrainConfig
    schedule: Any
    plan: Any
    dist: Any
    closing: Any
    average: Any
    run_dir: Any
    max_seconds: float
    first: tuple[int, float] | None
    pace: PaceWatch
    last_end: float | None
    skipped_eval: int | None
    clock: Any
    ledger: Any
    validation_began: float
    eval_count: int | None
    decoding: float

    def last_step(self, steps: float) -> float:
        """The update the run ends at: its schedule's horizon (moved by a time budget), else
        `steps` (max_steps, or none)."""
        return self.schedule.horizon if self.schedule.horizon is not None else steps

    def out_of_time(self, bar: Any) -> bool:
        """True when one more update and then the run's end (`Closing`) would pass the time
        budget. At a validation step where this validation, one more update and the end would
        not fit, the validation is skipped (said on `bar`): the run's end validates instead, so
        the run trains on rather than ending a validation early. The pace is this session's after
        its first update (which also paid for the setup), validations included."""
        state = self.state
        if self.first is None:
            self.first = (state.step, state.elapsed_seconds)
        room = self.max_seconds - state.elapsed_seconds
        pace = (state.elapsed_seconds - self.first[1]) / max(state.step - self.first[0], 1)
        if room < pace + self.closing.end():
            return True
        if self.validates_at(state.step):  # the same step in every process
            late = room < pace + self.closing.end(validating=True)
            if self.dist.any(late):
                self.skipped_eval = state.step
                if self.dist.is_main:
                    bar.write(
                        f"validation at step {state.step} skipped: it and the run's end would "
                        f"not fit in the {room:.0f} s left; the end validates",
                        file=sys.stderr,
                    )
                    record = {"seconds_left": round(room, 2), "reason": "deadline"}
                    append_metrics(self.run_dir, {"step": state.step, "skipped_validation": record})
        return False

    def validation_deadline(self, evaluations: int) -> float | None:
        """When a validation's decoding stops, on `time.perf_counter` (None: no time budget):
        where the run must end, less the save and calibration after it; and in a run's first
        validation, whose cost nothing measured yet, when its `evaluations` (the weights', the
        average's) have had `VALIDATION_MOST` of the budget between them."""
        end = self.clock.deadline(self.max_seconds - self.closing.save - self.closing.calibrate)
        if end is None or self.eval_count is not None:
            return end
        now = time.perf_counter()
        most = VALIDATION_MOST * self.max_seconds - (now - self.validation_began)
        return min(end, now + max(most, 0.0) / max(evaluations, 1))

    def end_validation(self, seconds: float) -> float:
        """The time kept for the final validation (and as much for the calibration after it),
        from the latest validation's `seconds`: all of what does not stop at the deadline (the
        loss over the valid split) and of its decoding at most `END_DECODING` of the budget. An
        untrained model's first validation decodes to the length limit (15 s where the last
        took 6.5), and keeping that much ended 5-minute runs 15 s early; the decoding of both
        stops at the deadline, so a shortfall costs them sentences, never the budget."""
        decoding = seconds * self.decoding  # `decoding`: its share of the latest validation
        return seconds - decoding + min(decoding, END_DECODING * self.max_seconds)

    def validated(self, seconds: float, sentences: int) -> None:
        """After a validation of `sentences` that took `seconds`: the sentences the next ones
        decode, fewer where one took over `VALIDATION_MOST` of the budget (the same for every
        validation from then on, so that their figures compare). With the validations spaced out
        by `recipe.validation_cadence`, validation stays within `recipe.EVAL_SHARE`."""
        if not math.isfinite(self.max_seconds):
            return
        most = VALIDATION_MOST * self.max_seconds
        fewer = int(sentences * most / seconds) if seconds > most else sentences
        self.eval_count = max(min(fewer, sentences), FIRST_CHUNK)

    def fitted(self) -> Refit | None:
        """The plan fitted again where the watch sees the pace depart from the one the plan
        implies; None where it holds, or in the last WINDOW updates (the deadline's own check
        ends the run there). The watch's pace leaves validations out (`PaceWatch`), and so does
        the plan's: the time left, less the validations still to come at the latest one's cost
        (at most `recipe.EVAL_SHARE` of it, what `refit` keeps), over the updates left. Set
        against the time left whole, a 5-minute run beside a busy loop re-planned 6 times, once
        to the 0.21 s an update it had been fitted to 291 updates before."""
        state, tc = self.state, self.tc
        seconds_left = self.max_seconds - state.elapsed_seconds
        updates_left = (state.horizon or 0) - state.step
        if updates_left < WINDOW or seconds_left <= 0:
            return None
        validations = math.ceil(updates_left / (state.eval_every or self.plan.eval_every))
        kept = min(validations * self.closing.validate, recipe.EVAL_SHARE * seconds_left)
        planned = (seconds_left - kept) / updates_left
        pace = self.pace.departed(planned)
        if pace is None:
            return None
        at = Fitting(
            state.step,
            seconds_left,
            self.schedule.warmup,
            self.closing.validate,
            tc.max_steps,
            tc.warmup,
            tc.eval_every,
            self.average is not None,
            tc.ema_decay,
        )
        return dataclasses.replace(refit(at, pace), pace=pace, planned=planned)

    def follow_pace(self, bar: Any, tokens: int, trial: bool) -> None:
        """Take the wall time since the previous update (of `tokens` target tokens; not during a
        trial of thread counts, whose updates run at other counts) and, under a time budget, fit
        the plan again where the pace departs from the one it implies. One process only: several
        would each see their own pace (their validations re-plan together)."""
        if not self.plan.horizon_from_time or self.dist.enabled:
            return  # nothing to fit: the updates are not timed
        state, now = self.state, self.state.elapsed_seconds
        if self.last_end is not None and not trial:
            self.pace.observe(now - self.last_end, tokens)
        self.last_end = now
        fit = self.fitted()
        if fit is None:
            return
        state.horizon, state.warmup, state.eval_every = fit.horizon, fit.warmup, fit.eval_every
        state.next_eval, state.paced_from = state.step + fit.eval_every, [state.step, now]
        self.schedule = self.schedule.ending_at(fit.horizon)
        if self.schedule.knows_end:
            self.schedule = dataclasses.replace(self.schedule, warmup=fit.warmup)
        if self.average is not None:
            self.average.decay = state.ema_decay = fit.ema_decay
        bar.total = fit.horizon
        bar.write(fit.line(state.step), file=sys.stderr)
        append_metrics(self.run_dir, fit.record(state.step))

    def validates_at(self, step: int) -> bool:
        """Every eval_every updates, or where a time budget spaced validations out (but not at a
        step `out_of_time` skipped)."""
        if step == self.skipped_eval:
            return False
        if self.state.next_eval is not None:
            return step == self.state.next_eval
        return step % self.plan.eval_every == 0

    def replan(self, step: int, bar: Any) -> None:
        """Move the schedule's end to where the time budget runs out at the pace so far (the
        mean over processes, so that every process keeps the same rate), and space validations
        out where they would take more than their share of the time left (the main process's
        measure, which it alone takes)."""
        tc, state, dist = self.tc, self.state, self.dist
        # the pace since the plan was last fitted to it (`follow_pace`), else since the start
        since_step, since_seconds = state.paced_from or (0, 0.0)
        pace = (state.elapsed_seconds - since_seconds) / max(step - since_step, 1)
        horizon = time_horizon(tc, state, pace)
        mean = dist.sum(torch.tensor(float(horizon), dtype=torch.float64)).item()
        state.horizon = round(mean / dist.world_size)
        self.schedule = self.schedule.ending_at(state.horizon)
        seconds = dist.sum(torch.tensor(self.closing.validate, dtype=torch.float64)).item()
        left = (state.horizon - step, self.max_seconds - state.elapsed_seconds)
        every = state.eval_every or self.plan.eval_every
        cadence = recipe.validation_cadence(every, *left, seconds, tc.eval_every)
        if cadence != every and state.next_eval is None and dist.is_main:
            share = f"{seconds:.1f} s each, at most {recipe.EVAL_SHARE:.0%} of the time left"
            bar.write(
                f"validations spaced out: the next at step {step + cadence} ({share})", sys.stderr
            )
        if cadence != every or state.next_eval is not None:
            state.next_eval = step + cadence
