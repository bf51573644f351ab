"""`TrainConfig`, the settings of a training run (saved as train_config.json), and the training
settings that go with each preset."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vaswani.config.architecture import PRESETS, ModelConfig
from vaswani.config.checks import (
    MAX_BATCH_TOKENS,
    MAX_MINUTES,
    check_fields,
    check_types,
    one_of,
    requirement,
)
from vaswani.config.settings_files import load_settings

# Training settings that go with a model size. base and big: the paper's (§5.3). tiny and small,
# which are trained on CPUs for minutes rather than on GPUs for days: a shorter warm-up, a higher
# rate and smaller batches, so that a 30-minute budget makes thousands of updates past warm-up.
PRESET_TRAINING: dict[str, dict[str, Any]] = {
    "tiny": {"warmup": 1000, "lr_scale": 2.0, "batch_tokens": 2048},
    "micro": {"warmup": 1000, "lr_scale": 2.0, "batch_tokens": 2048},
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
    this machine's measured step time, with the batch, dropout, warm-up, learning rate and
    schedule (`vaswani.train.recipe`); the choice is printed and kept in the run (recipe.json)."""
    model: dict[str, Any] = dataclasses.field(default_factory=dict)
    """ModelConfig fields that override the preset (vocabulary sizes come from the data)."""
    task: str | None = None
    """The task the data must have been prepared for (`prepare --task`: translate, lm or
    classify, `vaswani.tasks`); None: whichever it was."""
    init: str | None = None
    """Fine-tune: a run directory (e.g. an imported OPUS-MT model) whose model and best weights
    training starts from, instead of the preset and random weights; `model` may still override
    fields such as dropout. The data must use its tokenizer (`prepare --tokenizer-from`)."""
    freeze: str = one_of("none", ("none", "embeddings"))
    """Weights left as they are: "embeddings" keeps the token embeddings (and the output layer
    tied to them) fixed, which for a model with a large vocabulary (NLLB-200: 256k tokens, 42% of
    its weights) saves their gradients and optimizer state: measured on NLLB-200 600M (2 cores of
    an AMD EPYC Zen 4), an update in 7.7 instead of 12.4 GiB and 10 instead of 18 s."""
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
    run on 19k pairs (docs/training.md). Translation with vaswani's own BPE only."""
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
    guided_alignment: float = 0.0
    """Weight of guided alignment (Garg et al. 2019 use 0.05): one head of the last decoder
    layer's cross-attention learns the word alignments of the training pairs (data prepared
    with --word-alignments), so that translation carries inline markup by it; 0: off."""
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
    threads: int | None = None
    """CPU threads; None: the cores this process may use, and with a time budget the faster of
    them and fewer, measured as training goes and re-checked (`vaswani.train.threads`: a machine
    shared with another process trains up to 3x faster on fewer). OMP_NUM_THREADS, if set, is
    kept. A fixed count (or a step budget) resumes bit-identically."""

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
            "threads",
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
        require(
            math.isfinite(self.guided_alignment) and self.guided_alignment >= 0,
            "guided_alignment must be 0 (off) or more",
        )
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
    def from_file(cls, path: Path, **overrides: Any) -> TrainConfig:
        """The settings of YAML file `path` (the file `vaswani train --config` reads), then
        `overrides`: `TrainConfig.from_file("train.yaml", max_minutes=5)`."""
        return load_settings(cls, Path(path), overrides=overrides)

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
