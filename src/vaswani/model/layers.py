"""The layers of the encoder and decoder stacks (§3.1, §3.3) and the masks they take.

Notation: B batch, S source length, T target length, H heads, D d_model, F d_ff.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vaswani.config import ModelConfig
from vaswani.kernels import Dropout, linear
from vaswani.model.attention import KV, CrossAttention, Keep, SelfAttention


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """Key mask (B, 1, 1, L): True where the key is a real token.

    A sequence made only of padding (an empty sentence) would leave its queries nothing to attend
    to, and softmax over nothing is NaN. Such a row may attend to all its (padding) keys instead:
    its outputs are finite and, being padding, are ignored by everything downstream.
    """
    real = ids != pad_id  # (B, L)
    real = real | ~real.any(dim=1, keepdim=True)
    return real[:, None, None, :]


def causal_mask(length: int, past: int = 0, device: torch.device | None = None) -> Tensor:
    """Mask (1, 1, L, past + L) letting the query at position past + i see keys 0 .. past + i.

    Built explicitly rather than with SDPA's `is_causal`, which aligns to the top-left corner and so
    is wrong whenever queries are fewer than keys (cached decoding).
    """
    query_pos = torch.arange(past, past + length, device=device)[:, None]  # (L, 1)
    key_pos = torch.arange(past + length, device=device)[None, :]  # (1, past + L)
    return (key_pos <= query_pos)[None, None]


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied to each position alike (§3.3).

    Shapes: x (B, L, D) -> (B, L, D), through (B, L, F).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.linear1 = nn.Linear(cfg.d_model, cfg.d_ff)
        self.linear2 = nn.Linear(cfg.d_ff, cfg.d_model)
        self.activation = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}[cfg.activation]
        self.dropout = Dropout(cfg.activation_dropout)
        for layer in (self.linear1, self.linear2):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: Tensor) -> Tensor:
        h = self.dropout(self.activation(linear(self.linear1, x)))
        return linear(self.linear2, h)


class Residual(nn.Module):
    """The residual connection around one sub-layer, with its layer normalisation (§3.1).

    Post-norm (paper's "Add & Norm"): LayerNorm(x + Dropout(Sublayer(x))).
    Pre-norm: x + Dropout(Sublayer(LayerNorm(x))); the stack then ends with a final LayerNorm.
    A layer calls `sublayer_input(x)` to get what its sub-layer reads, and `forward(x, y)` with the
    sub-layer's output y.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.pre_norm = cfg.norm == "pre"
        self.norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.dropout = Dropout(cfg.dropout)  # §5.4: on each sub-layer output, before the add

    def sublayer_input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre_norm else x

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(y)
        return self.norm(x + self.dropout(y))


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each wrapped in `Residual` (§3.1).

    Shapes:
        x: (B, S, D); mask: (B, 1, 1, S) padding mask
        returns: (B, S, D), self-attention weights (B, H, S, S) or None
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = SelfAttention(cfg)
        self.self_attn_norm = Residual(cfg)
        self.ffn = PositionwiseFeedForward(cfg)
        self.ffn_norm = Residual(cfg)

    def forward(
        self, x: Tensor, mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        h, weights, _ = self.self_attn(
            self.self_attn_norm.sublayer_input(x), mask, need_weights=need_weights
        )
        x = self.self_attn_norm(x, h)
        x = self.ffn_norm(x, self.ffn(self.ffn_norm.sublayer_input(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention, feed-forward, each in `Residual` (§3.1).

    Built with `cross_attention=False` it is the layer of a decoder-only language model.

    Shapes:
        x: (B, T, D) the new positions; self_mask: (1, 1, T, Tpast + T) causal
        memory_kv: encoder keys/values (B, H, S, Dh) each; memory_mask: (B, 1, 1, S)
        keep: where the self-attention's new keys and values go (`attention.Keep`), or None
        returns: (B, T, D), what `keep` stored, and the self- and cross-attention weights
        (B, H, T, Tpast + T), (B, H, T, S), or None
    """

    def __init__(self, cfg: ModelConfig, cross_attention: bool = True) -> None:
        super().__init__()
        self.self_attn = SelfAttention(cfg)
        self.self_attn_norm = Residual(cfg)
        # Its own module with its own weights: not the self-attention block called twice.
        self.cross_attn = CrossAttention(cfg) if cross_attention else None
        self.cross_attn_norm = Residual(cfg) if cross_attention else None
        self.ffn = PositionwiseFeedForward(cfg)
        self.ffn_norm = Residual(cfg)

    def forward(
        self,
        x: Tensor,
        self_mask: Tensor | None,
        memory_kv: KV | None = None,
        memory_mask: Tensor | None = None,
        keep: Keep | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, KV, Tensor | None, Tensor | None]:
        h, self_weights, kv = self.self_attn(
            self.self_attn_norm.sublayer_input(x), self_mask, keep, need_weights
        )
        x = self.self_attn_norm(x, h)
        cross_weights = None
        if self.cross_attn is not None:
            if memory_kv is None:
                raise ValueError("this decoder layer has cross-attention and needs memory_kv")
            h, cross_weights = self.cross_attn(
                self.cross_attn_norm.sublayer_input(x), memory_kv, memory_mask, need_weights
            )
            # The residual adds the output of the self-attention block, not the layer input.
            x = self.cross_attn_norm(x, h)
        x = self.ffn_norm(x, self.ffn(self.ffn_norm.sublayer_input(x)))
        return x, kv, self_weights, cross_weights
