"""Setting a run up: its directory and model settings (new, resumed, or fine-tuned from another run
with --init), the record of where it runs, and the settings a resume continues with."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from torch import nn

from vaswani.config import ModelConfig, TrainConfig
from vaswani.data import PreparedData
from vaswani.data.dataset import ParallelSplit, task_of
from vaswani.data.dropout import SubwordDropout, merge_parts
from vaswani.device import Placement, machine_name
from vaswani.run import CONFIG, ENVIRONMENT, TRAIN_CONFIG, create_run_dir, load_trained
from vaswani.safe_io import read_json, write_atomic
from vaswani.tasks import Task, get_task
from vaswani.train.distributed import Distributed
from vaswani.train.step import TrainingError, model_config_for


def initial_model(init: Path, data: PreparedData) -> nn.Module:
    """The model of run directory `init` to fine-tune on `data`, which must use its tokenizer."""
    model, _, _, info = load_trained(init)
    if get_task(task_of(info["meta"])) is not get_task(data.task):
        raise TrainingError(
            f"{init} holds a {task_of(info['meta'])} model, but {data.directory} was prepared "
            f"for task={data.task!r}"
        )
    theirs = info["meta"]["tokenizer"]
    ours = data.meta["tokenizer"]
    same = theirs.get("kind", "bpe") == ours.get("kind", "bpe") and all(
        (init / name).read_bytes() == (data.directory / name).read_bytes()
        for name in set(theirs["files"].values())
        if (data.directory / name).is_file()
    )
    if not same or set(theirs["files"].values()) != set(ours["files"].values()):
        raise TrainingError(
            f"{data.directory} was not prepared with the tokenizer of {init}; prepare it with "
            f"tokenizer_from='{init}'"
        )
    return model


def open_run(
    asked: TrainConfig,
    tc: TrainConfig,
    dist: Distributed,
    placement: Placement,
    data: PreparedData,
    resume: bool,
) -> tuple[ModelConfig, nn.Module | None]:
    """The model settings of the run directory `tc.out` (created here unless resumed, keeping the
    settings as `asked`) and, to fine-tune (`tc.init`), the model to start from;
    environment.json records the placement."""
    run, initial = Path(tc.out), None
    if resume:
        cfg = ModelConfig.from_dict(read_json(run / CONFIG, "model settings", dict))
    else:
        if tc.init is None:
            cfg = model_config_for(tc, data)
        else:
            initial = initial_model(Path(tc.init), data)
            cfg = dataclasses.replace(initial.cfg, **tc.model)
        if dist.is_main:
            create_run_dir(asked, cfg, data)
        dist.barrier()
    if dist.is_main:
        info = {
            **placement.to_dict(),
            "machine": machine_name(placement.device),
            "world_size": dist.world_size,
            "torch": torch.__version__,
        }
        write_atomic(run / ENVIRONMENT, json.dumps(info, indent=2).encode())
    return cfg, initial


def resume_config(
    run: Path, max_steps: int | None = None, max_minutes: float | None = None
) -> TrainConfig:
    """The saved settings of `run`, with `max_steps` / `max_minutes` replaced where given."""
    budget = {"max_steps": max_steps, "max_minutes": max_minutes}
    path = Path(run) / TRAIN_CONFIG
    if not path.is_file():
        raise TrainingError(f"{run}: not a training run directory (no {TRAIN_CONFIG})")
    data = read_json(path, "training settings", dict)
    data.update({k: v for k, v in budget.items() if v is not None})
    # The run continues where the user pointed, even when the directory was copied or moved
    # (the `out` recorded at the start names the original).
    data["out"] = str(run)
    return TrainConfig.from_dict(data)


def subword_dropout(
    split: ParallelSplit, data: PreparedData, task: Task, p: float, seed: int, max_len: int
) -> SubwordDropout:
    """The training split with subword dropout `p` (`vaswani.data.dropout`), its sequences held
    to `max_len` tokens."""
    if not task.parallel or data.meta["tokenizer"].get("kind", "bpe") != "bpe":
        raise TrainingError(
            f"bpe_dropout={p:g} works on translation data with vaswani's own BPE tokenizer; "
            "use bpe_dropout=0 for this data"
        )
    parts = {"src": merge_parts(data.src_tokenizer)}
    shared = data.tgt_tokenizer is data.src_tokenizer
    parts["tgt"] = parts["src"] if shared else merge_parts(data.tgt_tokenizer)
    return SubwordDropout(split, parts, p, seed, max_len)
