"""What a training checkpoint holds besides the weights: `TrainState` (where the run stands, as
state.json), the optimizer's and loss scaler's state and the random generators, so that a resumed
run continues exactly as the uninterrupted one would have; what one update did (`Update`) and how
a session of training ended (`TrainResult`)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from vaswani import checkpoint as ckpt
from vaswani.safe_io import read_json
from vaswani.tasks import Task


@dataclass
class TrainState:
    """Where a run stands; state.json in every checkpoint."""

    best_figure: str
    """The validation figure best/ was chosen by (the task's `selection`)."""
    data_fingerprint: str
    """A hash of the prepared data's meta.json: a resume refuses changed data unless told."""
    step: int = 0
    position: tuple[int, int] = (0, 0)
    """(epoch, index) of the next micro-batch in the sampler's order."""
    elapsed_seconds: float = 0.0
    target_tokens: int = 0
    skipped_steps: int = 0
    """Updates skipped for a non-finite loss (--nan-policy skip)."""
    overflow_steps: int = 0
    """fp16 steps the loss scaler skipped while its scale settled (not failures)."""
    best: float | None = None
    """The best validation figure so far."""
    since_best: int = 0
    """Validations since the best figure last improved (--patience)."""
    horizon: int | None = None
    """The update at which the schedule ends (linear, wsd): max_steps, or what the time budget
    buys on this machine, re-estimated from the measured pace at each validation."""
    horizon_budget: list[float | None] | None = None
    """[max_steps, max_minutes] the horizon was set for: a resume with another budget re-plans."""
    next_eval: int | None = None
    """The update of the next validation, once a time budget spaced them out
    (`recipe.validation_cadence`); None: every eval_every updates, as planned."""
    warmup: int | None = None
    eval_every: int | None = None
    ema_decay: float | None = None
    """The warm-up, validation spacing and average decay a time budget's plan was fitted to
    when the pace changed (`vaswani.train.pace`); None: the plan's."""
    paced_from: list[float] | None = None
    """[update, elapsed seconds] when the plan was last fitted to the pace: the validations'
    re-plans take the pace since then (None: since the start)."""

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "position": list(self.position)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], task: Task) -> TrainState:
        """A state.json of any vaswani version: `best_bleu` was `best` before there were other
        tasks; a translation run chose best/ by BLEU before chrF, and a best figure of another
        kind is not comparable, so the next evaluation sets it afresh."""
        data = dict(data)
        if "best_bleu" in data:
            data["best"] = data.pop("best_bleu")
        figure = task.selection[0]
        if data.setdefault("best_figure", task.former_selection or figure) != figure:
            data.update(best=None, best_figure=figure)
        data["position"] = tuple(data["position"])
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


@dataclass
class Update:
    """What one optimizer update did."""

    loss: float
    grad_norm: float
    lr: float
    tokens: int

    @property
    def finite(self) -> bool:
        return math.isfinite(self.loss) and math.isfinite(self.grad_norm)


@dataclass
class Learner:
    """What an optimizer update changes and a checkpoint saves: the network (wrapped in DDP or
    not), its optimizer and loss scaler, and the guided-alignment loss that joins the task's
    (`vaswani.train.guided.GuidedAlignment`, or None)."""

    net: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    guide: Any = None

    @property
    def model(self) -> nn.Module:
        """The model itself, out of its DDP wrapper."""
        return self.net.module if isinstance(self.net, DistributedDataParallel) else self.net


def save_checkpoint(
    directory: Path,
    learner: Learner,
    state: TrainState,
    keep_last: int,
    extra: dict[str, Any] | None = None,
) -> Path:
    """A checkpoint of the run at `state.step` in `directory`, made `latest`; the oldest beyond
    `keep_last` are removed. `extra`: more files, by name, each with the function that writes it
    (the weight average)."""
    model, optimizer, scaler = learner.model, learner.optimizer, learner.scaler
    record = state.to_dict()
    if scaler is not None and scaler.is_enabled():  # fp16: exact resume needs the loss scale
        record["grad_scaler"] = scaler.state_dict()
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    path = ckpt.write_checkpoint(
        directory,
        ckpt.step_name(state.step),
        {
            ckpt.WEIGHTS: lambda p: ckpt.save_weights(model, p),
            ckpt.OPTIMIZER: lambda p: torch.save(optimizer.state_dict(), p),
            ckpt.RNG: lambda p: torch.save(rng, p),
            ckpt.STATE: lambda p: p.write_text(json.dumps(record, indent=1)),
            **(extra or {}),
        },
    )
    ckpt.set_latest(directory, path)
    ckpt.prune(directory, keep_last)
    return path


def load_checkpoint(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    task: Task,
    scaler: torch.amp.GradScaler | None = None,
) -> TrainState:
    """Put the checkpoint at `path` back into the model, optimizer, scaler and random
    generators; return its state."""
    ckpt.load_checkpoint_weights(model, path)
    optimizer.load_state_dict(ckpt.torch_load(path / ckpt.OPTIMIZER))
    rng = ckpt.torch_load(path / ckpt.RNG)
    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    record = read_json(path / ckpt.STATE, "training state", dict)
    scaler_state = record.pop("grad_scaler", None)
    if scaler is not None and scaler.is_enabled() and scaler_state is not None:
        scaler.load_state_dict(scaler_state)
    return TrainState.from_dict(record, task)


@dataclass
class TrainResult:
    """How a session of training ended: `vaswani.train.loop.train`'s answer."""

    run_dir: Path
    step: int
    stopped_by: str  # "max_steps", "max_minutes", "patience" or "interrupt"
    best: float | None
    """The best validation figure (the task's `selection`: chrF, loss or accuracy)."""
    last_eval: dict | None
    task: str = "translate"
    precision: str = "fp32"
    """The precision training ran in (`--precision auto` resolved)."""
    main: bool = True
    """Whether this is the process that writes the run (rank 0 of a distributed run)."""
    deadline: float | None = None
    """When the time budget ends, on `time.perf_counter`'s clock; None without one."""
