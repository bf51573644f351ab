"""Prepare the built-in numbers-de corpus (digits -> German number words), train a small
Transformer on it with the paper's recipe (about a minute of training on a 2-core CPU; a GPU is
used when present), evaluate it on held-out numbers (exact match, sacreBLEU, chrF), show
translations of numbers it never saw, and draw attention maps and training curves. Exits with
status 1 below --min-accuracy."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vaswani.cli.common import add_placement_flags, positive_int

if TYPE_CHECKING:
    from vaswani.demo import DemoResult

HELP = "the whole system on built-in data: prepare, train, evaluate, translate, plot"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("demo"), help="directory for data, run and pictures"
    )
    parser.add_argument("--steps", type=positive_int, default=2000, help="training steps")
    parser.add_argument(
        "--numbers",
        type=positive_int,
        default=30_000,
        help="pairs of the numbers-de corpus to make (1%% held out for the test)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (data and training)")
    add_placement_flags(parser)
    parser.add_argument(
        "--min-accuracy",
        type=float,
        default=0.99,
        help="exit with status 1 when exact match (0-1) is below this",
    )


def run(args: argparse.Namespace) -> int:
    from vaswani.demo import run_demo  # training and matplotlib, for this command only

    print(
        f"vaswani demo: a Transformer learns to write numbers as German words "
        f"({args.steps} training steps); everything goes to {args.out}/"
    )
    result = run_demo(
        args.out, args.steps, args.precision, args.seed, args.device, numbers=args.numbers
    )
    report(result)
    if result.exact_match < args.min_accuracy:
        print(
            f"error: exact match {100 * result.exact_match:.2f}% is below the target "
            f"{100 * args.min_accuracy:.1f}%",
            file=sys.stderr,
        )
        return 1
    return 0


def report(result: DemoResult) -> None:
    scores = result.scores
    print(f"\ntrained {result.steps} steps in {result.train_seconds:.0f}s ({result.precision})")
    print(
        f"held-out test numbers: exact match {100 * result.exact_match:.2f}%, "
        f"sacreBLEU {scores.bleu:.2f} ({scores.bleu_signature}), chrF {scores.chrf:.2f}"
    )
    print("translations of numbers it never saw (beam search, beam 4):")
    for source, reference, hypothesis in result.examples:
        mark = "ok" if hypothesis == reference else f"WRONG, expected {reference}"
        print(f"  {source:>7} -> {hypothesis}  ({mark})")
    run_dir = result.directory / "run"
    print("\nwhere everything went:")
    print(f"  data (tokenizer, token ids, test split)  {result.directory / 'data'}")
    print(f"  run directory (checkpoints, metrics)      {run_dir}")
    for picture in result.pictures:
        print(f"  picture                                   {picture}")
    print(f"\nnext: vaswani translate --checkpoint {run_dir} 4711 123456")
    print(f"      vaswani serve --checkpoint {run_dir}")
