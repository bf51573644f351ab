"""A lexical shortlist: which target tokens are worth scoring for a given source sentence.

Scoring every target token each step is the largest single cost of decoding a model with a large
vocabulary (the output projection of OPUS-MT's shape is 512 x 58,101: more multiply-adds than its
six decoder layers together). Most of those tokens never appear in a translation of a given
sentence. A shortlist, as Marian and CTranslate2 use, keeps for each sentence:
- the `frequent` target tokens of the training data (function words, punctuation), and
- for each of its source tokens, the `per_token` target tokens most associated with it in the
  training pairs, by the Dice coefficient 2 c(s, t) / (c(s) + c(t)) over sentence pairs (c: the
  number of pairs holding the token; c(s, t): holding both),
and decoding scores only those (the union over a batch is projected once; each sentence is then
normalised over its own list, so its output never depends on its batch). A translation with a
shortlist is the model's translation restricted to the list: it can differ from the full search
where the list leaves out a token the model wanted. `vaswani shortlist` builds the table from a
run's training data and reports how often it covers the held-out references.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from vaswani.errors import VaswaniError

FILE = "shortlist.safetensors"


class ShortlistError(VaswaniError):
    """A shortlist that cannot be used with this model; the message says what to do."""


@dataclass
class Shortlist:
    """frequent (F,): target ids every sentence may use (the end-of-sentence token included);
    per_token (V_src, K): each source token's K most associated target ids, -1 where it has fewer.
    """

    frequent: Tensor
    per_token: Tensor

    def allowed(self, src_ids: Tensor, forced: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """For a batch of sources (B, S): the sorted union of their lists (T,) and which of
        those each sentence may use (B, T) booleans; each sentence's `forced` first token (B,)
        with them. Padding in the sources adds nothing new: the padding token's own list is
        empty."""
        lists = self.per_token[src_ids.cpu()].flatten(1)  # (B, S*K)
        frequent = self.frequent[None].expand(lists.size(0), -1)
        lists = torch.cat([frequent, lists], dim=1)  # (B, F + S*K), -1 for none
        if forced is not None:
            lists = torch.cat([lists, forced.cpu()[:, None].to(lists.dtype)], dim=1)
        tokens = lists[lists >= 0].unique()  # sorted
        allowed = torch.zeros(lists.size(0), tokens.numel() + 1, dtype=torch.bool)
        columns = torch.searchsorted(tokens, lists).masked_fill(lists < 0, tokens.numel())
        allowed.scatter_(1, columns, True)
        device = src_ids.device
        return tokens.to(device), allowed[:, :-1].to(device)

    def save(self, path: Path, metadata: dict[str, str]) -> None:
        from safetensors.torch import save_file

        tensors = {"frequent": self.frequent.contiguous(), "per_token": self.per_token.contiguous()}
        save_file(tensors, str(path), metadata=metadata)

    @staticmethod
    def load(path: Path, source_vocab: int, target_vocab: int) -> Shortlist:
        """A saved shortlist, checked against the model's vocabulary sizes."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            tensors = load_file(str(path))
            shortlist = Shortlist(tensors["frequent"].long(), tensors["per_token"].long())
        except (SafetensorError, KeyError, OSError) as error:
            raise ShortlistError(
                f"{path}: not a shortlist ({error}); build one with `vaswani shortlist RUN`"
            ) from None
        ids = torch.cat([shortlist.frequent, shortlist.per_token.flatten()])
        if (
            shortlist.per_token.dim() != 2
            or shortlist.per_token.size(0) != source_vocab
            or bool((ids < -1).any() | (ids >= target_vocab).any())
        ):
            raise ShortlistError(
                f"{path} was built for another vocabulary (this model: {source_vocab} source and "
                f"{target_vocab} target tokens); build it again with `vaswani shortlist RUN`"
            )
        return shortlist


