"""The `vaswani` command: thin subcommands that parse flags, call the Python API and print."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vaswani import __version__
from vaswani.config import PRESETS, ModelConfig
from vaswani.data.corpora import DataError


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def cmd_prepare(args: argparse.Namespace) -> int:
    """Turn parallel text into a tokenizer, memory-mapped token ids and meta.json."""
    import time

    from vaswani.data import PreparedData, PrepareOptions, TokenBatchSampler, prepare

    opts = PrepareOptions(
        vocab_size=args.vocab_size,
        max_len=args.max_len,
        shared_vocab=not args.separate_vocab,
        valid_fraction=args.valid_fraction,
        test_fraction=args.test_fraction,
        skip_invalid=args.skip_invalid,
        max_line_bytes=args.max_line_bytes,
        numbers_size=args.numbers_size,
        numbers_max=args.numbers_max,
        seed=args.seed,
        ding_path=args.ding_path,
    )
    start = time.perf_counter()
    meta = prepare(args.inputs, args.out, opts, force=args.force)
    seconds = time.perf_counter() - start
    vocab = meta["tokenizer"]["vocab_size"]
    shared = "shared" if meta["tokenizer"]["shared"] else "separate"
    print(
        f"prepared {args.out} in {seconds:.1f}s ({shared} vocabulary: {vocab['src']} / {vocab['tgt']})"
    )
    print(
        f"read {meta['pairs_read']} pairs; dropped while reading: {meta['dropped_while_reading'] or 'none'}"
    )
    train = PreparedData(args.out).split("train")
    sampler = TokenBatchSampler(train.src_lengths, train.tgt_lengths, args.max_tokens)
    for name, split in meta["splits"].items():
        src, tgt = split["src_lengths"], split["tgt_lengths"]
        print(
            f"  {name:<5} {split['pairs']:>9} pairs  (filtered as too long: {split['filtered_too_long']})"
            f"  tokens/pair src {src['mean']:.1f} tgt {tgt['mean']:.1f}, max {src['max']}/{tgt['max']}"
        )
    print(
        f"padding with --max-tokens {args.max_tokens}: {100 * sampler.padding_fraction():.1f}% "
        f"over {len(sampler.batches(0))} batches"
    )
    return 0


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

    prep = sub.add_parser(
        "prepare",
        help="turn parallel text into a dataset for training (tokenizer, token ids, meta.json)",
        description=(
            "Read parallel text, drop empty and duplicate pairs, split train/valid/test by a hash "
            "of each pair, train a byte-level BPE tokenizer on the training split, and write "
            "memory-mappable token ids and meta.json to --out. INPUTS is a built-in corpus "
            "(numbers-de, ding-de-en), one TSV file of source<TAB>target lines, or two aligned "
            "files (source, then target); plain or gzip-compressed UTF-8."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    prep.add_argument("inputs", nargs="+", metavar="CORPUS_OR_PATHS")
    prep.add_argument("--out", type=Path, required=True, help="directory to write")
    prep.add_argument("--vocab-size", type=positive_int, default=8000, help="BPE vocabulary size")
    prep.add_argument(
        "--max-len",
        type=positive_int,
        default=256,
        help="drop pairs longer than this many tokens (with BOS/EOS) on either side",
    )
    prep.add_argument(
        "--separate-vocab",
        action="store_true",
        help="one tokenizer per language instead of a shared one (paper §3.4 shares)",
    )
    prep.add_argument(
        "--valid-fraction", type=fraction, help="share of pairs for validation (corpus default)"
    )
    prep.add_argument(
        "--test-fraction", type=fraction, help="share of pairs for test (corpus default)"
    )
    prep.add_argument(
        "--skip-invalid",
        action="store_true",
        help="drop (and count) pairs with invalid UTF-8, NUL bytes, BOMs or bad TSV rows "
        "instead of stopping at the first",
    )
    prep.add_argument(
        "--max-line-bytes",
        type=positive_int,
        default=1 << 20,
        help="refuse any input line longer than this",
    )
    prep.add_argument(
        "--max-tokens",
        type=positive_int,
        default=4096,
        help="token budget per batch side, for the padding report",
    )
    prep.add_argument("--numbers-size", type=positive_int, default=30000, help="numbers-de: pairs")
    prep.add_argument(
        "--numbers-max", type=positive_int, default=999_999, help="numbers-de: largest number"
    )
    prep.add_argument("--seed", type=int, default=0, help="numbers-de: random seed")
    prep.add_argument(
        "--ding-path", type=Path, default=Path("/usr/share/trans/de-en"), help="ding-de-en: file"
    )
    prep.add_argument("--force", action="store_true", help="replace --out if it exists")
    prep.set_defaults(func=cmd_prepare)

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
    try:
        return args.func(args)
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
