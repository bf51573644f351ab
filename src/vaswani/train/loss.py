"""Label-smoothed cross-entropy (§5.4) over real target tokens only, and over a classifier's labels."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_cross_entropy(
    logits: Tensor, target: Tensor, pad_id: int, smoothing: float = 0.1
) -> tuple[Tensor, Tensor]:
    """Summed loss and number of real tokens, so that callers can average over a whole update.

    §5.4: label smoothing of value eps_ls = 0.1. Padding positions contribute nothing; a batch with
    no real token gives a loss of 0 (not NaN). The loss is computed in float32 even under autocast.

    Shapes: logits (B, T, V), target (B, T) -> scalar loss sum, scalar token count (int64)
    """
    loss = F.cross_entropy(
        logits.float().reshape(-1, logits.size(-1)),
        target.reshape(-1),
        ignore_index=pad_id,
        label_smoothing=smoothing,
        reduction="sum",
    )
    return loss, (target != pad_id).sum()


def mean_loss(loss_sum: Tensor, n_tokens: Tensor) -> Tensor:
    """Average loss per token; 0 when there are no tokens."""
    return loss_sum / torch.clamp(n_tokens, min=1)


def classification_loss(
    logits: Tensor, labels: Tensor, smoothing: float = 0.1
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed cross-entropy over a batch of examples, and the number of examples.
    (No index is ignored: a label's index may equal the padding id.)

    Shapes: logits (B, C), labels (B,) -> scalar loss sum, scalar count (int64)
    """
    loss = F.cross_entropy(logits.float(), labels, label_smoothing=smoothing, reduction="sum")
    return loss, torch.tensor(labels.numel())
