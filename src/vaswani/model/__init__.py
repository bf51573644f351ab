"""The Transformer's modules: nn.Modules only, no training, data, decoding or CLI code."""

from vaswani.model.attention import CrossAttention, MultiHeadAttention, SelfAttention
from vaswani.model.embeddings import Embeddings, sinusoidal_encoding
from vaswani.model.layers import (
    DecoderLayer,
    EncoderLayer,
    PositionwiseFeedForward,
    Residual,
    causal_mask,
    padding_mask,
)
from vaswani.model.transformer import (
    AttentionMaps,
    Decoder,
    DecoderOnly,
    DecoderState,
    Encoder,
    EncoderClassifier,
    EncoderOnly,
    Transformer,
    WholeSequence,
)

__all__ = [
    "AttentionMaps",
    "CrossAttention",
    "Decoder",
    "DecoderLayer",
    "DecoderOnly",
    "DecoderState",
    "Embeddings",
    "Encoder",
    "EncoderClassifier",
    "EncoderLayer",
    "EncoderOnly",
    "MultiHeadAttention",
    "PositionwiseFeedForward",
    "Residual",
    "SelfAttention",
    "Transformer",
    "WholeSequence",
    "causal_mask",
    "padding_mask",
    "sinusoidal_encoding",
]
