"""Translate monolingual text in the target language back into the source language with a reverse
model (a run trained from target to source), writing `synthetic source TAB real target` lines
for `vaswani prepare ... --back-translated OUTPUT`. The text is split into sentences and cleaned
as prepare cleans a corpus (invalid, empty and repeated sentences, and those over the model's
position limit, are left out; --lang-id also drops text in the other language). Resumable: run the
same command again after an interruption or a --max-minutes stop and it goes on where it stopped
(OUTPUT.progress.json keeps the place). Many processes: torchrun --nproc_per_node N -m
vaswani.cli backtranslate ... gives each its share and joins the shares in order."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vaswani.cli.common import (
    CliError,
    add_model_flags,
    add_quantize_flag,
    line_bytes,
    load_for_inference,
    non_negative_int,
    positive_float,
    writable_file,
)
from vaswani.cli.fields import add_field_flags
from vaswani.config import DecodeConfig
from vaswani.data.corpora import DEFAULT_MAX_LINE_BYTES
from vaswani.progress import progress_bar
from vaswani.tasks import TRANSLATE

if TYPE_CHECKING:
    from vaswani.backtranslate import Report

HELP = "make synthetic training pairs from target-language text with a reverse model"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_flags(
        parser, what="the reverse model: a run translating the text's language into the source's"
    )
    add_quantize_flag(parser)
    parser.add_argument(
        "--input",
        type=Path,
        action="append",
        required=True,
        metavar="MONO",
        help="a text file in the target language (the reverse model's source), one or more "
        "sentences a line, gzip allowed; may be repeated",
    )
    parser.add_argument(
        "--output", type=Path, required=True, help="the TSV to write (or to go on with)"
    )
    parser.add_argument(
        "--method",
        choices=("beam", "sample", "noised"),
        default="beam",
        help="beam: beam search's best translation; sample: each token drawn from the model "
        "(--temperature, --top-k); noised: beam search with words then deleted (10%%) and moved "
        "up to 3 places (Edunov et al. 2018)",
    )
    add_field_flags(parser, DecodeConfig, ("beam_size", "batch_tokens"))
    parser.add_argument(
        "--temperature", type=positive_float, default=1.0, help="sample: the temperature"
    )
    parser.add_argument(
        "--top-k",
        type=non_negative_int,
        default=0,
        help="sample: draw among the k most probable tokens only (0: all)",
    )
    parser.add_argument("--seed", type=non_negative_int, default=0, help="sample and noised")
    parser.add_argument(
        "--max-minutes",
        type=positive_float,
        help="stop before this much time would be passed (run again to go on)",
    )
    parser.add_argument(
        "--lang-id",
        action="store_true",
        help="drop sentences identified (lingua) as the other language, and synthetic sources "
        "identified as the text's own language (pip install 'vaswani[detect]')",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=line_bytes,
        default=DEFAULT_MAX_LINE_BYTES,
        help="refuse any input line longer than this many bytes",
    )
    parser.add_argument(
        "--force", action="store_true", help="start OUTPUT again instead of going on with it"
    )


def run(args: argparse.Namespace) -> int:
    from vaswani.backtranslate import BackTranslation, Job, backtranslate, join_parts

    for path in args.input:
        if not path.exists():
            raise CliError(f"--input {path}: no such file")
    reads = {f"--input {p}": p for p in args.input} | {"the reverse model": args.checkpoint}
    writable_file(args.output, reads=reads, stream=False)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    dist = None
    if world > 1:
        import torch

        from vaswani.train.distributed import init_distributed

        if args.device in ("auto", "cuda") and torch.cuda.is_available():
            args.device = f"cuda:{local}"
        dist = init_distributed(torch.device(args.device if args.device != "auto" else "cpu"))
    loaded = load_for_inference(args, TRANSLATE)
    settings = BackTranslation(
        args.method,
        args.beam_size,
        args.temperature,
        args.top_k,
        seed=args.seed,
        batch_tokens=args.batch_tokens,
        lang_id=args.lang_id,
        max_line_bytes=args.max_line_bytes,
    )
    bar = progress_bar(enabled=rank == 0, unit=" sent", desc="back-translating")
    with bar, loaded.computing():
        job = Job(args.input, args.output, args.force, (rank, world))
        report = backtranslate(loaded, job, settings, args.max_minutes, bar.update)
    if dist is not None:
        dist.barrier()
        if rank == 0:
            report.written, report.complete = join_parts(args.output, world)
        dist.close()
    if rank == 0:
        print_report(report, args.output)
    return 0


def print_report(report: Report, output: Path) -> None:
    dropped = ", ".join(f"{n:,} {why}" for why, n in sorted(report.dropped.items())) or "none"
    rate = report.done / report.seconds if report.seconds else 0.0
    print(
        f"back-translated {report.done:,} sentences in {report.seconds:.0f}s ({rate:.1f}/s)"
        f"{f' after {report.done_before:,} done before' if report.done_before else ''}; "
        f"{output} holds {report.written:,} pairs; dropped: {dropped}",
    )
    if not report.complete:
        print("stopped by --max-minutes; run the same command again to go on", file=sys.stderr)
