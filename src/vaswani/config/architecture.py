"""`ModelConfig`, the Transformer's hyper-parameters, and the presets by name. Every departure from
the paper is a switch whose default is the paper's choice; derived values are properties;
`__post_init__` only validates."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from vaswani.config.checks import LIMITS, check_fields, check_types, requirement
from vaswani.errors import ConfigError

POSITIONS = ("sinusoidal", "learned")
SINUSOID_LAYOUTS = ("interleaved", "halves", "fairseq")
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
    even columns, cosines in the odd ones), "halves" (sines, then cosines; Marian / OPUS-MT) or
    "fairseq" (as halves, with the frequencies 10000^(-i / (D/2 - 1)) of fairseq's table, which
    M2M-100 and NLLB-200 use: the last pair's period is 10000 rather than 10000^(1 - 2/D))."""
    position_offset: int = 0
    """The table row of position 0: fairseq's models (M2M-100, NLLB-200, mBART) keep rows 0 and 1
    for padding, so their positions start at row 2 of a table of max_len + 2 rows. 0 in the paper."""
    embedding_norm: bool = False
    """A LayerNorm on embeddings plus positions, before dropout (mBART's layernorm_embedding);
    not in the paper."""
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
    alignment_head: int | None = None
    """The head of the last decoder layer's cross-attention that guided alignment trained to
    point at the source words each target word translates (`train --guided-alignment`); word
    alignment reads it alone. None: alignment averages the heads."""
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
        for name in ("n_encoder_layers", "n_decoder_layers", "n_labels", "position_offset"):
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
        """A named size (one of PRESETS, listed by `vaswani presets`) with any field overridden."""
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
    # For minutes of CPU time on small data: the small preset at three eighths and half the width
    # (`--preset auto` picks them when a budget buys too few tokens for the next size up; see
    # vaswani.train.recipe).
    "micro": dataclasses.replace(_SMALL, d_model=96, d_ff=384),
    "mini": dataclasses.replace(_SMALL, d_model=128, d_ff=512),
    "small": _SMALL,
    # Table 3, "base": N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1 (65M parameters).
    "base": ModelConfig(),
    # Table 3, "big": N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3 (213M parameters).
    "big": ModelConfig(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3),
}
