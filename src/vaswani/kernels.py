"""Three of PyTorch's operations made faster on a CPU, for the model to use in their place: dropout
drawn four elements per random number, the choice of scaled-dot-product-attention kernel by what
was measured on 2 cores, and the matrix library that decoding's float32 linear layers run on.
Elsewhere (a GPU) all three are PyTorch's own."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend

# On a CPU, PyTorch's flash kernel pays off in bf16 training only for long keys: forward + backward
# of one attention (64 x 4 heads of 32) measured 8.7 ms flash vs 2.5 ms math at 32 keys, 52 vs 30
# at 128, 92 vs 192 at 256 (AMD EPYC Zen 4, 2 cores). In float32, flash wins at every length
# (1.6 vs 5.5 ms at 32 keys, 67 vs 185 at 256): the math kernel's batched products of small
# float32 matrices take a slow path. Without gradients (decoding) flash is the faster one: one
# query per sequence 50 vs 90 us at 24 keys, 101 vs 223 at 64 (batch 32); 4 beams' queries over
# 4 x 16 masked keys 1.1 vs 2.4 ms (200 sentences, fp32).
CPU_MATH_MAX_KEYS = 192


def sdpa_backends(q: Tensor, k: Tensor) -> list[SDPBackend] | None:
    """The SDPA kernels to allow: on a CPU the plain math kernel when training in half precision
    over short keys; None elsewhere, for PyTorch's choice (then no `sdpa_kernel` context is
    entered: 10 us a call, six calls a step, 1.5% of a small model's greedy decoding step)."""
    if (
        q.device.type == "cpu"
        and q.dtype != torch.float32
        and torch.is_grad_enabled()
        and k.size(-2) <= CPU_MATH_MAX_KEYS
    ):
        return [SDPBackend.MATH]
    return None


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
