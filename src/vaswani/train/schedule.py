"""Learning-rate schedules, each a pure function of the step (and, for those that know the end,
of the run's horizon in updates).

- "inverse-sqrt": the paper's (§5.3), rising linearly for `warmup` steps, then decaying with the
  inverse square root of the step. It never reaches zero, so a run stopped by a budget ends
  wherever it is.
- "linear": warm-up, then a straight line to zero at the horizon (budgeted training, Li et al.
  2020: linear decay to zero at the deadline beat every other schedule at every budget).
- "wsd": warm-up, a constant rate, then a straight cool-down to zero over the last
  `cooldown` share of the horizon (Hägele et al. 2024). A run continued past its first horizon
  goes back to the constant rate, so training can go on from any checkpoint taken before the
  cool-down.

With `--max-minutes` the horizon is the number of updates the time budget buys on this machine:
estimated from measured step times before the first update and recorded in the run
(`TrainState.horizon`), so that a resume follows the same schedule step for step.

Each schedule is a class (`SCHEDULES`, by the name flags and files use) that owns its horizon:
`ending_at` re-plans it, `knows_end` says whether it has one; nothing outside this module compares
a schedule's name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from vaswani.errors import ConfigError

WSD_COOLDOWN = 0.2
"""Share of a wsd run spent cooling down (Hägele et al. 2024 found 10-20% enough to match a
cosine schedule)."""


@dataclass(frozen=True)
class Schedule:
    """The learning rate of every update of a run.

    `peak`: the rate at the end of warm-up. `horizon`: the update at which a schedule that knows
    its end reaches zero (None for one that has no end).
    """

    peak: float
    warmup: int
    horizon: int | None = None
    name: ClassVar[str] = ""
    knows_end: ClassVar[bool] = True
    """Whether the schedule ends at a horizon; its warm-up and rate then follow from the horizon
    where the user left them to auto (`vaswani.train.recipe.plan`)."""

    def __post_init__(self) -> None:
        if self.warmup < 1:
            raise ValueError(f"warmup must be >= 1 step, got {self.warmup}")
        if self.knows_end and (self.horizon is None or self.horizon < 1):
            raise ValueError(f"the {self.name} schedule needs a horizon of >= 1 update")

    def __call__(self, step: int) -> float:
        """The learning rate of update `step` (counted from 1)."""
        step = max(step, 1)
        assert self.horizon is not None
        # A horizon shorter than the warm-up: warm up over the first half, decay over the rest.
        warmup = min(self.warmup, max(self.horizon // 2, 1))
        if step <= warmup:
            return self.peak * step / warmup
        decay_from = self.decay_from(warmup)
        if step <= decay_from:
            return self.peak
        return self.peak * max(self.horizon - step, 0) / max(self.horizon - decay_from, 1)

    def decay_from(self, warmup: int) -> int:
        """The update after which the rate goes down to zero at the horizon."""
        return warmup

    def ending_at(self, horizon: int | None) -> Schedule:
        """This schedule re-planned to end at `horizon` (one without an end is unchanged)."""
        return dataclasses.replace(self, horizon=horizon) if self.knows_end else self

    def describe(self) -> str:
        """The schedule in words, for the line `vaswani train` prints."""
        end = f", ends at update {self.horizon}" if self.knows_end else ""
        return f"schedule: {self.name}, warm-up {self.warmup}, peak rate {self.peak:.2e}{end}"


@dataclass(frozen=True)
class InverseSqrt(Schedule):
    """The paper's (§5.3): linear warm-up, then the inverse square root of the step; no end."""

    name: ClassVar[str] = "inverse-sqrt"
    knows_end: ClassVar[bool] = False

    def __call__(self, step: int) -> float:
        step = max(step, 1)
        return self.peak * min((self.warmup / step) ** 0.5, step / self.warmup)


@dataclass(frozen=True)
class Linear(Schedule):
    """Warm-up, then a straight line to zero at the horizon."""

    name: ClassVar[str] = "linear"


@dataclass(frozen=True)
class WarmupStableDecay(Schedule):
    """Warm-up, a constant rate, then a straight cool-down over the last `cooldown` share."""

    name: ClassVar[str] = "wsd"
    cooldown: float = WSD_COOLDOWN

    def decay_from(self, warmup: int) -> int:
        assert self.horizon is not None
        return max(warmup, self.horizon - round(self.cooldown * self.horizon))


SCHEDULES: dict[str, type[Schedule]] = {
    kind.name: kind for kind in (InverseSqrt, Linear, WarmupStableDecay)
}
SCHEDULE_NAMES = tuple(SCHEDULES)


def schedule_named(name: str) -> type[Schedule]:
    """The schedule class called `name` (a flag's or a config file's value)."""
    if name not in SCHEDULES:
        raise ConfigError(f"unknown schedule {name!r}; choose one of {', '.join(SCHEDULES)}")
    return SCHEDULES[name]


def noam_lr(step: int, d_model: int, warmup: int = 4000, scale: float = 1.0) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Rises linearly for `warmup` steps, then decays with the inverse square root of the step.
    Steps count from 1; step 0 is treated as step 1 so the first update is not at rate zero.
    """
    if warmup < 1:
        raise ValueError(f"warmup must be >= 1 step, got {warmup}")
    return InverseSqrt(paper_peak(d_model, warmup, scale), warmup)(step)


def paper_peak(d_model: int, warmup: int, scale: float) -> float:
    """The highest rate of the paper's schedule: scale * d_model^-0.5 * warmup^-0.5 (§5.3)."""
    return scale * d_model**-0.5 * warmup**-0.5
