"""The learning-rate schedule of §5.3, a pure function of the step."""

from __future__ import annotations


def noam_lr(step: int, d_model: int, warmup: int = 4000, scale: float = 1.0) -> float:
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Rises linearly for `warmup` steps, then decays with the inverse square root of the step.
    Steps count from 1; step 0 is treated as step 1 so the first update is not at rate zero.
    """
    if warmup < 1:
        raise ValueError(f"warmup must be >= 1 step, got {warmup}")
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
