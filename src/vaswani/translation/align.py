"""Word alignment from the model's own cross-attention: which source words each translated word
came from, as Pharaoh pairs `i-j` over the whitespace-separated words of the source and of the
translation (the form of fast_align, eflomal and Marian).

A translation is read back through the model once more, teacher-forced, and the encoder-decoder
attention of one decoder layer (its heads averaged) is summed from subword tokens to words, at
the step that predicts each translated word; words that are each other's best are linked
(`word_alignment`). The layer and the step were chosen by measuring against dictionary links
(docs/documents.md): on a 3-layer model trained by vaswani on LibreOffice's English-German
messages, the last layer at the predicting step placed 66.9% of tags exactly around the right
word, the step that reads the word 37.9%, the relative position alone 43.4%.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from vaswani.decoding.text import Segments, TextModel, split_prefix
from vaswani.translation.segment import Segmented

WORD_MARKS = ("\u0120", "\u2581")
"""How a subword vocabulary marks a token that starts a word: byte-level BPE's "Ġ" (a space
byte), SentencePiece's "▁"."""

Alignment = list[tuple[int, int]]
"""(source word, target word) pairs, counted from 0, sorted."""


@dataclass(frozen=True)
class AlignSettings:
    """Where alignment is read from: the cross-attention of decoder layer `layer` (negative
    counts from the last), its heads averaged, at the step that `predicts` each target token
    (True) or the step that reads it as input (False)."""

    layer: int = -1
    predicts: bool = True
    guided: bool = True
    """A model trained with guided alignment: read its trained head (of the last layer) alone;
    False: average the heads as for any model."""


def encode_words(tokenizer: Any, text: str) -> tuple[list[int], list[int]]:
    """The token ids of `text` and the word of each (counted from 0 as `text.split()` counts
    them): by the tokens' character offsets where the tokenizer gives them (a token of spaces
    goes with the word before it), by their word marks otherwise (`token_words`)."""
    if not hasattr(tokenizer, "encode_offsets"):
        ids = tokenizer.encode(text)
        return ids, token_words(tokenizer, ids)
    ids, offsets = tokenizer.encode_offsets(text)
    starts = word_starts(text)
    return ids, [max(bisect.bisect_right(starts, end - 1) - 1, 0) for _, end in offsets]


def token_words(tokenizer: Any, ids: Sequence[int]) -> list[int]:
    """The word of each token of `ids` by the marks of its vocabulary (SentencePiece, whose
    normaliser makes every run of whitespace one mark): a token whose entry starts with a word
    mark starts the next word; one that is nothing but marks stays with the word before it, and
    the token after it starts the next."""
    vocabulary = tokenizer.vocabulary()
    words, word, pending = [], -1, True
    for i in ids:
        piece = vocabulary[i] if 0 <= i < len(vocabulary) else ""
        bare = piece.lstrip("".join(WORD_MARKS))
        if piece != bare or word < 0:
            pending = True
        if bare and pending:
            word, pending = word + 1, False
        words.append(max(word, 0))
    return words


def word_alignment(weights: Tensor, src_words: list[int], tgt_words: list[int]) -> Alignment:
    """Pharaoh pairs from a (target tokens, source tokens) attention matrix summed over both
    words' tokens: the pairs where a translated word and a source word are each other's best
    (most attention), and each translated word of a source word that has none to its best
    source word. (Each translated word to its best source word alone placed 51.4% of tags
    exactly around the right word; this 66.9%: docs/documents.md.)

    Shapes: weights (T, S) with T = len(tgt_words), S = len(src_words)
    """
    n_src, n_tgt = max(src_words, default=-1) + 1, max(tgt_words, default=-1) + 1
    if n_src == 0 or n_tgt == 0:
        return []
    weights = weights.float()
    by_source = torch.zeros(weights.size(0), n_src).index_add_(1, torch.tensor(src_words), weights)
    by_words = torch.zeros(n_tgt, n_src).index_add_(0, torch.tensor(tgt_words), by_source)
    source_of = by_words.argmax(dim=1).tolist()  # each translated word's best source word
    target_of = by_words.argmax(dim=0).tolist()  # each source word's best translated word
    both = {(source_of[j], j) for j in range(n_tgt) if target_of[source_of[j]] == j}
    linked = {i for i, _ in both}
    rest = {(source_of[j], j) for j in range(n_tgt) if source_of[j] not in linked}
    return sorted(both | rest)


