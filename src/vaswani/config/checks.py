"""The checks every settings dataclass shares: types as annotated (a bool is not a number, NaN is no
setting), choices (`one_of`), ranges with messages that say what to change, and the upper bounds
that keep a typo from allocating terabytes."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
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
