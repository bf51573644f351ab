"""Checkpoint averaging (§6.1: "averaging the last 5 checkpoints")."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from vaswani.run import AVERAGED, CHECKPOINTS
from vaswani.train import checkpoint as ckpt


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
