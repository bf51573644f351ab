"""Make a distilled copy of a prepared dataset for training a small, fast student (sequence-level
knowledge distillation, Kim and Rush 2016): the teacher (a run of the same language pair: one
trained on this data, a larger one, an imported OPUS-MT model) translates every training source
with beam search, and its translations replace the training targets. The tokenizer, the valid and
test splits and their references stay as they were. Then `vaswani train --data OUT --preset tiny`
trains the student, and `--quantize int8` serves it."""

from __future__ import annotations

import argparse
from pathlib import Path

from vaswani.cli.common import (
    CliError,
    add_model_flags,
    add_quantize_flag,
    load_for_inference,
    not_over,
)
from vaswani.cli.fields import add_field_flags
from vaswani.config import DecodeConfig
from vaswani.progress import progress_bar
from vaswani.tasks import TRANSLATE

HELP = "make a dataset whose training targets are a teacher's translations (distillation)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_flags(
        parser,
        flag="--teacher",
        what="the teacher: a run of the data's language pair; repeat for an ensemble of runs "
        "trained on the same data (log-probabilities averaged in the beam)",
        repeat=True,
    )
    add_quantize_flag(parser)
    parser.add_argument("--data", type=Path, required=True, help="a prepared dataset")
    parser.add_argument("--out", type=Path, required=True, help="the dataset to write")
    add_field_flags(parser, DecodeConfig, ("beam_size", "batch_tokens"))
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")


def run(args: argparse.Namespace) -> int:
    from vaswani.data import PreparedData
    from vaswani.distill import distill

    data = PreparedData(args.data)  # refused here, before the teacher is loaded, if not data
    reads = {f"the dataset {args.data}": data.directory}
    reads |= {f"the teacher {t}": t for t in args.checkpoint}
    not_over(args.out, "--out", reads)  # whatever --force says
    if args.out.exists() and not (args.out.is_dir() and args.force):
        raise CliError(f"--out {args.out}: exists; choose another --out, or --force to replace it")
    teachers = []
    for run_dir in args.checkpoint:  # the first resolves --precision auto for all
        teacher = load_for_inference(args, TRANSLATE, run_dir=run_dir)
        teachers.append(teacher)
        args.precision = teacher.precision
    dc = DecodeConfig(beam_size=args.beam_size, batch_tokens=args.batch_tokens)
    pairs = data.meta["splits"]["train"]["pairs"]
    with (
        progress_bar(total=pairs, unit=" pairs", desc="teacher translating") as bar,
        teachers[0].computing(),
    ):
        done = distill(teachers, args.data, args.out, dc, bar.update)
    print(
        f"distilled {args.out}: {done.replaced:,} of {done.pairs:,} training targets are "
        f"the translations of {' + '.join(map(str, args.checkpoint))}; {done.kept_reference:,} "
        "kept their reference "
        f"({done.too_long:,} sources over the teacher's position limit)"
    )
    print(f"next: vaswani train --data {args.out} --preset tiny (or mini), then --quantize int8")
    return 0
