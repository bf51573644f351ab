"""Sample continuations of --prompt texts (none: start from nothing) from a language model trained
with --task lm. Each prompt and sample has its own random generator, seeded with --seed + its
index: the same command gives the same text. Text goes to stdout (prompt and continuation, one a
line), speed to stderr."""

from __future__ import annotations

import argparse
import sys
import time

from vaswani.cli.common import (
    add_model_flags,
    load_for_inference,
    non_negative_float,
    non_negative_int,
    one_line,
    positive_int,
    probability,
)
from vaswani.config import Sampling
from vaswani.decoding.text import generate
from vaswani.tasks import LANGUAGE_MODEL

HELP = "continue prompts with a trained language model (sampling, KV cache)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prompt", action="append", metavar="TEXT", help="text to continue (repeatable)"
    )
    parser.add_argument(
        "--num-samples", type=positive_int, default=1, help="continuations per prompt"
    )
    parser.add_argument("--max-new-tokens", type=positive_int, default=100)
    parser.add_argument(
        "--temperature",
        type=non_negative_float,
        default=1.0,
        help="divides the logits: < 1 sharper, > 1 flatter; 0 takes the most probable token",
    )
    parser.add_argument(
        "--top-k", type=non_negative_int, default=0, help="draw from the k most probable; 0 = all"
    )
    parser.add_argument(
        "--top-p",
        type=probability,
        default=1.0,
        help="draw from the smallest set of tokens holding this much probability (nucleus)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="re-run the whole text at each step instead of using the KV cache (same output)",
    )
    add_model_flags(parser)


def run(args: argparse.Namespace) -> int:
    loaded = load_for_inference(args, LANGUAGE_MODEL)
    prompts = [prompt for prompt in args.prompt or [""] for _ in range(args.num_samples)]
    start = time.perf_counter()
    with loaded.computing():
        found = generate(
            loaded.model,
            loaded.src_tokenizer,
            prompts,
            Sampling(args.max_new_tokens, args.temperature, args.top_k, args.top_p, args.seed),
            use_cache=not args.no_cache,
        )
    seconds = time.perf_counter() - start
    for g in found:
        print(one_line(g.prompt + g.text))
    tokens = sum(g.tokens for g in found)
    print(
        f"{len(found)} texts, {tokens} new tokens in {seconds:.2f}s ({tokens / seconds:.0f} "
        f"tokens/s, KV cache {'off' if args.no_cache else 'on'})",
        file=sys.stderr,
    )
    return 0
