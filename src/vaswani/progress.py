"""Progress bars for long work: shown on a terminal, silent in logs, pipes and tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tqdm import tqdm


def progress_bar(iterable: Iterable | None = None, *, enabled: bool = True, **kwargs: Any) -> tqdm:
    """A tqdm bar; `disable=None` lets tqdm hide it when stderr is not a terminal."""
    return tqdm(iterable, disable=None if enabled else True, dynamic_ncols=True, **kwargs)
