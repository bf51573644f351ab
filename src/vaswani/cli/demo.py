"""Prepare the built-in numbers-de corpus (digits -> German number words), train a small
Transformer on it with the paper's recipe (about a minute of training on a 2-core CPU; a GPU is
used when present), evaluate it on held-out numbers (exact match, sacreBLEU, chrF), show
translations of numbers it never saw, and draw attention maps and training curves. Exits with
status 1 below --min-accuracy. --multilingual: one model for digits -> German, English, French and
Spanish words, German -> English and English -> French (the built-in numbers-multi corpus; each
source led by the token of its target language), scored pair by pair, and tried on German -> French,
a pair it was never trained on (zero-shot)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vaswani.cli.common import add_placement_flags, positive_int

# The defaults of run_demo (vaswani.demo imports torch; --help should not wait for it).
STEPS, NUMBERS = 2000, 30_000
MULTI_STEPS, MULTI_NUMBERS = 3000, 10_000

if TYPE_CHECKING:
    from vaswani.demo import DemoResult

HELP = "the whole system on built-in data: prepare, train, evaluate, translate, plot"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("demo"), help="directory for data, run and pictures"
    )
    parser.add_argument(
        "--multilingual",
        action="store_true",
        help="one model for four languages (numbers-multi), with a zero-shot pair",
    )
    parser.add_argument(
        "--steps",
        type=positive_int,
        help=f"training steps (default {STEPS} and, with --multilingual, {MULTI_STEPS})",
    )
    parser.add_argument(
        "--numbers",
        type=positive_int,
        help=f"pairs of the numbers-de corpus to make (default {NUMBERS}) or, with "
        f"--multilingual, of each of numbers-multi's pairs (default {MULTI_NUMBERS}); 5%% are "
        "held out for the test",
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
    from vaswani.demo import (  # training and matplotlib, for this command only
        DemoSettings,
        run_demo,
    )

    multi = args.multilingual
    steps = args.steps or (MULTI_STEPS if multi else STEPS)
    numbers = args.numbers or (MULTI_NUMBERS if multi else NUMBERS)
    what = (
        "to write numbers as German, English, French and Spanish words, and to translate "
        "number words between languages"
        if multi
        else "to write numbers as German words"
    )
    print(
        f"vaswani demo: a Transformer learns {what} ({steps} training steps); everything goes "
        f"to {args.out}/"
    )
    settings = DemoSettings(
        steps, args.precision, args.seed, args.device, numbers=numbers, multilingual=multi
    )
    result = run_demo(args.out, settings)
    report(result)
    if result.exact_match < args.min_accuracy:
        worst = " (the worst pair's)" if result.by_pair else ""
        print(
            f"error: exact match{worst} {100 * result.exact_match:.2f}% is below the target "
            f"{100 * args.min_accuracy:.1f}%",
            file=sys.stderr,
        )
        return 1
    return 0


def report(result: DemoResult) -> None:
    scores = result.scores
    print(f"\ntrained {result.steps} steps in {result.train_seconds:.0f}s ({result.precision})")
    if result.by_pair:
        print("held-out test numbers, exact match by pair:")
        for name, exact in result.by_pair.items():
            print(f"  {name:<10} {100 * exact:6.2f}%")
        print(
            f"  all pairs: sacreBLEU {scores.bleu:.2f} ({scores.bleu_signature}), chrF "
            f"{scores.chrf:.2f}"
        )
    else:
        print(
            f"held-out test numbers: exact match {100 * result.exact_match:.2f}%, "
            f"sacreBLEU {scores.bleu:.2f} ({scores.bleu_signature}), chrF {scores.chrf:.2f}"
        )
    if result.zero_shot:
        name, exact, zero, count = result.zero_shot
        print(
            f"zero-shot {name} (never trained): exact match {100 * exact:.2f}%, chrF "
            f"{zero.chrf:.2f} on {count} numbers"
        )
    print("translations of numbers it never saw (beam search, beam 4):")
    for source, reference, hypothesis in result.examples:
        mark = (
            ""
            if not reference
            else "  (ok)"
            if hypothesis == reference
            else (f"  (WRONG, expected {reference})")
        )
        print(f"  {source:>7} -> {hypothesis}{mark}")
    run_dir = result.directory / "run"
    print("\nwhere everything went:")
    print(f"  data (tokenizer, token ids, test split)  {result.directory / 'data'}")
    print(f"  run directory (checkpoints, metrics)      {run_dir}")
    for picture in result.pictures:
        print(f"  picture                                   {picture}")
    target = " --target fr" if result.by_pair else ""
    print(f"\nnext: vaswani translate --checkpoint {run_dir}{target} 4711 123456")
    print(f"      vaswani serve --checkpoint {run_dir}")
