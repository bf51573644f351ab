"""A table of training runs, one row each: the data, the model size and its parameters, updates
and training minutes, precision and machine, the best validation chrF and BLEU, and the test
figures of the latest `vaswani evaluate --split test` (kept in RUN/evaluations.jsonl). Give run
directories, or directories holding them."""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from vaswani.errors import VaswaniError
from vaswani.run_table import COLUMNS, find_runs, summary

HELP = "compare training runs in one table (or --json)"
HEADINGS = {
    "valid_chrf": "valid chrF",
    "valid_bleu": "valid BLEU",
    "test_chrf": "test chrF",
    "test_bleu": "test BLEU",
}
NUMBERS = {"parameters", "steps", "minutes", "valid_chrf", "valid_bleu", "test_chrf", "test_bleu"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", type=Path, metavar="DIR")
    parser.add_argument(
        "--sort",
        choices=COLUMNS,
        default="run",
        help="the column to sort by (numbers: highest first)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per run instead")


def listed(run: Path) -> dict | None:
    """The row of `run`, or None with a warning naming what is damaged: one damaged run does
    not hide the others."""
    try:
        return summary(run)
    except (VaswaniError, ValueError, TypeError, KeyError, AttributeError) as error:
        warnings.warn(f"{run}: skipped, a damaged run ({str(error)[:200]})", stacklevel=1)
        return None


def cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def run(args: argparse.Namespace) -> int:
    rows = [row for path in find_runs(args.runs) if (row := listed(path)) is not None]
    numeric = args.sort in NUMBERS
    rows.sort(
        key=lambda row: (
            row[args.sort] is None,
            -(row[args.sort] or 0) if numeric else str(row[args.sort]),
        )
    )
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    table = [[HEADINGS.get(c, c) for c in COLUMNS]] + [[cell(r[c]) for c in COLUMNS] for r in rows]
    widths = {c: max(len(line[i]) for line in table) for i, c in enumerate(COLUMNS)}
    for line in table:
        texts = [
            text.rjust(widths[c]) if c in NUMBERS else text.ljust(widths[c])
            for c, text in zip(COLUMNS, line, strict=True)
        ]
        print("  ".join(texts).rstrip())
    return 0
