"""The CPU thread count of a training run, chosen by measurement and re-checked as the run goes.

On a machine that something else is also using (a shared laptop, a CI runner), PyTorch's threads
wait for each other whenever one of them is descheduled, and the step slows down far more than
the lost core explains: with a 1-thread neighbour on 2 cores, a mini-preset run made 30 updates
in a minute on 2 threads and 96 on 1 (AMD EPYC Zen 4). On an idle machine 2 threads are the
faster. So a run with a time budget times its own updates on the candidate counts, taking turns
update by update (a trial), keeps the fastest (the current count unless another is `MARGIN`
faster), and tries again every `RECHECK_SECONDS` and whenever its pace drifts by more than
`DRIFT` from the pace it settled at. The trial's updates are real updates: nothing is thrown away
but the slower candidate's extra time. One update's pace varies by a third on a steady machine
(batches differ), so paces are compared as medians.

OpenMP's wait policy (OMP_WAIT_POLICY=PASSIVE) would also end the spinning, but it is read once,
when PyTorch starts, and it cost an idle machine a third of its updates, so it is left as set.
Another count may change the last bits of float sums, so only a run whose thread count is fixed
(`--threads N`, OMP_NUM_THREADS, or a step budget) resumes bit-identically.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from vaswani.config import TrainConfig
from vaswani.device import usable_cores
from vaswani.errors import VaswaniError
from vaswani.run import ENVIRONMENT
from vaswani.safe_io import read_json

TRIAL_UPDATES = 4
"""Updates timed on each candidate count in a trial."""
MARGIN = 0.1
"""Another count replaces the current one only when its median pace is this much faster."""
RECHECK_SECONDS = 120.0
"""A trial again after this long, even if the pace holds: the neighbour may have gone."""
DRIFT = 0.5
"""A trial again when the chosen count's median pace is this much slower (or faster) than the
pace it settled at (a neighbour that comes or goes changes it 2-3x)."""
PACE_WINDOW = 24
"""Updates whose median pace is the settled pace after a trial, and then the current pace."""
SKIPPED = 2
"""Updates of a session before the first trial (the first ones allocate and warm up)."""


def candidates(cores: int) -> list[int]:
    """The thread counts a trial compares: all the cores, one fewer (a 1-thread neighbour), half."""
    return sorted({cores, max(cores - 1, 1), max(cores // 2, 1)}, reverse=True)


@dataclass
class ThreadChoice:
    """Chooses and re-checks the thread count; the loop calls `before` and `after` each update."""

    counts: list[int]
    """The candidates; empty: the count stays as set and nothing is timed."""
    clock: Callable[[], float] = time.perf_counter
    chosen: int = 0
    trial: list[int] = field(default_factory=list)
    """The counts still to time in the running trial, in order (empty: no trial)."""
    timed: dict[int, list[float]] = field(default_factory=dict)
    """Seconds per target token of each count in the running trial."""
    settled: float = 0.0
    """The chosen count's median pace (seconds per target token) after the last trial; 0: not
    yet known."""
    recent: list[float] = field(default_factory=list)
    checked_at: float = 0.0
    skip: int = SKIPPED
    why: str = ""

    @classmethod
    def for_run(
        cls, cpu: bool, timed_budget: bool, asked: int | None, processes: int = 1
    ) -> ThreadChoice:
        """The choice of a training process; one that keeps the count as set where there is
        nothing to choose: not a CPU, no time budget, a count asked for (`--threads`,
        OMP_NUM_THREADS), one of several `processes` of a distributed run, or a single core."""
        fixed = asked is not None or os.environ.get("OMP_NUM_THREADS")
        cores = usable_cores()
        choose = cpu and timed_budget and processes == 1 and not fixed and cores >= 2
        return cls(candidates(cores) if choose else [], chosen=torch.get_num_threads())

    def before(self) -> None:
        """Set the thread count for the coming update."""
        count = self.trial[0] if self.trial else self.chosen
        if self.counts and torch.get_num_threads() != count:
            torch.set_num_threads(count)

    def after(self, seconds: float, tokens: int) -> str | None:
        """Take the update's time; a line to print when a trial has set the count (else None)."""
        pace = seconds / max(tokens, 1)
        if not self.counts:
            return None
        if self.skip > 0:
            self.skip -= 1
            if self.skip == 0:
                self.start("start")
            return None
        if self.trial:
            count = self.trial.pop(0)
            self.timed.setdefault(count, []).append(pace)
            return None if self.trial else self.decide()
        self.recent = [*self.recent[-(PACE_WINDOW - 1) :], pace]
        if len(self.recent) < PACE_WINDOW:
            return None
        median = statistics.median(self.recent)
        if not self.settled:
            self.settled = median
        elif max(median / self.settled, self.settled / median) > 1 + DRIFT:
            self.start("the pace drifted")
        elif self.clock() - self.checked_at > RECHECK_SECONDS:
            self.start("re-check")
        return None

    def start(self, why: str) -> None:
        """Begin a trial: the candidates take turns, one update each, TRIAL_UPDATES rounds."""
        self.trial = self.counts * TRIAL_UPDATES
        self.timed, self.recent, self.settled, self.why = {}, [], 0.0, why

    def decide(self) -> str | None:
        """Keep the fastest count; the line that says so, at the start and when it changed."""
        paces = {count: statistics.median(times) for count, times in self.timed.items()}
        fastest, before = min(paces, key=paces.__getitem__), self.chosen
        if paces[fastest] * (1 + MARGIN) < paces.get(self.chosen, math.inf):
            self.chosen = fastest
        self.checked_at = self.clock()
        if self.chosen == before and self.why != "start":
            return None
        rates = ", ".join(
            f"{count} {'thread' if count == 1 else 'threads'} {1 / pace:,.0f} tok/s"
            for count, pace in paces.items()
        )
        return f"threads: {self.chosen} ({self.why}; measured {rates})"


def kept_threads(tc: TrainConfig) -> int | None:
    """The thread count a resumed run without a time budget started with (environment.json):
    another count may change the last bits of float sums, and such a run resumes bit for bit;
    None where none was chosen, or a time budget chooses again as the load asks."""
    if tc.threads is not None or tc.max_minutes is not None or os.environ.get("OMP_NUM_THREADS"):
        return None
    path = Path(tc.out) / ENVIRONMENT
    try:
        recorded = read_json(path, "environment", dict).get("threads") if path.exists() else None
    except VaswaniError:  # a damaged record: chosen again
        return None
    return recorded if isinstance(recorded, int) and recorded >= 1 else None
