"""Two of PyTorch's operations made faster on a CPU, for the model to use in their place: dropout
drawn four elements per random number, and the choice of scaled-dot-product-attention kernel by
what was measured on 2 cores. Elsewhere (a GPU) both are PyTorch's own."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend

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


class Dropout(nn.Module):
    """Dropout (§5.4) that is cheaper on a CPU; on other devices it is PyTorch's own.

    On a CPU most of `nn.Dropout`'s time goes to drawing one random number per element. Here one
    64-bit draw serves four elements (16 random bits each, so p is rounded to a multiple of
    1/65536): measured 0.4 ms instead of 2.5 ms for a (2048, 256) mask. Kept elements are scaled by
    1 / (1 - p) as usual, and the mask comes from torch's generator, so `torch.manual_seed` and
    the saved RNG state make it reproducible.
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p
        self.threshold = round(p * 65536) - 32768  # int16 draws are uniform on [-32768, 32767]

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        n = x.numel()
        bits = torch.randint(-(2**63), 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64)
        keep = bits.view(torch.int16)[:n].view(x.shape) >= self.threshold
        return x * (keep.to(x.dtype) * (1.0 / (1.0 - self.p)))
