"""List the named model sizes (`vaswani.config.PRESETS`), their shapes and parameter counts."""

from __future__ import annotations

import argparse

import torch

from vaswani.config import PRESETS, ModelConfig
from vaswani.model import Transformer

HELP = "list the named model sizes and their parameter counts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no flags


def run(args: argparse.Namespace) -> int:
    del args
    print(
        f"{'preset':<8} {'d_model':>7} {'heads':>5} {'d_ff':>6} {'layers':>7} "
        f"{'vocab':>7} {'params':>9}"
    )
    for name in PRESETS:
        cfg = ModelConfig.from_preset(name)
        with torch.device("meta"):  # shapes only: no memory, no initialisation
            n_params = sum(p.numel() for p in Transformer(cfg).parameters())
        layers = f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers}"
        print(
            f"{name:<8} {cfg.d_model:>7} {cfg.n_heads:>5} {cfg.d_ff:>6} {layers:>7} "
            f"{cfg.vocab_size:>7} {n_params / 1e6:>8.1f}M"
        )
    return 0
