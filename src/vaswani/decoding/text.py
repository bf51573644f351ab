"""Inference over text: `translate` (beam or greedy search), `generate` (a language model) and
`classify` (a classifier). Texts are tokenized, checked against the model's position limit,
batched by length under a token budget, searched (`vaswani.decoding.search`) and turned back into text,
in the order they came.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from vaswani.config import DecodeConfig, ModelConfig, Sampling
from vaswani.decoding.confidence import Signals, signals_of
from vaswani.decoding.loops import loops
from vaswani.decoding.sampling import sample
from vaswani.decoding.search import Hypothesis, decode
from vaswani.decoding.shortlist import Shortlist
from vaswani.errors import VaswaniError
from vaswani.model import DecoderOnly, EncoderClassifier


class Tokenizer(Protocol):
    """What translation needs of a tokenizer (`vaswani.data.SubwordTokenizer` is one)."""

    def encode_batch(self, texts: list[str]) -> list[list[int]]: ...

    def decode(self, ids: list[int]) -> str: ...


class InputTooLong(VaswaniError, ValueError):
    """An input line is longer than the model's position limit (and truncation was not allowed)."""


class TokenizerFailed(VaswaniError, ValueError):
    """The tokenizer's own code failed on an input text (extreme input)."""


class BeamTooWide(VaswaniError, ValueError):
    """A beam wider than the model's target vocabulary."""


def encode_each(
    tokenizer: Tokenizer, texts: list[str], what: str | list[str] = "line"
) -> list[list[int]]:
    """`tokenizer.encode_batch(texts)`, where a failure inside the tokenizer names the text it
    failed on: `what` and its number counted from 1, or `what[i]` for text i."""
    try:
        return tokenizer.encode_batch(texts)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # tokenizers' Rust code panics (pyo3 PanicException, a
        # BaseException) on some extreme input, e.g. a regex engine's backtracking limit
        for i, text in enumerate(texts):
            try:
                tokenizer.encode_batch([text])
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:
                name = what[i] if isinstance(what, list) else f"{what} {i + 1}"
                raise TokenizerFailed(
                    f"{name} ({len(text)} characters): the tokenizer failed on it "
                    f"({type(error).__name__}: {str(error)[:200]}); shorten or split it"
                ) from None
        raise


class TruncatedInput(UserWarning):
    """An input line was longer than the model's position limit and was cut."""


@dataclasses.dataclass
class Translation:
    text: str
    score: float
    """What search ranked by (`vaswani.decoding.search.Hypothesis`)."""
    log_prob: float
    """The model's log-probability of the translation's tokens, end-of-sentence included."""
    tokens: int = 1
    """How many tokens `log_prob` is over (end-of-sentence counted)."""
    signals: Signals | None = None
    """What search says of it, where it was assessed (`vaswani.decoding.confidence`)."""
    assessed: float | None = None
    """Its confidence by a `Calibration` (or another map of its signals)."""
    origin: str = "model"
    """Who translated it: "model", "memory" (an exact match in a translation memory), or "kept"
    (a text of nothing but code, such as `%s: %s`, kept as it is)."""
    terms: list[tuple[str, str, bool]] = dataclasses.field(default_factory=list)
    """The glossary's terms found in its source: (source, target, whether the target is in it)."""
    fuzzy: tuple[float, str, str] | None = None
    """The translation memory's best fuzzy match: (score 0-100, its source, its target)."""
    unsafe: str | None = None
    """The check its text failed (`vaswani.documents.protect`): it is then the source as it was."""

    @property
    def confidence(self) -> float:
        """In [0, 1]: `assessed` where it was, else the model's mean probability per token,
        exp(log_prob / tokens)."""
        if self.assessed is not None:
            return self.assessed
        return math.exp(self.log_prob / max(self.tokens, 1))


