"""Every setting a user can give, as frozen dataclasses checked on construction: `ModelConfig`
(the Transformer), `TrainConfig` (a training run), `DecodeConfig` (search) and `ServeSettings` (the
HTTP server). The `vaswani` flags are made from these fields and their docstrings.

In `ModelConfig`, every departure from the paper ("Attention Is All You Need", Vaswani et al.,
2017) is a switch whose default is the paper's choice; derived values are properties;
`__post_init__` only validates.

Over 500 lines on purpose: the settings side by side, with one set of type and range checks, are
easier to compare and keep consistent than four modules.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vaswani.errors import ConfigError

MAX_BATCH_TOKENS = 1 << 24  # 16M tokens: beyond any GPU's memory for one batch of the big preset
MAX_MINUTES = 525_600  # a year: a larger budget is a typo, and time arithmetic overflows later


def requirement(what: str) -> Callable[[bool, str], None]:
    """A check that raises `ConfigError("invalid WHAT: message")` when its condition is false."""

    def require(ok: bool, message: str) -> None:
        if not ok:
            raise ConfigError(f"invalid {what}: {message}")

    return require


def check_fields(cls: type, data: dict[str, Any]) -> None:
    """Refuse keys that are not fields of the dataclass `cls`, so a typo never passes silently."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"invalid {cls.__name__}: expected a JSON object, got {type(data).__name__}"
        )
    unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise ConfigError(f"invalid {cls.__name__}: unknown field(s) {', '.join(unknown)}")


# What each annotation admits. Config files are JSON written by anyone: a bool is not a number
# (True == 1 in Python), a string is not a bool ("no" is truthy), and NaN is no setting.
_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "str": (str,),
    "None": (type(None),),
}


def _admits(annotation: str, value: Any) -> bool:
    for option in annotation.split(" | "):
        if option.startswith(("dict[", "tuple[", "list[")):
            if isinstance(value, (dict, tuple, list)):
                return True
            continue
        if option not in _TYPES:  # a class, such as DecodeConfig
            if type(value).__name__ == option:
                return True
            continue
        types = _TYPES[option]
        if isinstance(value, bool) and bool not in types:
            continue
        if isinstance(value, types):
            return not isinstance(value, float) or math.isfinite(value)
    return False


def one_of(default: Any, choices: tuple[str, ...]) -> Any:
    """A field whose value must be one of `choices` (None too, if that is its default); the
    `vaswani` flag made from it offers them."""
    return dataclasses.field(default=default, metadata={"choices": choices})


