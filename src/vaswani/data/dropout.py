"""Subword dropout for training (after BPE-dropout, Provilkov et al. 2020): the model sees a
word split into smaller pieces now and then, which regularises training on small data.

BPE-dropout skips each merge with probability P while a word is segmented. The tokenizers
library can do that, but from a random generator nobody can seed, so a resumed run would see
other segmentations than the uninterrupted one. vaswani applies the dropout to the ids already
prepared instead: every token that a merge made is split back into the two tokens it was merged
from with probability P, and so on down. Each split gives a segmentation the vocabulary can
spell (the tokens it uses are merges of lower rank, as in BPE-dropout's), drawn from a generator
seeded by (run seed, update, pair), so training stays exactly reproducible. Validation, test and
inference never see it: it wraps the training split only.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

import numpy as np

from vaswani.data.dataset import ParallelSplit


def merge_parts(tokenizer: object) -> np.ndarray:
    """(V, 2) ids of the two tokens each token was merged from; -1 for bytes and specials."""
    data = json.loads(tokenizer.tokenizer.to_str())  # type: ignore[attr-defined]
    vocab: dict[str, int] = data["model"]["vocab"]
    parts = np.full((len(vocab), 2), -1, dtype=np.int64)
    for merge in data["model"]["merges"]:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        merged = vocab.get(left + right)
        if merged is not None and parts[merged, 0] < 0:  # the first merge that made it
            parts[merged] = vocab[left], vocab[right]
    return parts


def split_tokens(
    ids: Sequence[int], parts: np.ndarray | list, p: float, rng: random.Random, limit: int
) -> list[int]:
    """`ids` with each merged token split into its two parts with probability `p`; each part of
    a split token decides in turn, and so on down, so every token decides once. Never longer
    than `limit`: the ids stay as they were then.

    Plain Python on purpose: a sentence is a few dozen ids, where numpy's per-call cost is ten
    times the work (measured: the demo's training took 3x longer with numpy's generators)."""
    table = parts.tolist() if isinstance(parts, np.ndarray) else parts
    out: list[int] = []
    undecided = [int(i) for i in reversed(ids)]  # a stack: the next token to decide on top
    while undecided:
        token = undecided.pop()
        left, right = table[token]
        if left >= 0 and rng.random() < p:
            undecided += (right, left)
        else:
            out.append(token)
    return out if len(out) <= limit else [int(i) for i in ids]


class SubwordDropout:
    """A training split read like a `ParallelSplit`, whose pairs come back with subword dropout.

    `at(update)` seeds the dropout of the batches of one optimizer update; the lengths stay the
    prepared ones (batching groups pairs by them; a dropped pair is a few tokens longer).
    """

    def __init__(
        self, split: ParallelSplit, parts: dict[str, np.ndarray], p: float, seed: int, limit: int
    ) -> None:
        self.split, self.p, self.seed, self.limit = split, p, seed, limit
        self.parts = {side: table.tolist() for side, table in parts.items()}
        self.src_lengths, self.tgt_lengths = split.src_lengths, split.tgt_lengths
        self.update = 0

    def __len__(self) -> int:
        return len(self.split)

    def at(self, update: int) -> SubwordDropout:
        self.update = update
        return self

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        # One generator per (seed, update, pair): the same ids whatever was read before.
        rng = random.Random((self.seed * 1_000_003 + self.update) * 1_000_000_007 + int(i))
        src, tgt = self.split.pair(i)
        return (
            np.asarray(split_tokens(src, self.parts["src"], self.p, rng, self.limit)),
            np.asarray(split_tokens(tgt, self.parts["tgt"], self.p, rng, self.limit)),
        )
