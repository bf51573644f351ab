"""Train a Transformer: Adam (0.9, 0.98, 1e-9), label smoothing 0.1, dropout (the paper's), with a
learning rate that warms up and then falls to zero when the budget (--max-minutes, --max-steps)
ends, and a moving average of the weights. By default (--preset auto) the model size is chosen
from the data, the budget and this machine's measured speed, and printed; --preset base or big
with --schedule inverse-sqrt is the paper's recipe exactly. The data's task picks the model:
translate an encoder-decoder (validated by loss, perplexity, sacreBLEU and chrF), lm a
decoder-only language model (loss, perplexity, a sample), classify an encoder with a pooled
classification head (loss, accuracy; --model pooling=first or mean). Checkpoints as it goes. For
several processes: torchrun --nproc_per_node N -m vaswani.cli train ..."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from vaswani.cli.common import CliError, parse_assignment
from vaswani.cli.fields import add_field_flags, settings_from
from vaswani.config import PRESET_TRAINING, TrainConfig
from vaswani.tasks import get_task

if TYPE_CHECKING:
    from vaswani.train.state import TrainResult

HELP = "train a model on a prepared dataset (or --resume a run)"
SETTINGS = (
    "preset",
    "task",
    "init",
    "freeze",
    "batch_tokens",
    "accumulate",
    "schedule",
    "warmup",
    "lr",
    "lr_scale",
    "ema_decay",
    "bpe_dropout",
    "patience",
    "tensorboard",
    "label_smoothing",
    "guided_alignment",
    "clip_norm",
    "precision",
    "seed",
    "max_steps",
    "max_minutes",
    "eval_every",
    "eval_sentences",
    "save_every",
    "keep_last",
    "log_every",
    "nan_policy",
    "device",
    "threads",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, help="directory written by `vaswani prepare`")
    parser.add_argument("--out", type=Path, help="run directory to create")
    parser.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue this run")
    parser.add_argument(
        "--reset-data-position",
        action="store_true",
        help="with --resume: accept changed data and start it from its beginning",
    )
    parser.add_argument(
        "--calibrate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fit the confidence of the run's translations on its validation split at the end "
        "(`vaswani calibrate`; --no-calibrate: later, by that command)",
    )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a model setting of the preset, e.g. --model norm=pre --model d_ff=2048",
    )
    by_preset = {
        name: "(default by preset: "
        + ", ".join(f"{p}: {values[name]}" for p, values in PRESET_TRAINING.items())
        + (
            " with inverse-sqrt; linear and wsd: a tenth of the horizon, at most 4,000)"
            if name == "warmup"
            else ")"
        )
        for name in PRESET_TRAINING["small"]
    }
    # Unset flags stay None, so that TrainConfig (and the preset, for the settings it gives)
    # decides; the help says what that gives.
    add_field_flags(parser, TrainConfig, SETTINGS, unset=True, notes=by_preset)


def run(args: argparse.Namespace) -> int:
    from vaswani.train.budget import process_started
    from vaswani.train.loop import train  # inference commands never load it
    from vaswani.train.setup import resume_config

    if args.resume:
        tc = resume_config(args.resume, max_steps=args.max_steps, max_minutes=args.max_minutes)
    else:
        if args.data is None or args.out is None:
            raise CliError("--data and --out are required (or --resume RUN_DIR)")
        model = dict(parse_assignment(item) for item in args.model)
        tc = settings_from(
            TrainConfig, args, SETTINGS, data=str(args.data), out=str(args.out), model=model
        )
    if tc.max_steps is None and tc.max_minutes is None:
        raise CliError("give a budget: --max-steps N and/or --max-minutes M")
    started = process_started()  # --max-minutes counts from the command's start
    result = train(
        tc,
        resume=bool(args.resume),
        reset_data_position=args.reset_data_position,
        started=started,
        calibrating=args.calibrate,
    )
    if result.main:  # one process of a distributed run calibrates and accounts
        calibrate = get_task(result.task).parallel and args.calibrate
        finish(result, calibrate and result.stopped_by != "interrupt", started)
    line = f"stopped by {result.stopped_by} at step {result.step}; run directory {result.run_dir}"
    if result.best is not None:
        line += f"; best validation {get_task(result.task).best_line(result.best)}"
    print(line)
    return 130 if result.stopped_by == "interrupt" else 0


def finish(result: TrainResult, calibrate: bool, started: float | None) -> None:
    """Calibrate the run's confidence (if asked), then account for the whole command's time in
    time.json and say where it went (stderr)."""
    from vaswani.train.budget import Ledger

    ledger = Ledger.read(result.run_dir)
    if calibrate:
        with ledger.timed("calibration"):
            calibrate_finished(result.run_dir, result.deadline)
    if started is not None:  # what came after the training loop joins "other"
        ledger.close(time.perf_counter() - started)
    ledger.write(result.run_dir)
    print(ledger.line(), file=sys.stderr)


def calibrate_finished(run_dir: Path, deadline: float | None = None) -> None:
    """The confidence calibration of a finished translation run (`vaswani calibrate`), on its
    best weights, on this machine's inference placement, translating until `deadline` (the end
    of the time budget, on `time.perf_counter`) at the latest."""
    from vaswani.cli.calibrate import calibrate_run
    from vaswani.device import place
    from vaswani.translation.engine import Choices, decide, load_run

    calibrate_run(decide(load_run(run_dir), place(), Choices(auto=False)), deadline=deadline)