def check_types(obj: Any) -> None:
    """Refuse a field whose value has the wrong type for its annotation (see `_TYPES`), or is not
    one of the field's choices (`one_of`)."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if not _admits(f.type, value):
            raise ConfigError(
                f"invalid {type(obj).__name__}: {f.name} must be {f.type.replace(' | ', ' or ')}, "
                f"got {value!r} ({type(value).__name__})"
            )
        choices = f.metadata.get("choices")
        if choices and value is not None and value not in choices:
            raise ConfigError(
                f"invalid {type(obj).__name__}: {f.name}={value!r}; choose one of "
                f"{', '.join(choices)}"
            )


# Upper bounds, checked before anything is allocated: far above any real Transformer (the paper's
# big model: d_model 1024, d_ff 4096, 16 heads, 6 layers) and low enough that a typo such as
# d_model=10**9 is an error, not an attempt to allocate terabytes.
LIMITS = {
    "vocab_size": 1 << 22,
    "tgt_vocab_size": 1 << 22,
    "d_model": 1 << 15,
    "n_heads": 1 << 10,
    "d_ff": 1 << 17,
    "n_encoder_layers": 1 << 10,
    "n_decoder_layers": 1 << 10,
    "max_len": 1 << 20,
    "n_labels": 1 << 20,
}


POSITIONS = ("sinusoidal", "learned")
SINUSOID_LAYOUTS = ("interleaved", "halves")
NORMS = ("post", "pre")
ACTIVATIONS = ("relu", "gelu", "silu")
TIE_EMBEDDINGS = ("none", "decoder", "all")
POOLINGS = ("mean", "first")


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of an encoder-decoder, encoder-only or decoder-only Transformer.

    The defaults are the paper's base model (Table 3, row "base") with a shared 37k vocabulary.
    Use `ModelConfig.from_preset(name, **overrides)` for the named sizes.
    """

    vocab_size: int = 37000
    """Source vocabulary size; also the target's when `tgt_vocab_size` is None (shared, §3.4)."""
    tgt_vocab_size: int | None = None
    """Target vocabulary size when it differs from the source's; None shares one vocabulary."""
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1
    """§5.4: on every sub-layer output before the residual add, and on embeddings + positions."""
    attention_dropout: float = 0.0
    """Dropout on attention weights; not in the paper (0), used by some reimplementations."""
    activation_dropout: float = 0.0
    """Dropout after the feed-forward activation; not in the paper (0)."""
    word_dropout: float = 0.0
    """In training, the share of source and target tokens whose embedding is zeroed, the word
    dropped as a whole (its position stays; Gal & Ghahramani 2016, Sennrich & Zhang 2019); not in
    the paper (0)."""
    max_len: int = 1024
    """Position limit: the longest source or target sequence the model accepts."""
    positions: str = "sinusoidal"
    """§3.5: "sinusoidal" (paper) or "learned" (Table 3 row E)."""
    sinusoid_layout: str = "interleaved"
    """Where the sines and cosines of the sinusoidal table go: "interleaved" (paper: sines in the
    even columns, cosines in the odd ones) or "halves" (sines, then cosines; Marian / OPUS-MT)."""
    norm: str = "post"
    """§3.1: "post" = LayerNorm(x + Sublayer(x)) (paper); "pre" = x + Sublayer(LayerNorm(x))."""
    activation: str = "relu"
    """§3.3: "relu" (paper), "gelu", or "silu" (x * sigmoid(x), "swish"; many OPUS-MT models)."""
    tie_embeddings: str = "all"
    """§3.4: "all" shares source, target and output matrices (needs a shared vocabulary);
    "decoder" ties only the target embedding and output projection; "none" ties nothing."""
    scale_embeddings: bool = True
    """§3.4: multiply token embeddings by sqrt(d_model)."""
    output_bias: bool = False
    """A bias on the output logits (Marian's final_logits_bias); the paper's projection has none."""
    layer_norm_eps: float = 1e-5
    n_labels: int = 0
    """Classes of a sequence classifier's head (`EncoderClassifier`); 0 for the other models."""
    pooling: str = "mean"
    """How a classifier makes one vector of the encoder's output: "mean" over the real (non-pad)
    positions, or "first": the position of the start token it puts before the text (BERT's
    [CLS])."""
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    """pad_id pads; bos_id is the token decoding starts from (Marian starts from pad_id: the two
    may be equal); eos_id ends a sentence."""

    def __post_init__(self) -> None:
        require = requirement("ModelConfig")
        check_types(self)
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            require(value is None or value <= limit, f"{name}={value} is above {limit:,}")

        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            value = getattr(self, name)
            require(
                isinstance(value, int) and value > 0,
                f"{name} must be a positive int, got {value!r}",
            )
        if self.tgt_vocab_size is not None:
            require(
                isinstance(self.tgt_vocab_size, int) and self.tgt_vocab_size > 0,
                f"tgt_vocab_size must be a positive int or None, got {self.tgt_vocab_size!r}",
            )
        for name in ("n_encoder_layers", "n_decoder_layers", "n_labels"):
            value = getattr(self, name)
            require(
                isinstance(value, int) and value >= 0, f"{name} must be an int >= 0, got {value!r}"
            )
        require(
            self.d_model % self.n_heads == 0,
            f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
            "choose n_heads that divides d_model (e.g. 8 for 512)",
        )
        for name in ("dropout", "attention_dropout", "activation_dropout", "word_dropout"):
            value = getattr(self, name)
            require(0.0 <= value < 1.0, f"{name} must be in [0, 1), got {value!r}")
        require(self.layer_norm_eps > 0, f"layer_norm_eps must be > 0, got {self.layer_norm_eps!r}")
        for name, allowed in (
            ("positions", POSITIONS),
            ("sinusoid_layout", SINUSOID_LAYOUTS),
            ("norm", NORMS),
            ("activation", ACTIVATIONS),
            ("tie_embeddings", TIE_EMBEDDINGS),
            ("pooling", POOLINGS),
        ):
            value = getattr(self, name)
            require(value in allowed, f"{name}={value!r}; choose one of {', '.join(allowed)}")
        require(
            self.tie_embeddings != "all" or self.shared_vocab,
            f"tie_embeddings='all' needs one shared vocabulary, but vocab_size={self.vocab_size} "
            f"and tgt_vocab_size={self.tgt_vocab_size}; use tie_embeddings='decoder' or 'none'",
        )
        for name in ("pad_id", "bos_id", "eos_id"):
            value = getattr(self, name)
            limit = min(self.vocab_size, self.target_vocab_size)
            require(
                isinstance(value, int) and 0 <= value < limit,
                f"{name}={value!r} must be a token id in [0, {limit})",
            )

    @property
    def target_vocab_size(self) -> int:
        """The target (decoder and output) vocabulary size."""
        return self.vocab_size if self.tgt_vocab_size is None else self.tgt_vocab_size

    @property
    def shared_vocab(self) -> bool:
        return self.tgt_vocab_size is None or self.tgt_vocab_size == self.vocab_size

    @property
    def head_dim(self) -> int:
        """d_k = d_v = d_model / h (§3.2.2)."""
        return self.d_model // self.n_heads

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """A named size (`tiny`, `small`, `base`, `big`) with any field overridden."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        return dataclasses.replace(PRESETS[name], **overrides)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Inverse of `to_dict`; unknown keys are an error, so a typo never passes silently."""
        check_fields(cls, data)
        return cls(**data)


