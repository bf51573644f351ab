"""The clock of a training run and what its end costs, so that --max-minutes is a deadline: time
counted from the command's start (and on from a resumed run's), tokens per second, and the measured
cost of the final validation and save."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class Closing:
    """What ending a run costs, measured as it goes (the last validation and the last checkpoint
    save), so that a time budget is a deadline: no update starts after which the final
    validation and save would not end in time."""

    validate: float = 0.0
    save: float = 0.0

    @property
    def seconds(self) -> float:
        return self.validate + self.save


class Clock:
    """Training time, counted on from a resumed run's, and tokens/s between two `rate` calls."""

    def __init__(self, elapsed: float, tokens: int, began: float | None = None) -> None:
        self.offset = elapsed
        self.began = time.perf_counter() if began is None else began
        self.window = (self.began, tokens)

    def elapsed(self) -> float:
        return self.offset + time.perf_counter() - self.began

    def rate(self, tokens: int) -> float:
        """Tokens per second since the previous call (or the start); `tokens` is the total."""
        now = time.perf_counter()
        then, before = self.window
        self.window = (now, tokens)
        return (tokens - before) / max(now - then, 1e-9)
