"""Search over a model and its KV cache: greedy search (or drawing each token, for back-translation)
and beam search with a length penalty, as plain functions from token ids to `Hypothesis`es; a
language model's sampling is `vaswani.decoding.sampling`.

Each new token costs one decoder step over one position: the model's KV cache keeps the keys and
values of the prefix (`use_cache=False` re-runs the whole prefix every step instead; it gives the
same result, slowly, and the tests compare the two).

A sentence's output never depends on the rest of its batch: each sentence has its own length limit,
padding is masked, and finished sentences leave the batch. Text in, text out is `vaswani.decoding.text`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from vaswani.config import DecodeConfig, ModelConfig
from vaswani.decoding.cache import KVCache, new_cache
from vaswani.decoding.loops import bar_repeats
from vaswani.decoding.output import OutputLayer, log_normaliser, top_k_rows
from vaswani.model import DecoderOnly, Transformer

if TYPE_CHECKING:  # numpy, which the shortlist is built with, is not needed to search
    from vaswani.decoding.shortlist import Shortlist


@dataclass
class Hypothesis:
    """One output sequence and how the model scores it."""

    tokens: list[int]
    """Generated token ids, without the begin- and end-of-sentence tokens."""
    log_prob: float
    """Sum of the model's log-probabilities of the tokens (and of the end-of-sentence token)."""
    score: float
    """What search ranks by: log_prob divided by the length penalty (log_prob for greedy)."""
    finished: bool
    """True when the sequence ended with end-of-sentence, False when it hit the length limit."""


def length_penalty(length: int, alpha: float, form: str = "gnmt") -> float:
    """The divisor of a hypothesis' log-probability: ((5 + length) / 6) ** alpha (GNMT, §7 of
    Wu et al. 2016; the paper's beam search uses it with alpha 0.6) or length ** alpha ("plain").

    `length` counts the generated tokens, the end-of-sentence token included.
    """
    if form == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if form == "plain":
        return float(length) ** alpha
    raise ValueError(f"length penalty {form!r}: choose gnmt or plain")


def length_limits(src_ids: Tensor, pad_id: int, max_len: int, dc: DecodeConfig) -> Tensor:
    """Most tokens each sentence may generate: its source length + max_extra (or max_new_tokens),
    never past the model's position limit (position 0 holds the begin-of-sentence token).

    Shapes: src_ids (B, S) -> (B,)
    """
    if dc.max_new_tokens is not None:
        limits = torch.full((src_ids.size(0),), dc.max_new_tokens, device=src_ids.device)
    else:
        limits = (src_ids != pad_id).sum(dim=1) + dc.max_extra
    return limits.clamp(max=max_len - 1)


