"""Filters on pairs, each counting what it drops by reason (meta.json "dropped_while_reading").

Real corpora are dirty: the source copied as the target, the same pair many times over with other
spaces or capitals, and sentences of the test set inside the training data, which inflate every
score. `prepare` drops:
  - copies: a pair whose target equals its source once normalised (translation only);
  - duplicates: a pair seen before, exactly or once normalised (`dedupe`);
  - contamination: a training pair whose source or target, normalised, is a source or target of
    the valid or test split, or a line of an `--exclude` file (an external test set);
  - length-ratio outliers (in tokens, training split only) are dropped while encoding.
Normalised: case folded, punctuation and symbols removed, runs of spaces made one. Pairs and
sentences are compared by 64-bit keys of their normalised text (`key`), never by the text itself,
so memory stays small at tens of millions of pairs.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vaswani.data.corpora import decode_lines, read_lines

DEDUPE = ("normalised", "exact", "none")
_NOT_WORD = re.compile(r"[^\w\s]+")


def normalised(text: str) -> str:
    """`text` as duplicates and contamination compare it: "Hello,  World!" -> "hello world"."""
    return " ".join(_NOT_WORD.sub(" ", text.casefold()).split())


def key(*texts: str) -> int:
    """A stable 64-bit fingerprint of `texts` (the same in every process and Python version): the
    sets of seen pairs and held-out sentences hold these, not the text, so memory stays small at
    millions of pairs. Two of 10 million distinct pairs share one with odds of about 1 in 300,000."""
    return int.from_bytes(
        hashlib.blake2b("\t".join(texts).encode(), digest_size=8).digest(), "little"
    )


def text_key(norm: str) -> int:
    """The key of one normalised side; 0 for text that normalises to nothing (punctuation only),
    which is never held out: "..." in the test set does not make every "..." pair contaminated."""
    return key(norm) or 1 if norm else 0


# What the first pass keeps of each training pair for the later ones: its sides' keys (held-out and
# --exclude checks) and word counts (the vocabulary size), 24 bytes a pair instead of its text.
PAIR_RECORD = np.dtype([("src", "<u8"), ("tgt", "<u8"), ("src_words", "<u4"), ("tgt_words", "<u4")])


class KeySet:
    """A set of 64-bit keys that stays small at tens of millions: the newest in a Python set (fast
    to add to), the rest in a sorted numpy array at 8 bytes each, merged in when the set grows to a
    quarter of it (so merging costs O(n log n) in all)."""

    def __init__(self, keys: Iterable[int] = ()) -> None:
        self.recent: set[int] = set(keys)
        self.older = np.empty(0, dtype=np.uint64)

    def __len__(self) -> int:
        return len(self.recent) + len(self.older)

    def __contains__(self, item: int) -> bool:
        if item in self.recent:
            return True
        at = int(self.older.searchsorted(np.uint64(item)))
        return at < len(self.older) and int(self.older[at]) == item

    def add(self, item: int) -> None:
        self.recent.add(item)
        if len(self.recent) >= max(1 << 16, len(self.older) // 4):
            self.older = self.array()
            self.recent.clear()

    def array(self) -> np.ndarray:
        """Every key, sorted."""
        recent = np.fromiter(self.recent, dtype=np.uint64, count=len(self.recent))
        return np.sort(np.concatenate([self.older, recent]))


@dataclass
class PairFilter:
    """Copies and duplicates, decided pair by pair as the corpus streams past."""

    dedupe: str = "normalised"
    drop_copies: bool = True
    dropped: Counter = field(default_factory=Counter)
    seen: KeySet = field(default_factory=KeySet)

    def keep(self, src: str, tgt: str, scope: str = "") -> tuple[str, str] | None:
        """The pair's normalised sides if it is kept; None if it is dropped (and counted). Pairs
        of different `scope`s (a multilingual dataset's language pairs) are never duplicates."""
        norm = normalised(src), normalised(tgt)
        if self.drop_copies and norm[0] == norm[1]:
            self.dropped["copy of the source"] += 1
            return None
        if self.dedupe == "none":
            return norm
        pair = key(*norm) if self.dedupe == "normalised" else key(src, tgt)
        if scope:
            pair = key(str(pair), scope)
        if pair in self.seen:
            self.dropped["duplicate pair"] += 1
            return None
        self.seen.add(pair)
        return norm


def exclusion_keys(paths: Iterable[Path], max_line_bytes: int) -> set[int]:
    """The keys of every normalised line of each `--exclude` file (both columns of a TSV line)."""
    found: set[int] = set()
    for path in paths:
        for line in decode_lines(read_lines(Path(path), max_line_bytes), path):
            found.update(text_key(normalised(text)) for text in line.split("\t"))
    found.discard(0)
    return found


CHUNK = 1 << 16


def record_chunks(records: Path) -> Iterator[tuple[int, np.ndarray]]:
    """The `PAIR_RECORD`s of the file `records`, read a chunk at a time (not mapped: a mapped file's
    pages would count in the process's memory), with the index of each chunk's first."""
    with open(records, "rb") as handle:
        start = 0
        while len(chunk := np.fromfile(handle, PAIR_RECORD, CHUNK)):
            yield start, chunk
            start += len(chunk)


def contamination_mask(
    records: Path,
    held_out: set[int],
    excluded: set[int],
    dropped: Counter,
    sides: tuple[str, ...] = ("src", "tgt"),
) -> np.ndarray:
    """Which training pairs to keep: those whose normalised text on `sides` (their `PAIR_RECORD`s
    in the file `records`) is neither held out (valid/test) nor excluded; the rest are counted."""
    held, banned = (np.fromiter(keys - {0}, np.uint64) for keys in (held_out, excluded))
    keep = np.ones(records.stat().st_size // PAIR_RECORD.itemsize, dtype=bool)
    found: Counter = Counter()
    for start, chunk in record_chunks(records):
        in_held = np.zeros(len(chunk), dtype=bool)
        in_banned = np.zeros(len(chunk), dtype=bool)
        for side in sides:
            in_held |= np.isin(chunk[side], held)
            in_banned |= np.isin(chunk[side], banned)
        in_banned &= ~in_held
        found["in the valid or test split"] += int(in_held.sum())
        found["in an --exclude file"] += int(in_banned.sum())
        keep[start : start + CHUNK] = ~(in_held | in_banned)
    dropped.update(+found)  # the reasons that dropped any
    return keep


def ratio_outlier(src_tokens: int, tgt_tokens: int, max_ratio: float) -> bool:
    """Whether one side is over `max_ratio` times longer than the other, in tokens. Pairs whose
    longer side has under 10 tokens are never outliers: "OK" / "In Ordnung" is a fine pair."""
    longer, shorter = max(src_tokens, tgt_tokens), min(src_tokens, tgt_tokens)
    return max_ratio > 0 and longer >= 10 and longer > max_ratio * max(shorter, 1)