@dataclasses.dataclass
class TextModel:
    """A model with the tokenizers that turn text into its ids and back, and what its search
    uses besides: all that translating text takes (`vaswani.translation.Engine` is one, with
    the rest of a run; training's validation makes one of the model it trains)."""

    model: nn.Module
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    """The target side's tokenizer; a classifier's `LabelSet`."""
    shortlist: Shortlist | None = None
    """Score only each segment's shortlisted target tokens (`vaswani.decoding.shortlist`)."""
    assess: Callable[[Signals], float] | None = None
    """Assess each best translation by this map of its signals (`vaswani.decoding.confidence`,
    e.g. a run's `Calibration`); None: its confidence is the mean probability per token."""
    forces_target: bool = False
    """Whether each segment's prefix ends with the target language's token, which is taken off
    the source and forced as the translation's first token (M2M-100, NLLB-200, mBART-50:
    `vaswani.languages.Languages.forced`)."""

    def attention(self, sources: list[list[int]], targets: list[list[int]]) -> Any:
        """The one computation of a model's attention, which word alignment, `vaswani plot` and
        the server's /attention read: one teacher-forced pass without gradients over `sources`
        (ids, each after its prefix and ending in end-of-sentence) and `targets` (each starting
        with begin-of-sentence and a forced language token), padded into one batch. The
        model's `AttentionMaps`; an `Engine` computes it in its precision."""
        cfg = self.model.cfg
        device = next(self.model.parameters()).device
        with torch.no_grad():
            src, tgt = padded(sources, cfg).to(device), padded(targets, cfg).to(device)
            return self.model.attention_maps(src, tgt)


def padded(sequences: list[list[int]], cfg: Any) -> Tensor:
    """Id sequences as one batch, padded on the right with the model's pad id."""
    width = max(len(ids) for ids in sequences)
    out = torch.full((len(sequences), width), cfg.pad_id, dtype=torch.long)
    for row, ids in enumerate(sequences):
        out[row, : len(ids)] = torch.tensor(ids)
    return out


@dataclasses.dataclass(frozen=True)
class Segments:
    """Texts translated one by one (a document's sentences), with what leads each and its name."""

    texts: list[str]
    prefixes: list[list[int]] | None = None
    """Ids put before text i's own, unless they already start with them (a multilingual model's
    target-language token; a user who typed OPUS-MT's ">>fra<<" gets it once)."""
    labels: list[str] | None = None
    """What messages call each text; by default "line" and its number from 1."""


def encode_sources(
    tokenizer: Tokenizer,
    segments: Segments,
    max_len: int,
    too_long: str = "error",
    what: str = "line",
) -> dict[int, list[int]]:
    """Token ids with end-of-sentence, by index, of the non-blank texts of `segments`, after
    their prefixes; messages name a text by its label, or call it `what` and count from 1.

    A text over the position limit max_len raises InputTooLong (too_long="error") or is cut to fit
    with a `TruncatedInput` warning naming it (too_long="truncate").
    """
    if too_long not in ("error", "truncate"):
        raise ValueError(f"too_long={too_long!r}: choose error or truncate")
    texts, prefixes = segments.texts, segments.prefixes
    todo = [i for i, text in enumerate(texts) if text.strip()]
    names = segments.labels or [f"{what} {i + 1}" for i in range(len(texts))]
    ids = encode_each(tokenizer, [texts[i] for i in todo], [names[i] for i in todo])
    encoded = dict(zip(todo, ids, strict=True))
    if prefixes is not None:
        for i, ids in encoded.items():
            if ids[: len(prefixes[i])] != prefixes[i]:
                encoded[i] = [*prefixes[i], *ids]
    for i, ids in encoded.items():
        if len(ids) + 1 <= max_len:
            continue
        message = (
            f"{names[i]} has {len(ids) + 1} tokens with end-of-sentence, more than the model's "
            f"position limit max_len={max_len}"
        )
        if too_long == "error":
            raise InputTooLong(
                f"{message}; shorten or split it, or allow truncation (Request.too_long='truncate')"
            )
        warnings.warn(f"{message}; translated its first {max_len - 1} tokens", TruncatedInput, 2)
        encoded[i] = ids[: max_len - 1]
    return encoded


def source_batch(sequences: list[list[int]], cfg: ModelConfig) -> Tensor:
    """Token ids, each with end-of-sentence, right-padded into one (B, S) tensor."""
    return padded([[*ids, cfg.eos_id] for ids in sequences], cfg)


def length_batches(widths: list[int], budget: int) -> list[range]:
    """Cut items sorted by width (their cost as a batch row) into consecutive batches whose rows,
    all as wide as the batch's last and widest, cost at most `budget` (one item at least)."""
    batches, start = [], 0
    while start < len(widths):
        end = start + 1
        while end < len(widths) and (end - start + 1) * widths[end] <= budget:
            end += 1
        batches.append(range(start, end))
        start = end
    return batches


def translate_segments(
    tm: TextModel,
    segments: Segments,
    dc: DecodeConfig | None = None,
    too_long: str = "error",
    progress: Callable[[int], None] | None = None,
) -> list[list[Translation]]:
    """The `dc.n_best` best translations of each of `segments`, in order; a blank one gets none,
    without running the model. A segment that comes again (the same ids) is translated once.

    Segments are sorted by length and batched under a token budget (dc.batch_tokens counts source
    tokens, padding included, times the beam size), so little of a batch is padding. `progress` is
    called with the number of segments each batch finished. With `tm.assess`, each best
    translation's signals are read off the whole beam and assessed (`vaswani.decoding.confidence`).
    """
    model, cfg = tm.model, tm.model.cfg
    dc = dc or DecodeConfig()
    if dc.beam_size > cfg.target_vocab_size:
        raise BeamTooWide(
            f"beam_size {dc.beam_size} is over the model's target vocabulary of "
            f"{cfg.target_vocab_size} tokens; choose a narrower beam"
        )
    device = next(model.parameters()).device
    encoded = encode_sources(tm.src_tokenizer, segments, cfg.max_len, too_long)
    forced = split_forced(encoded) if tm.forces_target and segments.prefixes else {}
    results: list[list[Translation]] = [[] for _ in segments.texts]
    first: dict[tuple[int, ...], int] = {}  # each distinct segment is translated once
    copies: dict[int, list[int]] = {}
    for i, ids in encoded.items():
        copies.setdefault(first.setdefault((*ids, forced.get(i)), i), []).append(i)
    todo = sorted(first.values(), key=lambda i: len(encoded[i]))
    widths = [(len(encoded[i]) + 1) * dc.beam_size for i in todo]
    # The beam's other hypotheses are a signal of confidence: ask for all of them.
    search = dc if tm.assess is None else dataclasses.replace(dc, n_best=dc.beam_size)
    for positions in length_batches(widths, dc.batch_tokens):
        batch = [todo[j] for j in positions]
        src = source_batch([encoded[i] for i in batch], cfg).to(device)
        starts = torch.tensor([forced[i] for i in batch], device=device) if forced else None
        decoded = without_loops(tm, src, search, dc.n_best, starts)
        for i, (mine, texts) in zip(batch, decoded, strict=True):
            found = [
                Translation(text, h.score, h.log_prob, len(h.tokens) + h.finished)
                for h, text in zip(mine[: dc.n_best], texts, strict=True)
            ]
            if tm.assess is not None:
                found[0].signals = signals_of(mine)
                found[0].assessed = tm.assess(found[0].signals)
            for same in copies[i]:
                results[same] = found
        if progress is not None:
            progress(sum(len(copies[i]) for i in batch))
    return results


class Looping(UserWarning):
    """A translation still repeats itself after it was decoded again with repeats barred."""


def split_prefix(prefix: list[int] | None, forces_target: bool) -> tuple[list[int], list[int]]:
    """A segment's prefix as the ids before its source and those after its translation's start
    token: a model that forces its target (`TextModel.forces_target`) has [source language's
    token, target language's token], the second forced as the translation's first token."""
    if not prefix:
        return [], []
    return (prefix[:1], prefix[1:2]) if forces_target else (prefix, [])


def split_forced(encoded: dict[int, list[int]]) -> dict[int, int]:
    """Take each source's second token (its prefix's target-language token, after the source
    language's) off it: the token to force as its translation's first (`split_prefix`)."""
    forced = {}
    for i, ids in encoded.items():
        before, (forced[i],) = split_prefix(ids[:2], True)
        encoded[i] = [*before, *ids[2:]]
    return forced


