"""vaswani: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as a tool."""

from vaswani.config import ModelConfig
from vaswani.decoding.cache import KVCache, new_cache
from vaswani.model import DecoderOnly, EncoderOnly, Transformer

__version__ = "0.1.0"

TRANSLATION = {  # the Python API of translation, imported when first asked for
    "Aids": "vaswani.translation.request",
    "DecodeConfig": "vaswani.config",
    "Engine": "vaswani.translation.engine",
    "Glossary": "vaswani.translation.glossary",
    "Memory": "vaswani.translation.memory",
    "Request": "vaswani.translation.request",
    "load_run": "vaswani.translation.engine",
}


def __getattr__(name: str) -> object:
    if name in TRANSLATION:
        import importlib

        return getattr(importlib.import_module(TRANSLATION[name]), name)
    raise AttributeError(f"module 'vaswani' has no attribute {name!r}")


__all__ = [
    "Aids",
    "DecodeConfig",
    "DecoderOnly",
    "Engine",
    "Glossary",
    "Memory",
    "Request",
    "load_run",
    "EncoderOnly",
    "KVCache",
    "ModelConfig",
    "Transformer",
    "__version__",
    "new_cache",
]
