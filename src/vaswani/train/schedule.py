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
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULES = ("inverse-sqrt", "linear", "wsd")
WSD_COOLDOWN = 0.2
"""Share of a wsd run spent cooling down (Hägele et al. 2024 found 10-20% enough to match a
cosine schedule)."""


def noam_lr(step: int, d_model: int, warmup: int = 4000, scale: float = 1.0) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Rises linearly for `warmup` steps, then decays with the inverse square root of the step.
    Steps count from 1; step 0 is treated as step 1 so the first update is not at rate zero.
    """
    if warmup < 1:
        raise ValueError(f"warmup must be >= 1 step, got {warmup}")
    return Schedule("inverse-sqrt", paper_peak(d_model, warmup, scale), warmup)(step)


@dataclass(frozen=True)
class Schedule:
    """The learning rate of every update of a run.

    `peak`: the rate at the end of warm-up. `horizon`: the update at which "linear" and "wsd"
    reach zero (None for "inverse-sqrt", which has no end).
    """

    kind: str
    peak: float
    warmup: int
    horizon: int | None = None
    cooldown: float = WSD_COOLDOWN

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.kind!r}; choose one of {SCHEDULES}")
        if self.warmup < 1:
            raise ValueError(f"warmup must be >= 1 step, got {self.warmup}")
        if self.kind != "inverse-sqrt" and (self.horizon is None or self.horizon < 1):
            raise ValueError(f"the {self.kind} schedule needs a horizon of >= 1 update")

    def __call__(self, step: int) -> float:
        """The learning rate of update `step` (counted from 1)."""
        step = max(step, 1)
        if self.kind == "inverse-sqrt":
            return self.peak * min((self.warmup / step) ** 0.5, step / self.warmup)
        assert self.horizon is not None
        # A horizon shorter than the warm-up: warm up over the first half, decay over the rest.
        warmup = min(self.warmup, max(self.horizon // 2, 1))
        if step <= warmup:
            return self.peak * step / warmup
        if self.kind == "linear":
            decay_from = warmup
        else:
            decay_from = max(warmup, self.horizon - round(self.cooldown * self.horizon))
        if step <= decay_from:
            return self.peak
        return self.peak * max(self.horizon - step, 0) / max(self.horizon - decay_from, 1)


def paper_peak(d_model: int, warmup: int, scale: float) -> float:
    """The highest rate of the paper's schedule: scale * d_model^-0.5 * warmup^-0.5 (§5.3)."""
    return scale * d_model**-0.5 * warmup**-0.5
