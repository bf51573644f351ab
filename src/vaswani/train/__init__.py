"""Training: the learning-rate schedule and the loss of the paper (§5.3, §5.4)."""

from vaswani.loss import label_smoothed_cross_entropy
from vaswani.train.schedule import noam_lr

__all__ = ["label_smoothed_cross_entropy", "noam_lr"]
