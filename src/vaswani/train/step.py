"""One optimizer update of any task (forward, backward, accumulation, DDP's all-reduce, loss
scaling, clipping), and the model configuration a run trains: what the training loop and the
recipe's timing of candidate sizes both use."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch

from vaswani.config import ModelConfig, TrainConfig
from vaswani.data.batching import collate
from vaswani.data.dataset import SIDES, ParallelSplit, PreparedData
from vaswani.device import autocast
from vaswani.errors import VaswaniError
from vaswani.tasks import Task, get_task
from vaswani.train.distributed import Distributed
from vaswani.train.state import Learner


class TrainingError(VaswaniError):
    """Training cannot start or go on; the message says why and what to do."""


def model_config_for(tc: TrainConfig, data: PreparedData) -> ModelConfig:
    """The preset, sized to the data's vocabulary (and labels), with the run's overrides. A
    language model keeps only the preset's decoder layers, a classifier only its encoder layers."""
    task = get_task(data.task)
    tokenizer = data.meta["tokenizer"]
    fields = task.model_fields(tokenizer["vocab_size"], tokenizer.get("shared", True))
    fields.update(tc.model)
    cfg = ModelConfig.from_preset(tc.preset, **fields)
    longest = 1 + max(
        split[f"{side}_lengths"]["max"] for split in data.meta["splits"].values() for side in SIDES
    )
    if tc.guided_alignment > 0:  # its first head of the last layer learns word alignments
        cfg = dataclasses.replace(cfg, alignment_head=0)
    longest += task.extra_positions
    if cfg.max_len >= longest:
        return cfg
    # Sinusoidal positions (§3.5) are a formula, defined at every position: a preset's limit
    # grows to the data by itself. A limit the user chose, or a table of learned positions (which
    # would have rows never trained), stays what was asked.
    if cfg.positions == "sinusoidal" and "max_len" not in tc.model:
        return dataclasses.replace(cfg, max_len=longest)
    raise TrainingError(
        f"the data holds sequences of {longest} tokens (with BOS/EOS) but the model's position "
        f"limit is max_len={cfg.max_len}; prepare with max_example_len={cfg.max_len} or train "
        f"with the model setting max_len={longest}"
    )


# Adam's update as one fused kernel over all parameters (PyTorch's `fused=True`), on the devices
# that have it: measured 1.3 ms instead of 7.2 for the mini preset's 102 tensors on 2 CPU cores
# (AMD EPYC Zen 4). Elsewhere (MPS) PyTorch's default implementation.
FUSED_ADAM_DEVICES = ("cpu", "cuda")


def adam(
    params: Any, device: torch.device, betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-9
) -> torch.optim.Adam:
    """§5.3's optimizer (Adam, beta1 0.9, beta2 0.98, eps 1e-9) for `params` on `device`, fused
    where the device has a fused kernel. Its learning rate is set by the schedule at each update."""
    fused = True if device.type in FUSED_ADAM_DEVICES else None
    return torch.optim.Adam(params, lr=0.0, betas=betas, eps=eps, fused=fused)


def train_update(
    learner: Learner,
    task: Task,
    split: ParallelSplit,
    micro_batches: list[Any],
    tc: TrainConfig,
    dist: Distributed,
) -> tuple[int, float, float]:
    """The gradients of one optimizer update of `learner`, over `micro_batches` (index arrays of
    `split`): the forward and backward passes, gradient accumulation, DDP's all-reduce, loss
    scaling and clipping. The caller applies them (or not, by its NaN policy). The learner's
    guided-alignment loss, if any, joins the translation loss. Returns the update's tokens, its
    mean (translation) loss and the gradient norm before clipping."""
    net, optimizer, scaler, guide = learner.net, learner.optimizer, learner.scaler, learner.guide
    model = learner.model
    cfg, device = model.cfg, dist.device
    sizes = [task.batch_size(split, indices) for indices in micro_batches]
    update_count, update_tokens = (sum(column) for column in zip(*sizes, strict=True))
    # Every process sees the same global micro-batches and takes every world_size-th one.
    mine = micro_batches[dist.rank :: dist.world_size]
    optimizer.zero_grad(set_to_none=True)
    local_loss = torch.zeros((), device=device)
    for j, indices in enumerate(mine):
        batch = collate(split, indices, cfg.pad_id, cfg.bos_id, cfg.eos_id).to(device)
        sync = j == len(mine) - 1 or not dist.enabled  # DDP all-reduces on the last one only
        with contextlib.nullcontext() if sync else net.no_sync():
            with autocast(device, tc.precision):
                loss_sum, _ = task.training_loss(net, batch, cfg.pad_id, tc.label_smoothing)
                total = loss_sum + guide.loss(split, indices) if guide is not None else loss_sum
            # Mean over the update's target tokens (or examples); DDP then averages over
            # processes.
            scaler.scale(total * dist.world_size / update_count).backward()
        local_loss += loss_sum.detach()
    loss = (dist.sum(local_loss) / update_count).item()
    scaler.unscale_(optimizer)  # fp16: clip and report the true gradient norm
    grad_norm = torch.nn.utils.clip_grad_norm_(
        model.parameters(), tc.clip_norm if tc.clip_norm > 0 else float("inf")
    ).item()
    return update_tokens, loss, grad_norm