@torch.no_grad()
def align(
    tm: TextModel,
    segments: Segments,
    translations: list[str],
    settings: AlignSettings | None = None,
    batch_size: int = 32,
) -> list[Alignment]:
    """The word alignment of each source of `segments` and its translation (empty where either
    is blank), each source read after its prefix (ids it was translated after: a multilingual
    model's target token)."""
    settings = settings or AlignSettings()
    src_tokenizer, tgt_tokenizer = tm.src_tokenizer, tm.tgt_tokenizer
    sources, prefixes = segments.texts, segments.prefixes
    cfg = tm.model.cfg
    found: list[Alignment] = [[] for _ in sources]
    first: dict[tuple, int] = {}  # each distinct pair is aligned once (a file's repeated cells)
    copies: dict[int, int] = {}
    for i, (s, t) in enumerate(zip(sources, translations, strict=True)):
        if s.split() and t.split():
            key = (s, t, tuple(prefixes[i] or ()) if prefixes else ())
            copies[i] = first.setdefault(key, i)
    todo = list(first.values())
    src = {i: cut(encode_words(src_tokenizer, sources[i]), cfg.max_len - 1) for i in todo}
    tgt = {i: cut(encode_words(tgt_tokenizer, translations[i]), cfg.max_len - 1) for i in todo}
    todo.sort(key=lambda i: len(src[i][0]) + len(tgt[i][0]))
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        parts = [split_prefix(prefixes[i] if prefixes else None, tm.forces_target) for i in batch]
        lead = [len(before) for before, _ in parts]
        pairs = list(zip(batch, parts, strict=True))
        maps = tm.attention(
            [[*b, *src[i][0], cfg.eos_id] for i, (b, _) in pairs],
            [[cfg.bos_id, *s, *tgt[i][0]] for i, (_, s) in pairs],
        )
        layer = maps.cross[settings.layer].float()  # (B, H, T+1, S)
        head = cfg.alignment_head if settings.guided else None
        weights = (layer.mean(dim=1) if head is None else layer[:, head]).cpu()  # (B, T+1, S)
        for row, i in enumerate(batch):
            n_src, n_tgt = len(src[i][0]), len(tgt[i][0])
            columns = weights[row, :, lead[row] : lead[row] + n_src]  # the source's own tokens
            columns = columns[len(parts[row][1]) :]  # a forced target token's row is no word's
            rows = columns[:n_tgt] if settings.predicts else columns[1 : n_tgt + 1]
            found[i] = word_alignment(rows, src[i][1], tgt[i][1])
    for i, k in copies.items():
        if i != k:
            found[i] = list(found[k])
    return found


def cut(encoded: tuple[list[int], list[int]], limit: int) -> tuple[list[int], list[int]]:
    """Ids and their words, at most `limit` of them (the model's position limit)."""
    ids, words = encoded
    return ids[:limit], words[:limit]


def word_starts(text: str) -> list[int]:
    """Where each whitespace-separated word of `text` starts."""
    return [match.start() for match in re.finditer(r"\S+", text)]


def words_in(whole: str, part_start: int, part: str) -> list[int]:
    """For each word of `part`, which sits at `part_start` in `whole`, the index of the word of
    `whole` it lies in (a word of `part` may be glued to its neighbour in `whole`)."""
    starts = word_starts(whole)
    return [bisect.bisect_right(starts, part_start + offset) - 1 for offset in word_starts(part)]


def join_alignments(
    text: Segmented, translations: list[str], alignments: list[Alignment]
) -> Alignment:
    """A text's alignment from those of its segments (each over its own words): the segments'
    word indices moved to where their words are in the whole text and its joined translation."""
    source, target = text.join(list(text.sentences)), text.join(translations)
    found: set[tuple[int, int]] = set()
    at_source = at_target = 0
    for gap, sentence, translation, alignment in zip(
        text.gaps, text.sentences, translations, alignments, strict=False
    ):
        at_source += len(gap)
        at_target += len(gap)
        src_words = words_in(source, at_source, sentence)
        tgt_words = words_in(target, at_target, translation)
        found.update((src_words[i], tgt_words[j]) for i, j in alignment)
        at_source += len(sentence)
        at_target += len(translation)
    return sorted(found)


def pharaoh(alignment: Alignment) -> str:
    """`0-0 1-2 2-1`: the form of fast_align, eflomal and Marian."""
    return " ".join(f"{i}-{j}" for i, j in alignment)
