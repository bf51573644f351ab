"""Fit RUN_DIR/confidence.json: how far the run's translations can be trusted. The run translates
(at most --max-sentences of) its validation split; each translation's signals (its
log-probability per token, the beam's agreement with it, its length) are fitted to its sentence
chrF. `translate --output-format jsonl`, `evaluate` and `serve` then
give every translation a confidence in [0, 1] that estimates its chrF / 100. `vaswani train`
runs this at the end of training; run it yourself for an older or imported run."""

from __future__ import annotations

import argparse
import sys

from vaswani.cli.common import add_model_flags, load_for_inference, positive_int
from vaswani.decoding.confidence import Calibration
from vaswani.errors import VaswaniError
from vaswani.progress import progress_bar
from vaswani.tasks import TRANSLATE
from vaswani.translation.engine import Engine

HELP = "fit the confidence of a run's translations to their chrF on its validation split"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_flags(parser)
    parser.add_argument(
        "--max-sentences",
        type=positive_int,
        default=1000,
        help="validation sentences to translate (the first ones)",
    )


def run(args: argparse.Namespace) -> int:
    loaded = load_for_inference(args, TRANSLATE)
    calibration = calibrate_run(loaded, args.max_sentences)
    return 0 if calibration is not None else 2


def calibrate_run(
    loaded: Engine, max_sentences: int = 1000, deadline: float | None = None
) -> Calibration | None:
    """Fit and store `loaded`'s calibration, saying so; None (and why, on stderr) where it has
    no validation text to fit on. With a `deadline` (on `time.perf_counter`: the end of a
    training's time budget) it fits on the sentences translated by then."""
    from vaswani.evaluate import calibrate
    from vaswani.run import validation_pairs

    try:
        sources, references, pairs = validation_pairs(
            loaded.info, max_sentences, "a run whose data directory is at hand"
        )
    except (VaswaniError, OSError) as error:
        print(f"confidence: not calibrated ({error})", file=sys.stderr)
        return None
    try:
        bar = progress_bar(total=len(sources), unit="sent", desc="calibrating")
        translated = [0]  # the bar counts nothing where it is hidden

        def advance(count: int) -> None:
            translated[0] += count
            bar.update(count)

        with bar:
            calibration = calibrate(loaded, sources, references, pairs, advance, deadline)
    except VaswaniError as error:
        print(f"confidence: not calibrated ({error})", file=sys.stderr)
        return None
    done = translated[0]
    cut = f", the first {done} of {len(sources)} by the budget's end" if done < len(sources) else ""
    print(
        f"confidence: calibrated on {calibration.sentences} validation translations{cut} "
        f"(Spearman {calibration.spearman:.2f} with their sentence chrF); "
        f"{loaded.path / 'confidence.json'}",
        file=sys.stderr,
    )
    return calibration
