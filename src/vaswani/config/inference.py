"""`DecodeConfig` (how translations are searched for) and `ServeSettings` (the HTTP server's limits
and batching)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from vaswani.config.checks import check_types, one_of, requirement
from vaswani.config.training import PRECISIONS

LENGTH_PENALTIES = ("gnmt", "plain")
MAX_BEAM_SIZE = 256
"""The widest beam vaswani searches, on the command line and over HTTP alike."""


@dataclass(frozen=True)
class Sampling:
    """How a language model continues a prompt (`vaswani generate`): requests with equal ones
    share a model call."""

    max_new_tokens: int = 100
    temperature: float = 1.0
    """0 takes the most probable token (greedy)."""
    top_k: int = 0
    """Draw from the k most probable tokens only; 0: from all."""
    top_p: float = 1.0
    """Draw from the smallest set of tokens whose probability reaches top_p (nucleus)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0 or not 0.0 < self.top_p <= 1.0 or self.top_k < 0:
            raise ValueError(
                f"sampling needs temperature >= 0, 0 < top_p <= 1 and top_k >= 0; got "
                f"temperature={self.temperature}, top_p={self.top_p}, top_k={self.top_k}"
            )


@dataclass(frozen=True)
class DecodeConfig:
    """How translations are searched for. The defaults are the paper's (§6.1): beam 4, alpha 0.6,
    output length at most input length + 50.

    Beam search ranks a finished hypothesis of `length` tokens (its end-of-sentence token counted)
    by log P / lp(length), with lp the GNMT form ((5 + length) / 6) ** alpha (Wu et al., 2016, the
    one the paper cites) or the plain form length ** alpha. alpha = 0 ranks by log P alone.
    """

    beam_size: int = 4
    """Hypotheses kept per sentence; 1 is greedy search; at most MAX_BEAM_SIZE (256) and the
    target vocabulary."""
    alpha: float = 0.6
    """Length penalty strength (paper: 0.6); 0 ranks by log-probability alone."""
    length_penalty: str = one_of("gnmt", LENGTH_PENALTIES)
    """gnmt: divide log P by ((5 + length) / 6) ** alpha; plain: by length ** alpha."""
    n_best: int = 1
    """Hypotheses returned per sentence, best first (at most beam_size)."""
    max_extra: int = 50
    """A sentence's output stops after (its source tokens + max_extra) tokens."""
    max_new_tokens: int | None = None
    """A fixed output limit instead of source length + max_extra."""
    min_new_tokens: int = 0
    """The end-of-sentence token is not allowed before this many tokens (benchmarks force lengths)."""
    loop_guard: str = one_of("retry", ("retry", "always", "off"))
    """retry: a translation that repeats itself in a loop (a word 4 times in a row, a phrase 3
    times, a letter 6 times) is decoded again with such repeats barred; always: repeats barred in
    every sentence; off: never (`vaswani.decoding.loops`)."""
    batch_tokens: int = 4096
    """Token budget of one batch: source tokens, padding included, times beam_size."""
    temperature: float = 0.0
    """0: search (greedy or beam). Above 0: sampling, each token drawn from the model's
    distribution at this temperature (beam_size 1), as back-translation by sampling does
    (Edunov et al. 2018)."""
    top_k: int = 0
    """Sampling: draw only among the k most probable tokens; 0 draws among all."""
    seed: int = 0
    """Sampling: the random seed of a batch of sentences."""

    def __post_init__(self) -> None:
        require = requirement("DecodeConfig")
        check_types(self)
        for name in ("beam_size", "n_best", "batch_tokens"):
            value = getattr(self, name)
            require(
                isinstance(value, int) and value >= 1, f"{name} must be an int >= 1, got {value!r}"
            )
        require(
            self.beam_size <= MAX_BEAM_SIZE,
            f"beam_size={self.beam_size} is over the cap of {MAX_BEAM_SIZE} (beyond a few dozen "
            "a wider beam only costs time and memory)",
        )
        require(
            self.n_best <= self.beam_size,
            f"n_best={self.n_best} exceeds beam_size={self.beam_size}; raise the beam size",
        )
        require(self.alpha >= 0.0, f"alpha must be >= 0, got {self.alpha!r}")
        require(
            math.isfinite(self.temperature) and self.temperature >= 0.0,
            f"temperature must be a number >= 0, got {self.temperature!r}",
        )
        require(
            self.temperature == 0.0 or self.beam_size == 1,
            f"sampling (temperature {self.temperature}) draws one translation a sentence: "
            f"give beam_size 1, not {self.beam_size}",
        )
        require(
            isinstance(self.top_k, int) and self.top_k >= 0,
            f"top_k must be an int >= 0, got {self.top_k!r}",
        )
        for name in ("max_extra", "min_new_tokens"):
            value = getattr(self, name)
            require(
                isinstance(value, int) and value >= 0, f"{name} must be an int >= 0, got {value!r}"
            )
        if self.max_new_tokens is not None:
            require(
                isinstance(self.max_new_tokens, int) and self.max_new_tokens >= 1,
                f"max_new_tokens must be an int >= 1 or None, got {self.max_new_tokens!r}",
            )
            require(
                self.min_new_tokens <= self.max_new_tokens,
                f"min_new_tokens={self.min_new_tokens} exceeds max_new_tokens={self.max_new_tokens}",
            )