class Stepper:
    """Each row's scores for its next token, with the KV cache or by re-running the prefix."""

    def __init__(
        self,
        model: Transformer | DecoderOnly,
        cache: KVCache,
        use_cache: bool,
        output: OutputLayer | None = None,
        allowed: Tensor | None = None,
        dc: DecodeConfig | None = None,
    ) -> None:
        self.model = model
        self.dc = dc  # search: `forbid` what dc rules out; None for sampling
        self.cache = cache
        self.use_cache = use_cache
        self.output = output or OutputLayer(model.output_projection)
        self.barred = None if allowed is None else ~allowed  # (N, columns): off each row's list
        self.forced: Tensor | None = None
        """(N,) the column each row's first token is forced to, log-probability 0 (a target
        language's token: Hugging Face's forced_bos_token_id); None once it is taken."""

    def __call__(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """tokens (N, t): every token of each row so far (the start token first) -> the next
        token's logits (N, V) and their log-normaliser (N,), float32: log-probabilities are
        logits - normaliser[:, None]. Tokens off a row's shortlist get -inf before normalising
        (each row is a distribution over its own list); those `forbid` rules out for search, after.

        Search never makes the (N, V) log-probabilities: it needs them only for the few tokens it
        keeps, and with a large vocabulary writing them costs as much as a decoder layer.
        """
        if self.use_cache:
            new = tokens[:, self.cache.length :]  # (N, 1) after the first step
            logits, self.cache = self.model.decode_step(new, self.cache, self.output)
        else:
            # The cache passed in stays empty (no room reserved), so every call starts afresh.
            logits, _ = self.model.decode_step(tokens, self.cache, self.output)
        logits = logits[:, -1].float()
        if self.barred is not None:
            logits.masked_fill_(self.barred, float("-inf"))
        normaliser = log_normaliser(logits)
        if self.forced is not None:
            logits.fill_(float("-inf")).scatter_(1, self.forced[:, None], 0.0)
            normaliser.zero_()
            self.forced = None
            return logits, normaliser
        if self.dc is not None:
            forbid(logits, tokens.size(1) - 1, self.model.cfg, self.dc, self.output)
            if self.dc.loop_guard == "always":
                bar_repeats(logits, tokens, self.output)
        return logits, normaliser

    def reorder_(self, rows: Tensor, same_sources: bool = True) -> None:
        """Continue row i from row rows[i]; `same_sources`: no row moves to another sentence."""
        self.cache = self.cache.reorder_(rows, same_sources)
        if self.barred is not None and not same_sources:
            self.barred = self.barred[rows]


@dataclass(frozen=True)
class Targets:
    """What a batch's translations are made of: each sentence's `shortlist` of target tokens
    (`vaswani.decoding.shortlist`; None: the whole vocabulary) and the token each must begin with,
    `forced` (B,) (a target language's; None: none)."""

    shortlist: Shortlist | None = None
    forced: Tensor | None = None


def start_decoding(
    model: Transformer,
    src_ids: Tensor,
    dc: DecodeConfig,
    use_cache: bool,
    copies: int = 1,
    targets: Targets = Targets(),
) -> tuple[Stepper, Tensor]:
    """Encode the sources once and make a stepper over `copies` rows per sentence, scoring the
    whole target vocabulary or the shortlist's tokens for the batch, the forced first tokens
    first (`targets`).

    Returns the stepper and each sentence's length limit (B,), the forced token not counted.
    """
    cfg, forced = model.cfg, targets.forced
    limits = length_limits(src_ids, cfg.pad_id, cfg.max_len, dc)
    memory, src_mask = model.encode(src_ids)
    if forced is not None:
        limits = (limits + 1).clamp(max=cfg.max_len - 1)
    if use_cache:
        # Beams of a sentence share one cache row (no copies of keys; see `KVCache`).
        cache = new_cache(model, memory, src_mask, int(limits.max()) + 1, beams=copies)
    else:
        cache = new_cache(model, memory, src_mask)
        if copies > 1:  # re-running prefixes: one plain row per beam
            rows = torch.arange(src_ids.size(0), device=src_ids.device).repeat_interleave(copies)
            cache = cache.reorder(rows)
    if targets.shortlist is None:
        stepper = Stepper(model, cache, use_cache, dc=dc)
    else:
        tokens, allowed = targets.shortlist.allowed(src_ids, forced)
        output = OutputLayer(model.output_projection, tokens)
        allowed = allowed.repeat_interleave(copies, 0)
        stepper = Stepper(model, cache, use_cache, output, allowed, dc)
    if forced is not None:
        stepper.forced = stepper.output.columns(forced).repeat_interleave(copies)
    return stepper, limits


def forbid(
    logits: Tensor, step: int, cfg: ModelConfig, dc: DecodeConfig, output: OutputLayer
) -> None:
    """Rule out padding as an output (it is never a translation's token; Marian models also start
    from it), and the end of the sentence before `dc.min_new_tokens`. Applied after normalising
    (the normaliser still counts them), as Hugging Face's `bad_words_ids` and `min_new_tokens` are."""
    for token in (cfg.pad_id, cfg.eos_id) if step < dc.min_new_tokens else (cfg.pad_id,):
        column = output.column(token)
        if column is not None:
            logits[:, column] = float("-inf")


def strip(row: list[int], eos_id: int, pad_id: int) -> list[int]:
    """The tokens of a generated row up to (without) its end-of-sentence or padding."""
    for i, token in enumerate(row):
        if token in (eos_id, pad_id):
            return row[:i]
    return row


@torch.no_grad()
def greedy(
    model: Transformer,
    src_ids: Tensor,
    dc: DecodeConfig | None = None,
    use_cache: bool = True,
    shortlist: Shortlist | None = None,
    forced: Tensor | None = None,
) -> list[Hypothesis]:
    """Translate a batch by always taking the most probable next token, or with `dc.temperature`
    above 0 by drawing it from the model's tempered distribution (its `top_k` most probable tokens;
    the batch's random generator seeded with `dc.seed`).

    Only the length and sampling settings of `dc` apply (max_extra, max_new_tokens,
    min_new_tokens, temperature, top_k, seed). A sentence leaves the batch as soon as it ends, so
    the others' steps get cheaper.

    Shapes: src_ids (B, S), padded with cfg.pad_id and each ending in EOS -> B hypotheses.
    """
    cfg = model.cfg
    dc = dc or DecodeConfig(beam_size=1)
    generator = None
    if dc.temperature > 0:
        generator = torch.Generator(src_ids.device).manual_seed(dc.seed)
    next_scores, limits = start_decoding(
        model, src_ids, dc, use_cache, 1, Targets(shortlist, forced)
    )
    batch = src_ids.size(0)
    results: list[Hypothesis | None] = [None] * batch
    active = list(range(batch))  # the sentence of each row
    tokens = torch.full((batch, 1), cfg.bos_id, dtype=torch.long, device=src_ids.device)
    log_prob = torch.zeros(batch, device=src_ids.device)
    for step in range(int(limits.max())):
        logits, normaliser = next_scores(tokens)  # (N, V), (N,)
        if generator is None:
            best, column = logits.max(dim=-1)  # (N,), (N,)
        else:
            tempered = filter_logits(logits / dc.temperature, dc.top_k).softmax(dim=-1)
            column = torch.multinomial(tempered, 1, generator=generator).squeeze(1)  # (N,)
            best = logits.gather(1, column[:, None]).squeeze(1)
        next_token = next_scores.output.ids(column)
        log_prob += best - normaliser
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (N, step + 2)
        ended = next_token == cfg.eos_id
        stop = ended | (step + 1 >= limits)
        if not bool(stop.any()):
            continue
        for j in stop.nonzero().flatten().tolist():
            lp, row = float(log_prob[j]), tokens[j, 1:].tolist()
            results[active[j]] = Hypothesis(
                strip(row, cfg.eos_id, cfg.pad_id), lp, lp, bool(ended[j])
            )
        keep = (~stop).nonzero().flatten()  # (N',) rows that go on
        if keep.numel() == 0:
            break
        tokens, log_prob, limits = tokens[keep], log_prob[keep], limits[keep]
        next_scores.reorder_(keep, same_sources=False)
        active = [active[j] for j in keep.tolist()]
    return [r for r in results if r is not None]


class Finished:
    """The best `size` finished hypotheses of one sentence, best first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.hypotheses: list[Hypothesis] = []

    def add(self, hypothesis: Hypothesis) -> None:
        if len(self.hypotheses) == self.size and hypothesis.score <= self.hypotheses[-1].score:
            return
        self.hypotheses.append(hypothesis)
        self.hypotheses.sort(key=lambda h: -h.score)
        del self.hypotheses[self.size :]

    def cannot_improve(self, best_live_score: float) -> bool:
        """Full, and no live beam (scored at its current length) beats the worst kept."""
        return len(self.hypotheses) == self.size and best_live_score <= self.hypotheses[-1].score


def best_extensions(
    scores: Tensor, logits: Tensor, normaliser: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """The 2k best one-token extensions of each sentence's k beams, best first: their scores,
    the row (beam) each extends and the token it adds.

    A beam adds the same score to each of its tokens, so the best 2k extensions of a sentence are
    among the 2k best tokens of each of its beams: only those are normalised and compared.

    Shapes: scores (n, k), logits (n*k, V), normaliser (n*k,) -> three (n, 2k)
    """
    n, k = scores.shape
    per_row = min(2 * k, logits.size(-1))
    best_logits, best_tokens = top_k_rows(logits, per_row)  # (n*k, per_row)
    candidates = scores.view(-1, 1) + (best_logits - normaliser[:, None])
    top_scores, top = candidates.view(n, k * per_row).topk(2 * k, dim=1)
    first_row = torch.arange(n, device=scores.device)[:, None] * k  # (n, 1)
    tokens = best_tokens.view(n, k * per_row).gather(1, top)
    return top_scores, first_row + top // per_row, tokens


def still_searching(
    sentences: list[Finished],
    limits: list[int],
    scores: Tensor,
    tokens: Tensor,
    length: int,
    penalty: float,
) -> list[int]:
    """The sentences (batch slots) that go on after a step that made `length` tokens: one at its
    length limit ends its live beams as they are (`finished=False`); one whose best live beam,
    scored at its current length, cannot beat its finished hypotheses is done.

    Shapes: scores (n, k) live beams best first; tokens (n*k, length + 1)
    """
    k = scores.size(1)
    going_on = []
    for j, (sentence, limit) in enumerate(zip(sentences, limits, strict=True)):
        if length >= limit:
            for i, log_prob in enumerate(scores[j].tolist()):
                if math.isfinite(log_prob):
                    beam = tokens[j * k + i, 1:].tolist()
                    sentence.add(Hypothesis(beam, log_prob, log_prob / penalty, False))
        elif not sentence.cannot_improve(float(scores[j, 0]) / penalty):
            going_on.append(j)
    return going_on


@torch.no_grad()
def beam_search(
    model: Transformer,
    src_ids: Tensor,
    dc: DecodeConfig | None = None,
    use_cache: bool = True,
    shortlist: Shortlist | None = None,
    forced: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """Beam search over a batch: the `dc.n_best` best hypotheses of each sentence, best first.

    Each sentence keeps k = `beam_size` live beams. Every step, of the 2k best extensions, those
    ending in end-of-sentence within the top k become finished hypotheses (scored with the length
    penalty), and the best k others live on. A sentence is done as `still_searching` says.
    Decoding stops when every sentence is done.

    Shapes: src_ids (B, S), padded with cfg.pad_id and each ending in EOS -> B lists.
    """
    cfg, dc = model.cfg, dc or DecodeConfig()
    batch, device, k = src_ids.size(0), src_ids.device, dc.beam_size
    next_scores, limits = start_decoding(
        model, src_ids, dc, use_cache, k, Targets(shortlist, forced)
    )
    finished = [Finished(k) for _ in range(batch)]
    active = list(range(batch))  # the sentence of each group of k rows
    tokens = torch.full((batch * k, 1), cfg.bos_id, dtype=torch.long, device=device)
    # Only the first beam of each sentence is live at first: the first step must not pick a token k times.
    scores = torch.full((batch, k), float("-inf"), device=device)
    scores[:, 0] = 0.0
    limits_list = limits.tolist()
    for step in range(max(limits_list)):
        logits, normaliser = next_scores(tokens)  # (n*k, V), (n*k,)
        top_scores, top_rows, columns = best_extensions(scores, logits, normaliser)  # (n, 2k)
        top_tokens = next_scores.output.ids(columns)
        is_eos = top_tokens == cfg.eos_id
        # Tokens generated, counting this step's, and their length penalty.
        length = step + 1
        penalty = length_penalty(length, dc.alpha, dc.length_penalty)

        # End-of-sentence among the top k: a finished hypothesis (rare; handled on the CPU).
        for j, rank in (is_eos[:, :k] & torch.isfinite(top_scores[:, :k])).nonzero().tolist():
            row, lp = int(top_rows[j, rank]), float(top_scores[j, rank])
            finished[active[j]].add(Hypothesis(tokens[row, 1:].tolist(), lp, lp / penalty, True))

        # Each beam has one end-of-sentence extension, so at least k of the 2k candidates go on;
        # take the best k of them, in order (a stable sort moves the ending ones behind).
        keep = torch.sort(is_eos.to(torch.int8), dim=1, stable=True).indices[:, :k]  # (n, k)
        rows = top_rows.gather(1, keep).view(-1)  # (n*k,) the row each new beam continues
        tokens = torch.cat([tokens[rows], top_tokens.gather(1, keep).view(-1, 1)], dim=1)
        scores = top_scores.gather(1, keep)  # (n, k), best first
        next_scores.reorder_(rows)

        sentences = [finished[i] for i in active]
        going_on = still_searching(
            sentences, [limits_list[i] for i in active], scores, tokens, length, penalty
        )
        if not going_on:
            break
        if len(going_on) < len(active):  # done sentences leave the batch
            slots = torch.tensor(going_on, device=device)
            rows = (slots[:, None] * k + torch.arange(k, device=device)).view(-1)
            tokens, scores = tokens[rows], scores[slots]
            next_scores.reorder_(rows, same_sources=False)
            active = [active[j] for j in going_on]
    return [sentence.hypotheses[: dc.n_best] for sentence in finished]


def decode(
    model: Transformer,
    src_ids: Tensor,
    dc: DecodeConfig,
    use_cache: bool = True,
    shortlist: Shortlist | None = None,
    forced: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """The `dc.n_best` best hypotheses per sentence: greedy search for beam size 1, else beam
    search; over the whole target vocabulary, or each sentence's `shortlist`
    (`vaswani.decoding.shortlist`); each sentence's first token `forced` (B,) where given.

    A forced token is searched as one of the translation's, log-probability 0, as Hugging Face's
    generate does (so it counts in the length penalty), and taken off the hypotheses after."""
    if dc.beam_size == 1:
        found = [[h] for h in greedy(model, src_ids, dc, use_cache, shortlist, forced)]
    else:
        found = beam_search(model, src_ids, dc, use_cache, shortlist, forced)
    if forced is not None:
        for mine in found:
            for h in mine:
                h.tokens = h.tokens[1:]
    return found


def filter_logits(logits: Tensor, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """Logits with all but the top-k tokens, then all but the smallest set of most probable tokens
    whose probability reaches top_p (nucleus), set to -inf. 0 and 1.0 switch a filter off.

    Shapes: (N, V) -> (N, V)
    """
    if 0 < top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]  # (N, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        # Keep a token when the tokens before it do not yet reach top_p: the first always stays.
        drop_sorted = probs.cumsum(dim=-1) - probs >= top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits
