"""Translate TEXT arguments, or --input FILE, or stdin, one sentence per line, with beam search (or
greedy search with --beam-size 1). Output has one line per input line, in order; an empty line
gives an empty line. Lines are batched by length for speed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from vaswani.cli.common import (
    CliError,
    add_decoding_flags,
    decode_config,
    load_for_inference,
    one_line,
    positive_int,
    read_input_lines,
    writable_file,
)
from vaswani.decoding.text import Translation, best_texts, translate_nbest
from vaswani.files import write_atomic
from vaswani.progress import progress_bar
from vaswani.tasks import TRANSLATE

HELP = "translate text with a trained model (arguments, a file, or stdin)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="sentences to translate")
    parser.add_argument("--input", type=Path, help="file of sentences, one per line (- = stdin)")
    parser.add_argument("--output", type=Path, help="write translations here instead of stdout")
    parser.add_argument(
        "--n-best",
        type=positive_int,
        default=1,
        help="hypotheses per line (at most --beam-size); more than 1 prints LINE ||| TEXT ||| SCORE",
    )
    add_decoding_flags(parser)


def format_translations(
    first_line: int, translations: list[list[Translation]], n_best: int
) -> list[str]:
    """One line per input line; with --n-best, `LINE ||| TEXT ||| SCORE` per hypothesis."""
    if n_best == 1:
        return [one_line(text) for text in best_texts(translations)]
    return [
        f"{first_line + i} ||| {one_line(t.text)} ||| {t.score:.4f}"
        for i, found in enumerate(translations)
        for t in found
    ]


def run(args: argparse.Namespace) -> int:
    if args.texts and args.input is not None:
        raise CliError("give TEXT arguments or --input FILE, not both")
    writable_file(args.output)
    dc = decode_config(args, args.n_best)
    interactive = not args.texts and args.input is None and sys.stdin.isatty()
    if args.texts:
        lines, name = args.texts, "the arguments"
    elif not interactive:
        lines = read_input_lines(args.input, args.max_line_bytes)
        name = "stdin" if args.input is None else str(args.input)
        if not lines:
            raise CliError(f"{name} is empty: nothing to translate")
    loaded, placement = load_for_inference(args, TRANSLATE)
    loaded.prefixes(args.target, 0)  # a wrong or missing --target: said before any reading

    def translate(texts: list[str], bar: Any = None) -> list[list[Translation]]:
        with placement.autocast():
            return translate_nbest(
                loaded.model,
                loaded.src_tokenizer,
                loaded.tgt_tokenizer,
                texts,
                dc,
                args.too_long,
                bar.update if bar else None,
                loaded.shortlist,
                loaded.prefixes(args.target, len(texts)),
            )

    if interactive:  # a person typing: answer each line as it comes
        print("type a sentence and press Enter; Ctrl-D ends", file=sys.stderr)
        for number, line in enumerate(sys.stdin):
            print("\n".join(format_translations(number, translate([line.rstrip("\n")]), dc.n_best)))
            sys.stdout.flush()
        return 0
    total = sum(1 for line in lines if line.strip())
    enabled = args.input is not None
    with progress_bar(total=total, unit="sent", desc="translating", enabled=enabled) as bar:
        text = "".join(
            line + "\n" for line in format_translations(0, translate(lines, bar), dc.n_best)
        )
    if args.output is not None:
        write_atomic(args.output, text.encode("utf-8"))  # never a half-written file
        print(f"translated {len(lines)} lines of {name} into {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
