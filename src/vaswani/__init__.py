"""vaswani: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as a tool."""

from vaswani.config import ModelConfig
from vaswani.decoding.cache import KVCache, new_cache
from vaswani.model import DecoderOnly, EncoderOnly, Transformer

__version__ = "0.1.0"

__all__ = [
    "DecoderOnly",
    "EncoderOnly",
    "KVCache",
    "ModelConfig",
    "Transformer",
    "__version__",
    "new_cache",
]
