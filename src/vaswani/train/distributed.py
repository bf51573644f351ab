"""Multi-process data parallelism through PyTorch's own DDP, launched with `torchrun`.

`torchrun --nproc_per_node N -m vaswani.cli train ...` sets WORLD_SIZE, RANK and LOCAL_RANK; each
process then trains on its share of every update's micro-batches and DDP averages the gradients
(gloo on CPU, NCCL on GPU). Without torchrun this is a single process and nothing changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """Only the main process writes checkpoints, metrics and the terminal."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def sum(self, value: torch.Tensor) -> torch.Tensor:
        """The sum of `value` over all processes (the value itself in one process)."""
        if self.enabled:
            value = value.clone()
            dist.all_reduce(value, op=dist.ReduceOp.SUM)
        return value

    def any(self, flag: bool) -> bool:
        """True on every process when `flag` is true on any (so all stop at the same step)."""
        if not self.enabled:
            return flag
        return bool(self.sum(torch.tensor([float(flag)], device=self.device)).item() > 0)

    def close(self) -> None:
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()


def init_distributed(device: torch.device) -> Distributed:
    """Join the process group that torchrun describes in the environment, if any; on CUDA each
    process takes the GPU of its LOCAL_RANK."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return Distributed(device=device)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Distributed(rank=rank, world_size=world_size, device=device)
