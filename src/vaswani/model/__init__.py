"""The Transformer's modules: nn.Modules only, no training, data or CLI code."""

from vaswani.model.attention import CrossAttention, MultiHeadAttention, SelfAttention
from vaswani.model.cache import BeamCache, KVCache
from vaswani.model.embeddings import Embeddings, sinusoidal_encoding
from vaswani.model.layers import (
    DecoderLayer,
    EncoderLayer,
    PositionwiseFeedForward,
    Residual,
    causal_mask,
    padding_mask,
)
from vaswani.model.output import OutputLayer
from vaswani.model.transformer import (
    AttentionMaps,
    Decoder,
    DecoderOnly,
    Encoder,
    EncoderClassifier,
    EncoderOnly,
    Transformer,
)

__all__ = [
    "OutputLayer",
    "Residual",
    "AttentionMaps",
    "BeamCache",
    "CrossAttention",
    "Decoder",
    "DecoderLayer",
    "DecoderOnly",
    "Embeddings",
    "Encoder",
    "EncoderClassifier",
    "EncoderLayer",
    "EncoderOnly",
    "KVCache",
    "MultiHeadAttention",
    "PositionwiseFeedForward",
    "SelfAttention",
    "Transformer",
    "causal_mask",
    "padding_mask",
    "sinusoidal_encoding",
]
