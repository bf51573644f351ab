"""The Transformer's modules: nn.Modules only, no training, data or CLI code."""

from vaswani.model.attention import CrossAttention, MultiHeadAttention, SelfAttention
from vaswani.model.embeddings import Embeddings, sinusoidal_encoding
from vaswani.model.layers import (
    AddNorm,
    DecoderLayer,
    EncoderLayer,
    PositionwiseFeedForward,
    causal_mask,
    padding_mask,
)
from vaswani.model.transformer import (
    AttentionMaps,
    Decoder,
    DecoderOnly,
    Encoder,
    EncoderClassifier,
    EncoderOnly,
    KVCache,
    Transformer,
    build_model,
)

__all__ = [
    "AddNorm",
    "AttentionMaps",
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
    "build_model",
    "causal_mask",
    "padding_mask",
    "sinusoidal_encoding",
]
