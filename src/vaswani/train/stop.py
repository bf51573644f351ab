"""Stopping a training run cleanly: the first Ctrl-C or SIGTERM asks for a checkpoint and an end
after the current step; a second one stops at once."""

from __future__ import annotations

import contextlib
import signal
from typing import Any


class StopRequest:
    """Ctrl-C (or SIGTERM) asks to stop after the current step, with a checkpoint; a second
    Ctrl-C stops at once."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> StopRequest:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