@dataclass(frozen=True)
class ServeSettings:
    """Limits and batching of the server; every one is a `vaswani serve` flag."""

    max_body_bytes: int = 1 << 20
    """Largest request body; a larger one gets 413 before it is read."""
    max_texts: int = 64
    """Texts (sentences, prompts) per request."""
    max_chars: int = 2000
    """Characters per text (the model's position limit also applies, after tokenizing)."""
    max_file_bytes: int = 20 << 20
    """Largest file POST /translate_file takes (that route alone takes a body this large, beyond
    max_body_bytes)."""
    max_file_chars: int = 500_000
    """Most characters of text a file to translate may hold."""
    file_ttl_s: float = 600.0
    """Seconds a translated file waits to be downloaded before it is deleted."""
    max_beam_size: int = 8
    """Largest beam_size a request may ask for (at most MAX_BEAM_SIZE, 256)."""
    beam_size: int = 4
    """Beam size of a request that gives none (the paper's 4)."""
    max_length: int = 256
    """Largest `max_length` (translation) or `max_new_tokens` (generation) a request may ask for."""
    timeout_s: float = 30.0
    """Seconds a request may wait for its answer before it gets 504."""
    max_queued_texts: int = 512
    """Sentences waiting or being translated; beyond this a request gets 503 at once."""
    batch_wait_ms: float = 5.0
    """How long the worker waits for more requests to batch with the first one (5 ms gave 93.5
    requests/s against 15.0 without batching: docs/serving.md, benchmarks/serve_load.py)."""
    batch_tokens: int = 8192
    """Token budget of one model call (source tokens x beam size)."""
    dynamic_batching: bool = True
    """False: one request per model call (for comparison)."""
    metrics: bool = False
    """GET /metrics in Prometheus' text format: requests, rejections, characters, batches, time
    per request and per token, queues (`vaswani.serve.prometheus`); never a key or a text."""
    precision: str = one_of("auto", PRECISIONS)
    """bf16, fp16, fp32, or auto: chosen for the model's device (`vaswani.device`)."""
    decoding: DecodeConfig = dataclasses.field(default_factory=DecodeConfig)
    """How a translation request is searched (alpha, length penalty, output length); its
    beam_size and max_length replace this one's, batch_tokens above replaces its budget."""

    def __post_init__(self) -> None:
        require = requirement("ServeSettings")
        check_types(self)
        for name in (
            "max_body_bytes",
            "max_texts",
            "max_chars",
            "max_beam_size",
            "beam_size",
            "max_length",
            "max_queued_texts",
            "batch_tokens",
            "max_file_bytes",
            "max_file_chars",
        ):
            require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        require(self.timeout_s > 0, f"timeout_s must be > 0 seconds, got {self.timeout_s}")
        require(self.file_ttl_s > 0, f"file_ttl_s must be > 0 seconds, got {self.file_ttl_s}")
        require(self.batch_wait_ms >= 0, f"batch_wait_ms must be >= 0, got {self.batch_wait_ms}")
        require(
            self.beam_size <= self.max_beam_size,
            f"beam_size={self.beam_size} is over max_beam_size={self.max_beam_size}",
        )
        require(
            self.max_beam_size <= MAX_BEAM_SIZE,
            f"max_beam_size={self.max_beam_size} is over the cap of {MAX_BEAM_SIZE}",
        )
