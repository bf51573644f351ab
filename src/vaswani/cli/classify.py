"""Print the most probable label of each text and its probability (LABEL<TAB>PROBABILITY), one
line per input line, an empty line for an empty one."""

from __future__ import annotations

import argparse
from pathlib import Path

from vaswani.cli.common import (
    add_input_flags,
    add_model_flags,
    load_for_inference,
    positive_int,
    texts_or_input,
)
from vaswani.decoding.text import classify
from vaswani.tasks import CLASSIFY

HELP = "label texts with a trained classifier (arguments, a file, or stdin)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="texts to classify")
    parser.add_argument("--input", type=Path, help="file of texts, one per line (- = stdin)")
    add_model_flags(parser)
    parser.add_argument(
        "--batch-tokens",
        type=positive_int,
        default=4096,
        help="token budget of one batch, padding included",
    )
    add_input_flags(parser)


def run(args: argparse.Namespace) -> int:
    texts = texts_or_input(args, "classify")
    loaded = load_for_inference(args, CLASSIFY)
    with loaded.computing():
        found = classify(
            loaded.model,
            loaded.src_tokenizer,
            loaded.tgt_tokenizer.labels,
            texts,
            args.batch_tokens,
            args.too_long,
        )
    for result in found:
        print("" if result is None else f"{result.label}\t{result.probability:.4f}")
    return 0
