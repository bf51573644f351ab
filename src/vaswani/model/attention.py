"""Multi-head scaled dot-product attention (§3.2).

Notation: B batch, H heads, Lq query length, Lk key length, D d_model, Dh = D / H head width.

Masks are boolean and True means "may attend" (the `scaled_dot_product_attention` convention),
broadcastable to (B, H, Lq, Lk): (B, 1, 1, Lk) for padding, (1, 1, Lq, Lk) for causality.
The mask builders in `vaswani.model.layers` never leave a query row with nothing to attend to, so
outputs stay finite on every PyTorch version and on both paths below.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from vaswani.config import ModelConfig

KV = tuple[Tensor, Tensor]
"""Keys and values of one attention layer, each (B, H, Lk, Dh)."""

ALL_BACKENDS = [
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.MATH,
]
# On a CPU, PyTorch's flash kernel pays off in training only for long keys: forward + backward of
# one layer (bf16, 4 heads of 64) measured 12.3 ms flash vs 5.5 ms math at 64 keys, 8.4 vs 12.1 at
# 256. Without gradients (decoding) flash is the faster one: one query per sequence 50 vs 90 us at
# 24 keys, 101 vs 223 at 64 (batch 32); 4 beams' queries over 4 x 16 masked keys 1.1 vs 2.4 ms
# (200 sentences, fp32).
CPU_MATH_MAX_KEYS = 192


def fast_backends(q: Tensor, k: Tensor) -> list[SDPBackend]:
    """The SDPA kernels to allow: on a CPU the plain math kernel when training over short keys,
    else PyTorch's choice."""
    if q.device.type == "cpu" and torch.is_grad_enabled() and k.size(-2) <= CPU_MATH_MAX_KEYS:
        return [SDPBackend.MATH]
    return ALL_BACKENDS


def write_at(buffer: Tensor | None, used: int, new: Tensor, capacity: int = 0) -> Tensor:
    """Write `new` (B, H, L, Dh) at positions used .. used + L of a key or value buffer.

    The buffer (B, H, room, Dh) is written in place while it has room, and otherwise replaced by
    one at least twice as long (or `capacity` long), so decoding T tokens copies O(T) cache
    entries in all, where growing by `torch.cat` would copy O(T^2).
    """
    end = used + new.size(2)
    if buffer is None or buffer.size(2) < end:
        room = max(capacity, end if buffer is None else 2 * end)
        grown = new.new_empty(new.size(0), new.size(1), room, new.size(3))
        if buffer is not None:
            grown[:, :, :used] = buffer[:, :, :used]
        buffer = grown
    buffer[:, :, used:end] = new
    return buffer


class MultiHeadAttention(nn.Module):
    """What self- and cross-attention share: splitting heads, attending, the output projection W^O.

    Subclasses own the input projections: `SelfAttention` a fused W^Q|W^K|W^V over one input,
    `CrossAttention` W^Q over the decoder state and a fused W^K|W^V over the encoder output.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.head_dim = cfg.head_dim
        self.attention_dropout = cfg.attention_dropout
        self.out_proj = nn.Linear(cfg.d_model, cfg.d_model)

    def reset_parameters(self) -> None:
        """Xavier-uniform per projection (fused matrices are initialised slice by slice, as the
        separate W^Q, W^K, W^V they stand for), zero biases."""
        for module in self.children():
            if isinstance(module, nn.Linear):
                for block in module.weight.data.split(module.in_features, dim=0):
                    nn.init.xavier_uniform_(block)
                nn.init.zeros_(module.bias)

    def split_heads(self, x: Tensor) -> Tensor:
        b, length, _ = x.shape
        return x.view(b, length, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, L, Dh)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """softmax(QK^T / sqrt(d_k)) V over heads, then W^O (§3.2.1, §3.2.2).

        The fast path calls PyTorch's fused `scaled_dot_product_attention`. With `need_weights` the
        slow path computes the same thing step by step (softmax in float32, so a boolean mask never
        overflows in half precision) and also returns the weights (B, H, Lq, Lk).
        """
        dropout_p = self.attention_dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(self.head_dim)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)  # (B, H, Lq, Lk)
            out = F.dropout(weights, dropout_p, self.training).to(v.dtype) @ v
        else:
            with sdpa_kernel(fast_backends(q, k)):
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        b, _, length, _ = out.shape
        out = out.transpose(1, 2).reshape(b, length, self.n_heads * self.head_dim)  # (B, Lq, D)
        return self.out_proj(out), weights


class SelfAttention(MultiHeadAttention):
    """Queries, keys and values from one sequence, with one fused projection.

    Shapes:
        x: (B, L, D); mask: broadcastable to (B, H, L, Lpast + L)
        past: key and value buffers (B, H, room, Dh) whose first `past_len` positions hold the
            earlier positions, when decoding step by step; None for the first call
        capacity: room to reserve for later positions when starting a buffer (0: none)
        returns: output (B, L, D), weights (B, H, L, Lpast + L) or None, and the key and value
        buffers, now holding Lpast + L positions (written in place when they had room)
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.qkv_proj = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.reset_parameters()

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None,
        past: KV | None = None,
        past_len: int = 0,
        need_weights: bool = False,
        capacity: int = 0,
    ) -> tuple[Tensor, Tensor | None, KV]:
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)  # 3 x (B, L, D)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)  # (B, H, L, Dh)
        if past is not None and past_len < 1:
            raise ValueError("past key/value buffers need past_len, the positions they hold")
        if past is None and capacity <= k.size(2):
            keys, values = k, v  # a whole sequence at once (training): nothing to keep room for
        else:
            keys = write_at(None if past is None else past[0], past_len, k, capacity)
            values = write_at(None if past is None else past[1], past_len, v, capacity)
            end = past_len + k.size(2)
            k, v = keys[:, :, :end], values[:, :, :end]  # (B, H, Lpast + L, Dh), views
        out, weights = self.attend(q, k, v, mask, need_weights)
        return out, weights, (keys, values)


class CrossAttention(MultiHeadAttention):
    """Decoder queries over encoder keys/values (§3.2.3, "encoder-decoder attention").

    The encoder output is projected to keys/values once per source (`project_memory`), so that
    step-by-step decoding reuses them instead of recomputing them for every new token.

    Shapes:
        x: (B, T, D); memory_kv: keys, values (B, H, S, Dh); mask: broadcastable to (B, H, T, S)
        returns: output (B, T, D), weights (B, H, T, S) or None
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.q_proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.kv_proj = nn.Linear(cfg.d_model, 2 * cfg.d_model)
        self.reset_parameters()

    def project_memory(self, memory: Tensor) -> KV:
        k, v = self.kv_proj(memory).chunk(2, dim=-1)  # 2 x (B, S, D)
        return self.split_heads(k), self.split_heads(v)  # (B, H, S, Dh) each

    def forward(
        self, x: Tensor, memory_kv: KV, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        q = self.split_heads(self.q_proj(x))  # (B, H, T, Dh)
        return self.attend(q, memory_kv[0], memory_kv[1], mask, need_weights)
