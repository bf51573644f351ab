"""int8 weights for CPU inference: every `nn.Linear` becomes PyTorch's dynamically quantized
linear layer (int8 weights, per-tensor scale; activations quantized on the fly, per batch).

The attention, feed-forward and output projections are nn.Linear modules, so they all become
int8; embeddings, LayerNorm and softmax stay float32. The output projection keeps its own int8
copy of a tied embedding matrix.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from vaswani.errors import VaswaniError

QUANTIZATIONS = ("none", "int8")


class QuantizeError(VaswaniError):
    """int8 asked for where it cannot run."""


def quantize(model: nn.Module, how: str, device: torch.device) -> nn.Module:
    """`model` itself for "none"; for "int8" a copy with int8 linear layers (CPU only)."""
    if how == "none":
        return model
    if how != "int8":
        raise QuantizeError(f"quantize={how!r}: choose one of {', '.join(QUANTIZATIONS)}")
    if device.type != "cpu":
        raise QuantizeError(f"quantize='int8' runs on the CPU, not {device}; add device='cpu'")
    with warnings.catch_warnings():
        # torch.ao.quantization announces its move to torchao; in the pinned PyTorch it is the
        # maintained dynamic-quantization path for CPU.
        warnings.simplefilter("ignore")
        quantized = torch.ao.quantization.quantize_dynamic(
            copy.deepcopy(model).float(), {nn.Linear}, dtype=torch.qint8
        )
    quantized.cfg = model.cfg
    return quantized.eval()


def weight_bytes(model: nn.Module) -> int:
    """Bytes of a model's weights and biases, int8 ones included, each shared tensor once."""
    seen, total = set(), 0
    for module in model.modules():
        for name in ("weight", "bias"):
            value = getattr(module, name, None)
            if callable(value):  # a quantized linear layer unpacks its int8 weight on request
                value = value()
            if isinstance(value, torch.Tensor) and value.data_ptr() not in seen:
                seen.add(value.data_ptr())
                total += value.nelement() * value.element_size()
    return total
