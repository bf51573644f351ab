"""Pictures of a model: `attention` (every head of every layer for one sentence and its
translation), `positional-encoding` (§3.5), `training` (loss, learning rate, validation figures,
tokens/s from a run's metrics.jsonl), `compare` (the learning curves of several runs in one
picture, by update or by minute). PNG or SVG, by the file name."""

from __future__ import annotations

import argparse
from pathlib import Path

from vaswani.cli.common import (
    CliError,
    HelpFormatter,
    add_model_flags,
    load_for_inference,
    positive_int,
)
from vaswani.tasks import TRANSLATE

HELP = "draw attention maps, the positional encoding or training curves (PNG or SVG)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    attention = kinds.add_parser(
        "attention",
        help="attention maps of one sentence: OUT-encoder, OUT-decoder, OUT-cross",
        formatter_class=HelpFormatter,
    )
    attention.add_argument("sentence", help="source sentence to translate and draw")
    attention.add_argument(
        "--out", type=Path, help="file name stem and type (default attention.png)"
    )
    add_model_flags(attention)
    attention.add_argument(
        "--target", metavar="LANG", help="a multilingual model: the language to translate into"
    )
    attention.add_argument(
        "--source-lang",
        metavar="LANG",
        help="the sentence's language, for a model told it (NLLB-200, M2M-100, mBART-50)",
    )
    positions = kinds.add_parser(
        "positional-encoding",
        help="the sinusoidal encoding as a heat map",
        formatter_class=HelpFormatter,
    )
    positions.add_argument("--d-model", type=positive_int, default=256)
    positions.add_argument("--length", type=positive_int, default=100, help="positions")
    positions.add_argument("--out", type=Path, help="default positional-encoding.png")
    curves = kinds.add_parser(
        "training", help="training curves from RUN_DIR/metrics.jsonl", formatter_class=HelpFormatter
    )
    curves.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    curves.add_argument("--out", type=Path, help="default RUN_DIR/training.png")
    several = kinds.add_parser(
        "compare",
        help="learning curves of several runs in one picture",
        formatter_class=HelpFormatter,
    )
    several.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    several.add_argument(
        "--by",
        choices=("step", "minute"),
        default="step",
        help="x axis: updates or training minutes",
    )
    several.add_argument("--out", type=Path, help="default compare.png")


def run(args: argparse.Namespace) -> int:
    from vaswani import plot  # matplotlib, for this command only

    try:
        if args.what == "attention":
            loaded = load_for_inference(args, TRANSLATE)
            out = args.out or Path("attention.png")
            prefixes = loaded.prefixes(args.target, 1, args.source_lang)
            plot.attention(loaded, args.sentence, out, prefixes[0] if prefixes else None)
            for kind in ("encoder", "decoder", "cross"):
                print(f"wrote {out.with_name(f'{out.stem}-{kind}{out.suffix}')}")
            return 0
        if args.what == "positional-encoding":
            out = args.out or Path("positional-encoding.png")
            plot.positional_encoding(args.d_model, args.length, out)
        elif args.what == "compare":
            out = args.out or Path("compare.png")
            plot.compare(args.runs, out, args.by)
        else:
            out = args.out or Path(args.run_dir) / "training.png"
            plot.training(args.run_dir, out)
    except ValueError as error:
        raise CliError(str(error)) from None
    print(f"wrote {out}")
    return 0
