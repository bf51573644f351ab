"""Build RUN_DIR/shortlist.safetensors: for each source token, the target tokens most associated
with it in the run's training pairs, plus the most frequent target tokens. `translate`,
`evaluate` and `serve` with --shortlist then score only each sentence's listed tokens: with a large
vocabulary, most of a decoding step's work. Prints how many held-out reference tokens the lists
hold; compare `evaluate` with and without --shortlist before relying on it."""

from __future__ import annotations

import argparse
from pathlib import Path

from vaswani.cli.common import CliError, positive_int
from vaswani.data import PreparedData
from vaswani.data.tokenizer import vocab_mismatch
from vaswani.decoding.shortlist import FILE as SHORTLIST
from vaswani.decoding.shortlist import build_shortlist, coverage
from vaswani.progress import progress_bar
from vaswani.run import training_data
from vaswani.tasks import get_task
from vaswani.translation.engine import load_run

HELP = "build a lexical shortlist of a run's target tokens, for faster decoding"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument(
        "--data",
        type=Path,
        help="a prepared directory with the run's tokenizer (default: the run's training data, "
        "as its data.json records it; an imported run needs one, prepared with --tokenizer-from)",
    )
    parser.add_argument(
        "--frequent",
        type=positive_int,
        default=500,
        help="the most frequent target tokens, on every sentence's list",
    )
    parser.add_argument(
        "--per-token",
        type=positive_int,
        default=50,
        help="target tokens listed for each source token (best Dice coefficient)",
    )
    parser.add_argument(
        "--max-pairs",
        type=positive_int,
        default=1_000_000,
        help="count at most this many training pairs (the first ones)",
    )


def run(args: argparse.Namespace) -> int:
    loaded = load_run(args.run_dir)
    if not loaded.task.parallel:
        raise CliError(f"{args.run_dir} is not a translation model; a shortlist is for translation")
    data = PreparedData(args.data) if args.data else training_data(loaded.info, "--data DIR")
    cfg = loaded.config
    problem = vocab_mismatch(
        data.src_tokenizer, data.tgt_tokenizer, cfg.vocab_size, cfg.target_vocab_size
    )
    if problem or not get_task(data.task).parallel:
        raise CliError(
            f"{data.directory} does not suit {args.run_dir}: {problem or 'not translation data'}"
        )
    train = data.split("train")
    count = min(len(train), args.max_pairs)
    pairs = (train.pair(i) for i in range(count))
    shortlist = build_shortlist(
        progress_bar(pairs, total=count, unit="pair", desc="counting"),
        (cfg.vocab_size, cfg.target_vocab_size),
        always=[cfg.eos_id],
        frequent=args.frequent,
        per_token=args.per_token,
        never={cfg.pad_id, cfg.bos_id} - {cfg.eos_id},
    )
    valid = data.split("valid")
    held_out = coverage(shortlist, (valid.pair(i) for i in range(min(len(valid), 2000))))
    path = args.run_dir / SHORTLIST
    metadata = {
        "pairs": str(count),
        "frequent": str(args.frequent),
        "per_token": str(args.per_token),
        "data": str(data.directory.resolve()),
    }
    shortlist.save(path, metadata)
    print(f"counted {count:,} training pairs of {data.directory}; wrote {path}")
    if len(valid):
        print(
            f"a sentence's list: {held_out.list_size:,.0f} of {cfg.target_vocab_size:,} "
            f"target tokens on average (validation sentences)"
        )
    print(f"the lists hold {100 * held_out.held:.2f}% of the validation references' tokens")
    return 0
