"""Average the weights of the last N checkpoints of RUN_DIR into RUN_DIR/averaged (paper §6.1;
tied weights counted once); translate with --weights averaged."""

from __future__ import annotations

import argparse
from pathlib import Path

from vaswani.cli.common import positive_int
from vaswani.train.average import average_checkpoints

HELP = "average the weights of a run's last checkpoints (paper §6.1)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--last", type=positive_int, default=5, help="how many checkpoints")


def run(args: argparse.Namespace) -> int:
    path, names = average_checkpoints(args.run_dir, args.last)
    print(f"averaged {len(names)} checkpoints ({', '.join(names)}) into {path}")
    return 0
