"""The clock of a training run and what its end costs, so that --max-minutes is a deadline: time
counted from the command's start (and on from a resumed run's), tokens per second, and the measured
cost of the final validation and save."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


def process_started() -> float | None:
    """When this process started, on `time.perf_counter`'s clock (Linux's /proc; None
    elsewhere): a command's time budget counts from there, Python's start-up included."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
            since_boot = float(uptime.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    age = since_boot - ticks / os.sysconf("SC_CLK_TCK")
    return time.perf_counter() - max(age, 0.0)


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

    def now(self) -> float:
        """The run's time, as `elapsed`: the clock its costs are measured on."""
        return self.elapsed()

    def elapsed(self) -> float:
        return self.offset + time.perf_counter() - self.began

    def rate(self, tokens: int) -> float:
        """Tokens per second since the previous call (or the start); `tokens` is the total."""
        now = time.perf_counter()
        then, before = self.window
        self.window = (now, tokens)
        return (tokens - before) / max(now - then, 1e-9)
