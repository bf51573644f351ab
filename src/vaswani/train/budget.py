"""The clock of a training run and what its end costs, so that --max-minutes is a deadline: time
counted from the command's start (and on from a resumed run's), tokens per second, the measured
cost of the final validation and save, and where the time went (`Ledger`, time.json)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vaswani.safe_io import is_number, read_json, write_atomic

TIME = "time.json"


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
    validation and save, and the confidence calibration when one follows, would not end in
    time."""

    validate: float = 0.0
    """The latest validation's seconds."""
    save: float = 0.0
    calibrating: bool = False  # a confidence calibration follows the run (`vaswani train`)
    final: float | None = None
    """Time kept for the final validation, where it is less than `validate` (its decoding
    stops at the deadline: `Pacing.end_validation`)."""

    @property
    def last(self) -> float:
        return self.validate if self.final is None else self.final

    @property
    def calibrate(self) -> float:
        """Time kept for the calibration: as long as the final validation (Spanish gettext
        catalogs: 7.3 s against 9.1). The calibration stops translating at the deadline, so a
        shortfall costs it sentences, not the budget."""
        return self.last if self.calibrating else 0.0

    def end(self, validating: bool = False) -> float:
        """Seconds the run's end takes; `validating`: with a validation and save before it."""
        before = self.validate + self.save if validating else 0.0
        return before + self.last + self.save + self.calibrate


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

    def deadline(self, seconds: float) -> float | None:
        """When the run's time reaches `seconds`, on `time.perf_counter`; None for never."""
        return self.began + seconds - self.offset if math.isfinite(seconds) else None

    def rate(self, tokens: int) -> float:
        """Tokens per second since the previous call (or the start); `tokens` is the total."""
        now = time.perf_counter()
        then, before = self.window
        self.window = (now, tokens)
        return (tokens - before) / max(now - then, 1e-9)


# Where a session's wall time goes, in the order it is spent. "other" is what no account timed:
# logging, the progress bar, the loop itself.
ACCOUNTS = (
    "start-up",  # from the command's start to the first update: imports, data, auto's timing
    "updates",  # forward, backward and optimizer steps, the batches' collation included
    "averaging",  # the moving average of the weights
    "validation",
    "saving",  # checkpoints and best/
    "calibration",  # the confidence calibration after training (`vaswani train --calibrate`)
    "other",
)


@dataclass
class Ledger:
    """Seconds (and times) spent in each of `ACCOUNTS` by one session of a run."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ACCOUNTS, 0.0))
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ACCOUNTS, 0))

    def add(self, account: str, seconds: float) -> None:
        self.seconds[account] += seconds
        self.counts[account] += 1

    @contextlib.contextmanager
    def timed(self, account: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(account, time.perf_counter() - began)

    def close(self, total: float) -> None:
        """Put what no account timed of `total` seconds into "other"."""
        timed = sum(v for k, v in self.seconds.items() if k != "other")
        self.seconds["other"] = max(total - timed, 0.0)

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def line(self) -> str:
        """E.g. `time: 120.0 s: start-up 6.1 s (5%), updates 98.0 s (82%, 350), ...`."""
        total = max(self.total, 1e-9)
        parts = []
        for account in ACCOUNTS:
            seconds, count = self.seconds[account], self.counts[account]
            if seconds < 0.05:
                continue
            times = f", {count}" if count > 1 else ""
            parts.append(f"{account} {seconds:.1f} s ({seconds / total:.0%}{times})")
        return f"time: {total:.1f} s: " + ", ".join(parts)

    def write(self, run: Path) -> None:
        record = {"total_seconds": self.total, "seconds": self.seconds, "counts": self.counts}
        write_atomic(run / TIME, json.dumps(record, indent=1).encode())

    @classmethod
    def read(cls, run: Path) -> Ledger:
        """The ledger of `run`'s latest session (an empty one where none was written)."""
        if not (run / TIME).exists():
            return cls()
        record = read_json(run / TIME, "time accounts", dict, {"seconds": dict, "counts": dict})
        ledger = cls()
        for account in ACCOUNTS:
            seconds, count = record["seconds"].get(account, 0), record["counts"].get(account, 0)
            if is_number(seconds) and is_number(count):
                ledger.seconds[account], ledger.counts[account] = float(seconds), int(count)
        return ledger