# For training on a laptop CPU in tens of minutes. Pre-norm, unlike the paper: on ding-de-en with
# 5 CPU-minutes it reached validation loss 4.64 against post-norm's 5.05 (lr scale 1) and 5.40 (lr
# scale 2, where post-norm stalled).
_SMALL = ModelConfig(
    norm="pre",
    vocab_size=8000,
    d_model=256,
    n_heads=4,
    d_ff=1024,
    n_encoder_layers=3,
    n_decoder_layers=3,
    max_len=256,
)

PRESETS: dict[str, ModelConfig] = {
    # For tests: builds and runs in milliseconds.
    "tiny": ModelConfig(
        vocab_size=128,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_encoder_layers=2,
        n_decoder_layers=2,
        max_len=128,
    ),
    # For minutes of CPU time on small data: the small preset at half the width (`--preset auto`
    # picks it when a budget buys too few tokens for `small`; see vaswani.train.recipe).
    "mini": dataclasses.replace(_SMALL, d_model=128, d_ff=512),
    "small": _SMALL,
    # Table 3, "base": N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1 (65M parameters).
    "base": ModelConfig(),
    # Table 3, "big": N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3 (213M parameters).
    "big": ModelConfig(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3),
}


# Training settings that go with a model size. base and big: the paper's (§5.3). tiny and small,
# which are trained on CPUs for minutes rather than on GPUs for days: a shorter warm-up, a higher
# rate and smaller batches, so that a 30-minute budget makes thousands of updates past warm-up.
PRESET_TRAINING: dict[str, dict[str, Any]] = {
    "tiny": {"warmup": 1000, "lr_scale": 2.0, "batch_tokens": 2048},
    "mini": {"warmup": 1000, "lr_scale": 2.0, "batch_tokens": 2048},
    "small": {"warmup": 1000, "lr_scale": 2.0, "batch_tokens": 2048},
    "base": {"warmup": 4000, "lr_scale": 1.0, "batch_tokens": 4096},
    "big": {"warmup": 4000, "lr_scale": 1.0, "batch_tokens": 4096},
}

AUTO = "auto"
PRECISIONS = ("auto", "bf16", "fp16", "fp32")
"""Autocast precisions; "auto" is resolved from the hardware by `vaswani.device.pick_precision`."""
NAN_POLICIES = ("stop", "skip")