def without_loops(
    tm: TextModel,
    src: Tensor,
    dc: DecodeConfig,
    keep: int | None = None,
    forced: Tensor | None = None,
) -> list[tuple[list[Hypothesis], list[str]]]:
    """Each source's hypotheses and the texts of the first `keep` (all by default); with
    `dc.loop_guard` "retry", the sources whose best translation loops
    (`vaswani.decoding.loops`) decoded again with repeats barred. A translation that still loops
    is said in a `Looping` warning."""

    def texts_of(mine: list[Hypothesis]) -> list[str]:
        return [tm.tgt_tokenizer.decode(h.tokens) for h in mine[:keep]]

    model, shortlist = tm.model, tm.shortlist
    found = decode(model, src, dc, shortlist=shortlist, forced=forced)
    texts = [texts_of(mine) for mine in found]
    looping = [i for i, mine in enumerate(texts) if mine and loops(mine[0])]
    if looping and dc.loop_guard == "retry":
        rows = torch.tensor(looping, device=src.device)
        barred = dataclasses.replace(dc, loop_guard="always")
        starts = None if forced is None else forced[rows]
        again = decode(model, src[rows], barred, shortlist=shortlist, forced=starts)
        for i, mine in zip(looping, again, strict=True):
            found[i], texts[i] = mine, texts_of(mine)
    still = sum(1 for mine in texts if mine and loops(mine[0]))
    if still and dc.loop_guard != "off":
        warnings.warn(
            "a translation repeats itself in a loop even with repeats barred (a young or small "
            "model?)",
            Looping,
            stacklevel=2,
        )
    return list(zip(found, texts, strict=True))


def translate(
    tm: TextModel,
    texts: list[str] | Segments,
    dc: DecodeConfig | None = None,
    too_long: str = "error",
    progress: Callable[[int], None] | None = None,
) -> list[str]:
    """The best translation of each text, whole, in order; "" for a blank text (the model is not
    run); a text over the position limit as `too_long` says (`encode_sources`)."""
    segments = texts if isinstance(texts, Segments) else Segments(texts)
    found = translate_segments(tm, segments, dc, too_long, progress)
    return [mine[0].text if mine else "" for mine in found]


@dataclasses.dataclass
class Generation:
    """A prompt's continuation by a language model."""

    prompt: str
    text: str
    """The generated text, which goes right after the prompt (a leading space included)."""
    tokens: int
    """Generated tokens, end-of-sentence not counted."""
    finished: bool
    """True when the model ended the text, False when it reached the token limit."""


def generate(
    model: DecoderOnly,
    tokenizer: Tokenizer,
    prompts: list[str],
    sampling: Sampling | None = None,
    use_cache: bool = True,
) -> list[Generation]:
    """Continue each text prompt by sampling (see `sample`); "" starts from nothing. A prompt that
    leaves no room under the model's position limit raises InputTooLong."""
    cfg = model.cfg
    encoded = encode_each(tokenizer, prompts, "prompt") if prompts else []
    for i, ids in enumerate(encoded):
        if len(ids) + 2 > cfg.max_len:  # the start token, the prompt, one new token
            raise InputTooLong(
                f"prompt {i + 1} has {len(ids)} tokens; the model's position limit "
                f"max_len={cfg.max_len} leaves no room to generate; shorten it"
            )
    found = sample(model, encoded, sampling or Sampling(), use_cache)
    return [
        Generation(prompt, tokenizer.decode(h.tokens), len(h.tokens), h.finished)
        for prompt, h in zip(prompts, found, strict=True)
    ]


@dataclasses.dataclass
class Classification:
    label: str
    probability: float
    """The model's probability of `label`."""
    probabilities: dict[str, float]
    """Every label's probability."""


@torch.no_grad()
def classify(
    model: EncoderClassifier,
    tokenizer: Tokenizer,
    labels: list[str],
    texts: list[str],
    batch_tokens: int = 8192,
    too_long: str = "error",
) -> list[Classification | None]:
    """The most probable label of each text, in order; None for a blank text (the model is not
    run). Texts are sorted by length and batched under `batch_tokens` (padding included)."""
    cfg = model.cfg
    device = next(model.parameters()).device
    # The classifier puts a start token before each text: one position less for the text.
    encoded = encode_sources(tokenizer, Segments(texts), cfg.max_len - 1, too_long, "text")
    results: list[Classification | None] = [None] * len(texts)
    todo = sorted(encoded, key=lambda i: len(encoded[i]))
    for batch in length_batches([len(encoded[i]) + 2 for i in todo], batch_tokens):
        rows = [todo[j] for j in batch]
        src = source_batch([encoded[i] for i in rows], cfg).to(device)
        probs = model(src).float().softmax(dim=-1).cpu()  # (B, n_labels)
        for i, p in zip(rows, probs.tolist(), strict=True):
            best = max(range(len(p)), key=p.__getitem__)
            results[i] = Classification(labels[best], p[best], dict(zip(labels, p, strict=True)))
    return results
