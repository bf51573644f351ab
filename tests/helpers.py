"""Shared helpers for tests (importable because tests/ is on sys.path through its conftest.py)."""

import torch

from vaswani.config import ModelConfig


def random_ids(cfg: ModelConfig, batch: int, length: int, vocab: int | None = None) -> torch.Tensor:
    """Token ids that are never one of the special ids (pad, bos, eos)."""
    low = max(cfg.pad_id, cfg.bos_id, cfg.eos_id) + 1
    return torch.randint(low, vocab or cfg.vocab_size, (batch, length))