@dataclass(frozen=True)
class TrainConfig:
    """Settings of a training run; saved as train_config.json in the run directory.

    The defaults follow the paper (§5.3, §5.4) except where a CPU budget of minutes asks otherwise;
    each such departure says so.
    """

    data: str
    out: str
    preset: str = one_of(AUTO, (AUTO, *PRESETS))
    """Model size (`vaswani presets`), or auto: chosen from the training tokens, the budget and
    this machine's measured step time, with the batch, warm-up, learning rate and schedule
    (`vaswani.train.recipe`); the choice is printed and kept in the run (recipe.json)."""
    model: dict[str, Any] = dataclasses.field(default_factory=dict)
    """ModelConfig fields that override the preset (vocabulary sizes come from the data)."""
    task: str | None = None
    """The task the data must have been prepared for (`prepare --task`: translate, lm or
    classify, `vaswani.tasks`); None: whichever it was."""
    init: str | None = None
    """Fine-tune: a run directory (e.g. an imported OPUS-MT model) whose model and best weights
    training starts from, instead of the preset and random weights; `model` may still override
    fields such as dropout. The data must use its tokenizer (`prepare --tokenizer-from`)."""
    batch_tokens: int | None = None
    """Token budget of one micro-batch, per side, padding included (§5.1 used ~25k);
    None: the preset's."""
    accumulate: int = 1
    """Micro-batches per optimizer update (across all processes); raises the tokens per update."""
    warmup: int | None = None
    """Warm-up steps (§5.3: 4000); None: the preset's."""
    lr_scale: float | None = None
    """Multiplies the schedule d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (§5.3);
    None: the preset's. Used only when --lr is not given."""
    lr: float | None = None
    """Peak learning rate (reached at the end of warm-up); None: the paper's
    lr_scale * d_model^-0.5 * warmup^-0.5, or auto's choice."""
    schedule: str | None = None
    """inverse-sqrt (the paper's, §5.3; never reaches zero), linear (warm-up, then linear decay to
    zero when the budget ends) or wsd (warm-up, constant, linear cool-down over the last fifth).
    None: inverse-sqrt for base and big chosen by name, linear otherwise."""
    ema_decay: float | None = None
    """Decay of an exponential moving average of the weights, evaluated beside them at every
    validation (best/ keeps whichever scores higher); 0 turns it off. None: auto, from the
    run's length in updates (`vaswani.train.average`)."""
    bpe_dropout: float = 0.0
    """Subword dropout on the training pairs (after BPE-dropout, Provilkov et al. 2020): each
    token is split into the two it was merged from with this probability, and each part in turn;
    never on validation, test or inference. Off by default: 0.1 cost 8 BLEU in a 20-minute CPU
    run on 19k pairs (README). Translation with vaswani's own BPE only."""
    tensorboard: bool = False
    """Write the training and validation figures, and the attention maps of a fixed validation
    sentence at each validation, as TensorBoard events under RUN/tensorboard/ (pip install
    'vaswani[tensorboard]')."""
    patience: int | None = None
    """Stop after this many validations in a row without a better figure (chrF for
    translation); None: never."""
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    label_smoothing: float = 0.1
    """Label smoothing of the training loss (§5.4)."""
    clip_norm: float = 0.0
    """Gradient clipping by global norm; 0 turns it off (the paper does not clip)."""
    precision: str = one_of("auto", PRECISIONS)
    """bf16, fp16 (with loss scaling) or fp32; auto: bf16 where the hardware computes it
    natively, fp16 on CUDA GPUs without bf16, fp32 elsewhere. Kept as asked, so that a resume
    on other hardware chooses again."""
    seed: int = 0
    """Random seed: initialisation, dropout, data order."""
    max_steps: int | None = None
    """Stop after this many optimizer updates."""
    max_minutes: float | None = None
    """Stop after this much training time (minutes); with max_steps, whichever comes first."""
    eval_every: int | None = None
    """Validate (and choose best/) every this many steps; None: 8 times over a linear or wsd
    schedule's horizon, every 500 steps with inverse-sqrt."""
    eval_sentences: int = 200
    """Validation pairs translated greedily for BLEU at each evaluation (translation only)."""
    save_every: int | None = None
    """Write a checkpoint every this many steps; None: at every validation."""
    keep_last: int = 5
    """Checkpoints kept (older ones are deleted; best/ is kept apart)."""
    log_every: int = 10
    """Append a line to metrics.jsonl every this many steps."""
    nan_policy: str = one_of("stop", NAN_POLICIES)
    """"stop": a non-finite loss ends training; "skip": the update is skipped and counted."""
    device: str = "auto"
    """auto (CUDA, then Apple MPS, then CPU), cpu, cuda, cuda:1, mps."""

    def __post_init__(self) -> None:
        require = requirement("TrainConfig")
        check_types(self)

        for name in (
            "batch_tokens",
            "accumulate",
            "warmup",
            "patience",
            "eval_every",
            "save_every",
            "log_every",
        ):
            value = getattr(self, name)
            require(value is None or value >= 1, f"{name} must be >= 1")
        require(self.lr_scale is None or self.lr_scale > 0, "lr_scale must be > 0")
        require(self.lr is None or 0 < self.lr < 1, "lr must be in (0, 1)")
        require(
            self.ema_decay is None or 0 <= self.ema_decay < 1,
            "ema_decay must be in [0, 1) (0 = off)",
        )
        require(
            self.bpe_dropout is None or 0 <= self.bpe_dropout < 1,
            "bpe_dropout must be in [0, 1) (0 = off)",
        )
        require(0 <= self.label_smoothing < 1, "label_smoothing must be in [0, 1)")
        require(self.clip_norm >= 0, "clip_norm must be >= 0 (0 = off)")
        require(self.keep_last >= 1, "keep_last must be >= 1")
        require(0 <= self.seed < 2**32, "seed must be in 0 .. 2**32-1")
        require(
            self.batch_tokens is None or self.batch_tokens <= MAX_BATCH_TOKENS,
            f"batch_tokens must be at most {MAX_BATCH_TOKENS:,} (one batch is held in memory)",
        )
        require(self.max_steps is None or self.max_steps >= 1, "max_steps must be >= 1")
        require(
            self.max_minutes is None or 0 < self.max_minutes <= MAX_MINUTES,
            f"max_minutes must be in (0, {MAX_MINUTES:,}] (a year)",
        )
        require(
            self.max_steps is not None or self.max_minutes is not None,
            "give a budget: max_steps and/or max_minutes",
        )
        check_fields(ModelConfig, self.model)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        data = dict(data) if isinstance(data, dict) else data
        if isinstance(data, dict) and "max_tokens" in data and "batch_tokens" not in data:
            data["batch_tokens"] = data.pop(
                "max_tokens"
            )  # its old name (train_config.json of earlier runs)
        check_fields(cls, data)
        if "adam_betas" in data:
            data["adam_betas"] = tuple(data["adam_betas"])
        return cls(**data)


LENGTH_PENALTIES = ("gnmt", "plain")
MAX_BEAM_SIZE = 256
"""The widest beam vaswani searches, on the command line and over HTTP alike."""


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
    batch_tokens: int = 4096
    """Token budget of one batch: source tokens, padding included, times beam_size."""

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
    requests/s against 15.0 without batching: README, benchmarks/serve_load.py)."""
    batch_tokens: int = 8192
    """Token budget of one model call (source tokens x beam size)."""
    dynamic_batching: bool = True
    """False: one request per model call (for comparison)."""
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
        ):
            require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        require(self.timeout_s > 0, f"timeout_s must be > 0 seconds, got {self.timeout_s}")
        require(self.batch_wait_ms >= 0, f"batch_wait_ms must be >= 0, got {self.batch_wait_ms}")
        require(
            self.beam_size <= self.max_beam_size,
            f"beam_size={self.beam_size} is over max_beam_size={self.max_beam_size}",
        )
        require(
            self.max_beam_size <= MAX_BEAM_SIZE,
            f"max_beam_size={self.max_beam_size} is over the cap of {MAX_BEAM_SIZE}",
        )
