"""Every setting a user can give, as frozen dataclasses checked on construction: `ModelConfig`
(the Transformer, `model.py`), `TrainConfig` (a training run, `training.py`), `DecodeConfig`
(search) and `ServeSettings` (the HTTP server, both `inference.py`), with the checks they share
(`checks.py`). The `vaswani` flags and config files are made from these fields and their
docstrings (`vaswani.cli.fields`)."""

from vaswani.config.architecture import (
    ACTIVATIONS,
    NORMS,
    POOLINGS,
    POSITIONS,
    PRESETS,
    SINUSOID_LAYOUTS,
    TIE_EMBEDDINGS,
    ModelConfig,
)
from vaswani.config.checks import (
    LIMITS,
    MAX_BATCH_TOKENS,
    MAX_MINUTES,
    check_fields,
    check_types,
    one_of,
    requirement,
)
from vaswani.config.inference import (
    LENGTH_PENALTIES,
    MAX_BEAM_SIZE,
    DecodeConfig,
    Sampling,
    ServeSettings,
)
from vaswani.config.training import (
    AUTO,
    NAN_POLICIES,
    PRECISIONS,
    PRESET_TRAINING,
    TrainConfig,
)

__all__ = [
    "ACTIVATIONS",
    "AUTO",
    "LENGTH_PENALTIES",
    "LIMITS",
    "MAX_BATCH_TOKENS",
    "MAX_BEAM_SIZE",
    "MAX_MINUTES",
    "NAN_POLICIES",
    "NORMS",
    "POOLINGS",
    "POSITIONS",
    "PRECISIONS",
    "PRESETS",
    "PRESET_TRAINING",
    "SINUSOID_LAYOUTS",
    "TIE_EMBEDDINGS",
    "DecodeConfig",
    "ModelConfig",
    "Sampling",
    "ServeSettings",
    "TrainConfig",
    "check_fields",
    "check_types",
    "one_of",
    "requirement",
]
