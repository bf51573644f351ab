"""Multi-head scaled dot-product attention (§3.2).

Notation: B batch, H heads, Lq query length, Lk key length, D d_model, Dh = D / H head width.

Masks are boolean and True means "may attend" (the `scaled_dot_product_attention` convention),
broadcastable to (B, H, Lq, Lk): (B, 1, 1, Lk) for padding, (1, 1, Lq, Lk) for causality.
The mask builders in `vaswani.model.layers` never leave a query row with nothing to attend to, so
outputs stay finite on every PyTorch version and on both paths below.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vaswani.config import ModelConfig
from vaswani.kernels import linear, sdpa

KV = tuple[Tensor, Tensor]
"""Keys and values of one attention layer, each (B, H, Lk, Dh)."""
Keep = Callable[[Tensor, Tensor], tuple[KV, KV]]
"""Where a decoder layer's new keys and values go: given this step's (B, H, L, Dh) each, it
stores them after the earlier positions and returns what it stored (kept for the next step) and
the keys and values to attend over now, (B, H, Lpast + L, Dh) each."""


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

        The fast path is `vaswani.kernels.sdpa`: PyTorch's fused `scaled_dot_product_attention`, or
        where that measured faster, the two products and the softmax as separate operations in the
        inputs' dtype. With `need_weights` the slow path computes the same thing step by step
        (softmax in float32, so a boolean mask never overflows in half precision) and also returns
        the weights (B, H, Lq, Lk).
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
            out = sdpa(q, k, v, mask, dropout_p)
        b, _, length, _ = out.shape
        out = out.transpose(1, 2).reshape(b, length, self.n_heads * self.head_dim)  # (B, Lq, D)
        return linear(self.out_proj, out), weights


class SelfAttention(MultiHeadAttention):
    """Queries, keys and values from one sequence, with one fused projection.

    Shapes:
        x: (B, L, D); mask: broadcastable to (B, H, L, Lpast + L)
        keep: stores the new keys and values after the Lpast earlier ones (decoding step by
            step; see `Keep`); None: the L positions are the whole sequence
        returns: output (B, L, D), weights (B, H, L, Lpast + L) or None, and what `keep` stored
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.qkv_proj = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.reset_parameters()

    def forward(
        self, x: Tensor, mask: Tensor | None, keep: Keep | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None, KV]:
        q, k, v = linear(self.qkv_proj, x).chunk(3, dim=-1)  # 3 x (B, L, D)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)  # (B, H, L, Dh)
        kept = (k, v)
        if keep is not None:
            kept, (k, v) = keep(k, v)  # (B, H, Lpast + L, Dh) each
        out, weights = self.attend(q, k, v, mask, need_weights)
        return out, weights, kept


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
        k, v = linear(self.kv_proj, memory).chunk(2, dim=-1)  # 2 x (B, S, D)
        return self.split_heads(k), self.split_heads(v)  # (B, H, S, Dh) each

    def forward(
        self, x: Tensor, memory_kv: KV, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        q = self.split_heads(linear(self.q_proj, x))  # (B, H, T, Dh)
        return self.attend(q, memory_kv[0], memory_kv[1], mask, need_weights)
