"""The `vaswani` command: thin subcommands that parse flags, call the Python API and print."""

from __future__ import annotations

import argparse
import sys

from vaswani import __version__
from vaswani.config import PRESETS, ModelConfig


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def cmd_presets(args: argparse.Namespace) -> int:
    """Print each named model size with its shape and parameter count."""
    import torch

    from vaswani.model import Transformer

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


def cmd_demo(args: argparse.Namespace) -> int:
    """Train a small model on a generated task and show its translations."""
    from vaswani.demo import run_demo

    print(
        f"vaswani demo: training a Transformer to reverse digit strings "
        f"({args.steps} steps, {args.precision}, CPU)"
    )
    result = run_demo(steps=args.steps, precision=args.precision, seed=args.seed)
    print(
        f"trained {result.steps} steps in {result.seconds:.1f}s, final loss {result.final_loss:.3f}"
    )
    print(f"exact match on unseen strings: {100 * result.exact_match:.1f}%")
    for source, reference, hypothesis in result.examples:
        mark = "ok" if hypothesis == reference else "WRONG"
        print(f"  {source:>14} -> {hypothesis:<14} (expected {reference}) {mark}")
    if result.exact_match < args.min_accuracy:
        print(
            f"error: exact match {100 * result.exact_match:.1f}% is below the target "
            f"{100 * args.min_accuracy:.1f}%",
            file=sys.stderr,
        )
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vaswani",
        description='The Transformer of "Attention Is All You Need": train, translate, inspect.',
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"vaswani {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    presets = sub.add_parser(
        "presets",
        help="list the named model sizes and their parameter counts",
        description="List the named sizes (tiny, small, base, big) and their parameter counts.",
    )
    presets.set_defaults(func=cmd_presets)

    demo = sub.add_parser(
        "demo",
        help="train a small model on a generated task and evaluate it (about a minute on a CPU)",
        description=(
            "Train a small Transformer to reverse digit strings with the paper's optimiser, "
            "schedule and label smoothing, then decode strings it never saw and report exact match."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    demo.add_argument(
        "--steps", type=positive_int, default=1000, help="training steps (batches of 128 strings)"
    )
    demo.add_argument(
        "--precision", choices=("bf16", "fp32"), default="bf16", help="autocast precision"
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed")
    demo.add_argument(
        "--min-accuracy",
        type=float,
        default=0.0,
        help="exit with status 1 when exact match (0-1) is below this",
    )
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
