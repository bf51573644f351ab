"""Three of PyTorch's operations made faster on a CPU, for the model to use in their place: dropout
drawn four elements per random number, attention computed by the way measured fastest on 2 cores,
and the matrix library that decoding's float32 linear layers run on. Elsewhere (a GPU) all three
are PyTorch's own."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# Attention while training on a CPU is three of PyTorch's operations in the inputs' dtype (the
# scores' product, softmax, the values' product) rather than one of its fused SDPA kernels, up to
# a number of keys measured on 2 cores (AMD EPYC Zen 4). bf16: forward + backward of one attention
# (4 heads of 32, 2,048 query positions, padding and causal mask) took 2.0 ms against 3.9 for
# SDPA's math kernel and 10.4 for its flash kernel at 32 keys; 4.3 / 7.6 / 13.5 at 128; 12.9 /
# 31.3 / 23.4 at 512; 27.1 / 51.3 / 31.6 at 1,024 (the math kernel converts to float32 and checks
# every row for a full mask; the softmax here accumulates in float32 too). float32, heads split
# from the fused projection as in the model: 2.2 ms against 4.7 on flash at 16 keys, 3.1 / 4.9
# at 36, even at 64, from 128 one or the other by head width and CPU; `vaswani train` on short
# strings made updates 8-10% faster with it (gettext catalogs 217.6 against 236.0 ms, ding 207.6
# against 229.5 emulating AVX2). Beyond these lengths, and without gradients (decoding, where
# flash is the faster: one query per sequence 50 against 90 us at 24 keys), PyTorch chooses.
CPU_EAGER_MAX_KEYS = 1024
CPU_EAGER_MAX_KEYS_FLOAT32 = 64


def sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float) -> Tensor:
    """softmax(Q K^T / sqrt(d_k)) V, (B, H, Lq, Dh), with a boolean mask (True: may attend)
    broadcastable to (B, H, Lq, Lk), on the kernel the measurements above chose."""
    if not eager_attention(q, k):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    scores = (q * q.size(-1) ** -0.5) @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, dropout_p)
    return weights @ v


def eager_attention(q: Tensor, k: Tensor) -> bool:
    """Whether `sdpa` computes q over k step by step: training on a CPU over no more keys than
    CPU_EAGER_MAX_KEYS (float32: CPU_EAGER_MAX_KEYS_FLOAT32)."""
    if q.device.type != "cpu" or not torch.is_grad_enabled():
        return False
    limit = CPU_EAGER_MAX_KEYS_FLOAT32 if q.dtype == torch.float32 else CPU_EAGER_MAX_KEYS
    return k.size(-2) <= limit


class Dropout(nn.Module):
    """Dropout (§5.4) that is cheaper on a CPU; on other devices it is PyTorch's own.

    On a CPU most of `nn.Dropout`'s time goes to drawing one random number per element. Here one
    64-bit draw serves four elements (16 random bits each, so p is rounded to a multiple of
    1/65536): measured 0.4 ms instead of 2.5 ms for a (2048, 256) mask, and drawn over int64's
    whole range, which needs no modulo, 0.43 ms instead of 0.56 with `torch.randint`. Kept
    elements are scaled by 1 / (1 - p) as usual, and the mask comes from torch's generator, so
    `torch.manual_seed` and the saved RNG state make it reproducible.
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
        bits = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), None)
        keep = bits.view(torch.int16)[:n].view(x.shape) >= self.threshold
        return x * (keep.to(x.dtype) * (1.0 / (1.0 - self.p)))


# Decoding's float32 linear layers: PyTorch multiplies float32 matrices with Intel MKL, which picks
# its code by the CPU's vendor as well as its instructions; oneDNN (PyTorch's kernels for bf16)
# uses every instruction the CPU has. With MKL held to AVX2 (as on an AMD CPU) on an AVX512 Xeon,
# oneDNN decoded the OPUS-MT shape 1.16-1.26x faster; with MKL free, MKL was up to 1.19x
# the faster. So neither is the rule: `vaswani.translation.precision` measures both once per machine and run,
# and the choice is a mark on each linear layer of the model it was measured for.
ONEDNN = "decodes_on_onednn"


@functools.cache
def onednn_available() -> bool:
    """Whether this PyTorch can run a float32 linear layer on oneDNN here: tried once, on 2 x 2."""
    if not (
        torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    ):
        return False
    x = torch.eye(2)
    try:
        y = torch.ops.mkldnn._linear_pointwise(x, x, None, "none", [], "")
    except RuntimeError:
        return False
    return bool(torch.equal(y, x))


def decode_with_onednn(model: nn.Module, on: bool) -> None:
    """Run `model`'s float32 linear layers on oneDNN when they decode (no gradients, on a CPU),
    or on PyTorch's default (MKL). Other models in the process are not touched."""
    on = on and onednn_available()
    for module in model.modules():
        if type(module) is nn.Linear:
            setattr(module, ONEDNN, on)


def decodes_on_onednn(model: nn.Module) -> bool:
    return any(getattr(m, ONEDNN, False) for m in model.modules())


@contextlib.contextmanager
def onednn_decoding(model: nn.Module, on: bool) -> Iterator[None]:
    """`decode_with_onednn(model, on)` for a block, then its earlier setting."""
    before = decodes_on_onednn(model)
    decode_with_onednn(model, on)
    try:
        yield
    finally:
        decode_with_onednn(model, before)


def on_onednn(layer: nn.Module, x: Tensor) -> bool:
    """Whether `layer` (x) should run on oneDNN: the layer is marked for it, and this is float32
    inference on a CPU, outside autocast."""
    return (
        getattr(layer, ONEDNN, False)
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and layer.weight.dtype == torch.float32
        and not torch.is_grad_enabled()
        and not torch.is_autocast_enabled("cpu")
    )


def linear(layer: nn.Module, x: Tensor) -> Tensor:
    """layer(x), on oneDNN where `on_onednn` says so."""
    if on_onednn(layer, x):  # marked: an nn.Linear (an int8 layer of --quantize int8 never is)
        return torch.ops.mkldnn._linear_pointwise(x, layer.weight, layer.bias, "none", [], "")
    return layer(x)
