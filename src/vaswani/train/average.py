"""Weight averages: of checkpoints (§6.1: "averaging the last 5 checkpoints"), and an exponential
moving average kept during training (`WeightAverage`)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from torch import nn

from vaswani import checkpoint as ckpt
from vaswani.run import AVERAGED, CHECKPOINTS


def average_checkpoints(run_dir: Path, last: int = 5) -> tuple[Path, list[str]]:
    """Average the weights of the newest `last` checkpoints of a run into RUN_DIR/averaged.

    Files hold each tied tensor once, so a shared embedding is averaged once, not counted twice.
    """
    run_dir = Path(run_dir)
    found = ckpt.step_dirs(run_dir / CHECKPOINTS)
    if not found:
        raise ckpt.CheckpointError(f"{run_dir}: no checkpoints to average")
    chosen = found[-last:]
    total: dict[str, torch.Tensor] = {}
    for path in chosen:
        ckpt.verify(path)
        tensors = ckpt.read_weights(path / ckpt.WEIGHTS)
        if total and set(tensors) != set(total):
            raise ckpt.CheckpointError(f"{path} holds other tensors than {chosen[0]}")
        for name, tensor in tensors.items():
            total[name] = total.get(name, 0) + tensor.double()
    averaged = {name: (t / len(chosen)).float() for name, t in total.items()}
    names = [p.name for p in chosen]
    path = ckpt.write_checkpoint(
        run_dir,
        AVERAGED,
        {
            ckpt.WEIGHTS: lambda p: ckpt.save_tensors(averaged, p),
            ckpt.STATE: lambda p: p.write_text(json.dumps({"averaged": names}, indent=1)),
        },
    )
    return path, names


class WeightAverage:
    """An exponential moving average of a model's weights, kept beside it during training:
    average <- decay * average + (1 - decay) * weights after every update from `start` on (before
    it, the average is a copy of the weights). Tied weights are one parameter, averaged once.

    `model` is a module of the same architecture holding the average, ready to evaluate.
    """

    FILE = ckpt.AVERAGE

    def __init__(self, model: nn.Module, decay: float, start: int) -> None:
        self.model = copy.deepcopy(model)
        self.model.requires_grad_(False)
        self.decay, self.start = decay, start
        self.source = list(model.parameters())
        self.target = list(self.model.parameters())

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Fold in the weights after update `step`."""
        if step <= self.start:
            torch._foreach_copy_(self.target, self.source)
        else:
            torch._foreach_lerp_(self.target, self.source, 1.0 - self.decay)