class Cooccurrence:
    """Counts over sentence pairs of each source token, each target token and each pair of them
    (a pair counted once per sentence pair), kept as sorted codes s * V_tgt + t and their counts."""

    def __init__(self, source_vocab: int, target_vocab: int) -> None:
        self.target_vocab = target_vocab
        self.source = np.zeros(source_vocab, dtype=np.int64)
        self.target = np.zeros(target_vocab, dtype=np.int64)
        self.codes = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)
        self.pending: list[np.ndarray] = []
        self.pending_size = 0
        self.pairs = 0

    def add(self, src: np.ndarray, tgt: np.ndarray) -> None:
        s, t = np.unique(src).astype(np.int64), np.unique(tgt).astype(np.int64)
        self.source[s] += 1
        self.target[t] += 1
        self.pairs += 1
        self.pending.append((s[:, None] * self.target_vocab + t[None, :]).ravel())
        self.pending_size += s.size * t.size
        if self.pending_size > 4_000_000:
            self.merge()

    def merge(self) -> None:
        """Fold the pending codes into the sorted totals (memory grows with distinct pairs only)."""
        codes = np.concatenate([self.codes, *self.pending])
        weights = np.concatenate([self.counts, np.ones(self.pending_size, dtype=np.int64)])
        self.codes, inverse = np.unique(codes, return_inverse=True)
        self.counts = np.bincount(inverse, weights=weights).astype(np.int64)
        self.pending, self.pending_size = [], 0


def build_shortlist(
    pairs: Iterable[tuple[np.ndarray, np.ndarray]],
    vocabularies: tuple[int, int],
    always: Iterable[int],
    frequent: int = 500,
    per_token: int = 50,
    never: Iterable[int] = (),
) -> Shortlist:
    """The shortlist of training pairs of token ids (see the module docstring) of a model of
    `vocabularies` (source, target sizes). `always`: target ids in every list (the
    end-of-sentence token); `never`: ids in none (padding)."""
    source_vocab, target_vocab = vocabularies
    counts = Cooccurrence(source_vocab, target_vocab)
    for src, tgt in pairs:
        counts.add(src, tgt)
    counts.merge()
    if counts.pairs == 0:
        raise ShortlistError("no training pairs to build a shortlist from")
    banned = np.array(sorted(set(never)), dtype=np.int64)
    by_frequency = np.argsort(-counts.target, kind="stable")
    by_frequency = by_frequency[(counts.target[by_frequency] > 0) & ~np.isin(by_frequency, banned)]
    kept = np.union1d(by_frequency[:frequent], np.array(sorted(set(always)), dtype=np.int64))

    rows, columns = counts.codes // target_vocab, counts.codes % target_vocab
    dice = 2.0 * counts.counts / (counts.source[rows] + counts.target[columns])
    dice[np.isin(columns, banned)] = -1.0
    order = np.lexsort((-dice, rows))  # by source token, best first
    rows, columns, dice = rows[order], columns[order], dice[order]
    rank = np.arange(rows.size) - np.searchsorted(rows, rows, side="left")
    keep = (rank < per_token) & (dice > 0)
    table = np.full((source_vocab, per_token), -1, dtype=np.int64)
    table[rows[keep], rank[keep]] = columns[keep]
    return Shortlist(torch.from_numpy(kept), torch.from_numpy(table))


@dataclass
class Coverage:
    """How a shortlist fares on held-out pairs."""

    held: float
    """The share of reference target tokens that their source's list holds (1.0: the shortlist
    never stands between the model and the reference)."""
    list_size: float
    """Target tokens on a sentence's list, on average."""


def coverage(shortlist: Shortlist, pairs: Iterable[tuple[np.ndarray, np.ndarray]]) -> Coverage:
    """Each held-out pair's list, against its reference (see `Coverage`)."""
    held = total = listed = sentences = 0
    for src, tgt in pairs:
        tokens, allowed = shortlist.allowed(torch.tensor(src, dtype=torch.long)[None])
        ok = set(tokens[allowed[0]].tolist())
        held += sum(int(t) in ok for t in tgt)
        total += len(tgt)
        listed += len(ok)
        sentences += 1
    return Coverage(held / total if total else 1.0, listed / sentences if sentences else 0.0)
