"""What the `vaswani` commands share: flag types, the flags every model-running command takes,
loading a run for inference, reading input lines, and printing text on one line."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import stat
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from vaswani.cli.fields import add_field_flags, settings_from
from vaswani.config import PRECISIONS, DecodeConfig
from vaswani.data.corpora import (
    DEFAULT_MAX_LINE_BYTES,
    MAX_LINE_BYTES,
    decode_lines,
    open_binary,
    split_lines,
)
from vaswani.decoding.quantize import QUANTIZATIONS
from vaswani.device import place
from vaswani.documents.spans import NONE, ProtectError, Protection
from vaswani.errors import VaswaniError
from vaswani.safe_io import overlap
from vaswani.tasks import Task
from vaswani.translation.align import AlignSettings
from vaswani.translation.engine import Choices, Engine, EngineError, decide, load_run
from vaswani.translation.glossary import read_glossary
from vaswani.translation.memory import Memory
from vaswani.translation.request import Aids, Request


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, []) or action.nargs == 0:
            return action.help  # a switch (--no-pivot) has no default worth showing
        return super()._get_help_string(action)


class CliError(VaswaniError):
    """A usage error to print as one line."""


def _number(parse: type, ok: Any, requirement: str) -> Any:
    def check(text: str) -> Any:
        value = parse(text)
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {requirement}, got {text}")
        return value

    check.__name__ = parse.__name__  # argparse names the type in "invalid int value"
    return check


positive_int = _number(int, lambda v: v >= 1, "a whole number >= 1")
non_negative_int = _number(int, lambda v: v >= 0, "a whole number >= 0")
positive_float = _number(float, lambda v: v > 0 and math.isfinite(v), "a number > 0")
non_negative_float = _number(float, lambda v: v >= 0.0, "a number >= 0")
probability = _number(float, lambda v: 0.0 < v <= 1.0, "in (0, 1]")
fraction = _number(float, lambda v: 0.0 <= v < 1.0, "in [0, 1)")
unit_interval = _number(float, lambda v: 0.0 <= v <= 1.0, "in [0, 1]")
fuzzy_score = _number(float, lambda v: 0 < v <= 100, "a score in (0, 100]")
line_bytes = _number(int, lambda v: 1 <= v <= MAX_LINE_BYTES, f"in 1 .. {MAX_LINE_BYTES}")
port_number = _number(int, lambda v: 1 <= v <= 65535, "a port number in 1 .. 65535")


def writable_file(
    path: Path | None,
    flag: str = "--output",
    reads: Mapping[str, Path] | None = None,
    stream: bool = True,
) -> None:
    """Refuse an output path that cannot be written as a file, before any work is done: a
    directory, a missing directory, a path that is or is inside something the command reads
    (`reads`: its name -> its path), and an existing node that is not a regular file, a device or
    a pipe (with `stream` False, an output resumed in place, any node but a regular file)."""
    if path is None:
        return
    if path.is_dir():
        raise CliError(f"{flag} {path}: is a directory; give a file name")
    if not path.parent.is_dir():
        raise CliError(f"{flag} {path}: the directory {path.parent} does not exist")
    not_over(path, flag, reads or {})
    if path.exists() and not path.is_file():
        kind = stat.S_IFMT(path.stat().st_mode)
        if not stream or kind not in (stat.S_IFCHR, stat.S_IFIFO):
            raise CliError(f"{flag} {path}: is not a regular file; give a file name")


def not_over(path: Path, flag: str, reads: Mapping[str, Path]) -> None:
    """Refuse an output that would write over something the command reads, whatever --force
    says: nothing a user had is lost to a mistyped path."""
    found = overlap(path, reads)
    if found is not None:
        raise CliError(
            f"{flag} {path} would write over {found}, which this command reads; write elsewhere"
        )


PRECISION_HELP = (
    "auto: bf16 where the hardware computes it natively (CUDA compute capability >= 8.0, CPUs "
    "with AVX512-BF16 or AMX), fp16 with loss scaling on older CUDA GPUs, fp32 elsewhere; "
    "`vaswani env` shows the choice"
)
DECODING_PRECISION_HELP = (
    f"{PRECISION_HELP}; a translation model decodes instead in what was measured fastest within "
    "0.5 BLEU of fp32 on its validation sentences (fp32, bf16, int8 weights), once per machine "
    "(RUN/decoding.json)"
)
DEVICE_HELP = "auto (CUDA, then Apple MPS, then CPU), cpu, cuda, cuda:1, mps"


def add_placement_flags(parser: argparse.ArgumentParser, precision: str = PRECISION_HELP) -> None:
    """--precision and --device, the same for every command that runs a model."""
    parser.add_argument("--precision", choices=PRECISIONS, default="auto", help=precision)
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)


def add_model_flags(
    parser: argparse.ArgumentParser,
    required: bool = True,
    flag: str = "--checkpoint",
    what: str = "a run directory",
    repeat: bool = False,
) -> None:
    """Which run (--checkpoint, or `flag` where the command names its role; `repeat`: one or
    more), which of its weights, where and in what precision to run them."""
    parser.add_argument(
        flag,
        dest="checkpoint",
        type=Path,
        required=required,
        metavar="RUN_DIR",
        help=what,
        **({"action": "append"} if repeat else {}),
    )
    parser.add_argument(
        "--weights",
        choices=("best", "latest", "averaged"),
        default="best",
        help="best validation figure (chrF, loss or accuracy), the latest checkpoint, or "
        "`vaswani average`'s",
    )
    add_placement_flags(parser, DECODING_PRECISION_HELP)


SEARCH_FIELDS = ("beam_size", "alpha", "length_penalty", "max_extra", "loop_guard")


def add_quantize_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quantize",
        choices=QUANTIZATIONS,
        default="none",
        help="int8: int8 weights in every linear layer, for faster CPU decoding (PyTorch's "
        "dynamic quantization)",
    )


def add_shortlist_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shortlist",
        action="store_true",
        help="score only each sentence's shortlisted target tokens (RUN_DIR/shortlist.safetensors, "
        "from `vaswani shortlist`): faster with a large vocabulary; a translation can differ "
        "where its list lacks a token the model wanted",
    )


def add_decoding_flags(parser: argparse.ArgumentParser) -> None:
    """The flags `translate` and `evaluate` share: the model, how to search and batch."""
    add_model_flags(parser)
    add_quantize_flag(parser)
    add_shortlist_flag(parser)
    add_field_flags(parser, DecodeConfig, (*SEARCH_FIELDS, "batch_tokens"))
    add_input_flags(parser)
    parser.add_argument(
        "--target",
        metavar="LANG",
        help="a multilingual model: the language to translate into (without it, the error "
        "lists the model's languages); a model of one pair takes none, but whole files may "
        "name it where the run does not record it (plural forms, a catalog's language, "
        "--input-dir's file names)",
    )


def add_split_flags(parser: argparse.ArgumentParser) -> None:
    """Sentence splitting of the input: on unless --no-split, by the source language's rules."""
    parser.add_argument(
        "--no-split",
        dest="split",
        action="store_false",
        help="translate each line as one segment; by default a line of several sentences is "
        "translated sentence by sentence and joined back with its own spacing",
    )
    parser.add_argument(
        "--source-lang",
        metavar="LANG",
        help="the input's language, whose rules split sentences (abbreviations, ordinals), "
        "and which of an --input-dir's files are the source's (en: values/, en.lproj/, en.yml); "
        "default: the model's source language when its data records it (prepare --src-lang)",
    )
    parser.add_argument(
        "--protect",
        action="append",
        metavar="REGEX",
        help="text matching REGEX is code, kept as it is and put back by word alignment, as "
        "placeholders (%%s, {name}, %%1), markup, URLs, paths and variables always are "
        "(repeatable; e.g. --protect '@\\w+@' for @VERSION@)",
    )
    parser.add_argument(
        "--no-protect",
        action="store_true",
        help="let the model translate every character, placeholders and markup included",
    )


def add_aid_flags(parser: argparse.ArgumentParser, memory: bool = True) -> None:
    """--glossary, and with `memory` --memory and --fuzzy-threshold."""
    parser.add_argument(
        "--glossary",
        type=Path,
        metavar="FILE",
        help="terms whose translation is prescribed: TSV or CSV (source term, target term; "
        "# comments and a header allowed) or TBX; a term found in a sentence (whole words, any "
        "case) has its target put into the translation, in place of the words aligned to it; "
        "a term that cannot be placed is reported",
    )
    if not memory:
        return
    parser.add_argument(
        "--memory",
        type=Path,
        action="append",
        metavar="FILE",
        help="a translation memory (TMX, TSV, XLIFF, PO: their approved translations; repeat "
        "for more): a sentence found in it (whitespace aside) is answered with its "
        "translation, verbatim",
    )
    parser.add_argument(
        "--fuzzy-threshold",
        type=fuzzy_score,
        metavar="SCORE",
        help="with --memory: report the memory's most similar entry scoring at least SCORE "
        "(0-100, normalised Indel similarity) beside the model's translation",
    )


def aids_of(args: argparse.Namespace, loaded: Engine, least: float | None = None) -> Aids:
    """The glossary and translation memory the flags name, read for `loaded`'s languages."""
    source, target = args.source_lang or loaded.source_language, loaded.target_language
    glossary = read_glossary(args.glossary, source, target) if args.glossary else None
    if glossary is not None and glossary.skipped:
        skipped = ", ".join(f"{n} {why}" for why, n in glossary.skipped.items())
        print(
            f"glossary {args.glossary}: {len(glossary)} terms; skipped {skipped}", file=sys.stderr
        )
    paths = getattr(args, "memory", None)
    memory = Memory.read(paths, source, target) if paths else None
    if memory is not None:
        print(f"translation memory: {len(memory):,} entries", file=sys.stderr)
    if getattr(args, "fuzzy_threshold", None) is not None and memory is None:
        raise CliError(
            "--fuzzy-threshold scores matches in a translation memory: give --memory FILE"
        )
    return Aids(glossary, memory, getattr(args, "fuzzy_threshold", None), least)


def request_of(
    args: argparse.Namespace, decoding: DecodeConfig, aids: Aids | None = None
) -> Request:
    """The `Request` the flags ask for: --target, --too-long, --no-split, --source-lang,
    --attention-alignment (where the command has them), the search (`decode_config`, read before
    the model is loaded so that a bad flag is said first) and `aids`."""
    return Request(
        target=getattr(args, "target", None),
        decoding=decoding,
        too_long=args.too_long,
        split=args.split,
        language=args.source_lang,
        alignment=AlignSettings(guided=not getattr(args, "attention_alignment", False)),
        protect=protection_of(args),
        aids=aids or Aids(),
    )


def protection_of(args: argparse.Namespace) -> Protection:
    """What --protect and --no-protect ask to keep out of the model's reach."""
    patterns, off = getattr(args, "protect", None), getattr(args, "no_protect", False)
    if off and patterns:
        raise CliError("--no-protect protects nothing: give it or --protect, not both")
    if off:
        return NONE
    try:
        return Protection(patterns=tuple(patterns or ()))
    except ProtectError as error:
        raise CliError(str(error)) from None


def add_input_flags(parser: argparse.ArgumentParser) -> None:
    """What to do with input lines over the model's or the reader's limits."""
    parser.add_argument(
        "--too-long",
        choices=("error", "truncate"),
        default="error",
        help="a line longer than the model's position limit: stop with an error, or use "
        "its beginning and warn",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=line_bytes,
        default=DEFAULT_MAX_LINE_BYTES,
        help=f"refuse any input line longer than this many bytes (at most {MAX_LINE_BYTES})",
    )


def decode_config(args: argparse.Namespace, n_best: int = 1) -> DecodeConfig:
    return settings_from(DecodeConfig, args, (*SEARCH_FIELDS, "batch_tokens"), n_best=n_best)


def load_for_inference(
    args: argparse.Namespace, *tasks: Task, run_dir: Path | None = None
) -> Engine:
    """The engine of --checkpoint/--weights on --device, decided by --precision, --quantize and
    --shortlist (`Engine.load`); a run of a task other than `tasks` is refused, naming the
    command that uses it. What was decided is printed to stderr."""
    placement = place(args.device, args.precision)
    run_dir = run_dir or args.checkpoint
    engine = load_run(run_dir, args.weights)
    if engine.task not in tasks:
        task = engine.task
        raise CliError(f"{run_dir} holds {task.described} (task {task}); use {task.command}")
    choices = Choices(
        getattr(args, "quantize", "none"),
        getattr(args, "shortlist", False),
        args.precision == "auto",
    )
    try:
        engine = decide(engine, placement, choices)
    except EngineError as error:
        raise CliError(str(error)) from None
    for line in engine.notes:
        print(line, file=sys.stderr)
    return engine


def read_input_lines(path: Path | None, max_line_bytes: int) -> list[str]:
    """Every line of a UTF-8 file (or of stdin when `path` is None or "-")."""
    if path is None or str(path) == "-":
        return list(
            decode_lines(split_lines(sys.stdin.buffer, "<stdin>", max_line_bytes), "<stdin>")
        )
    with open_binary(path) as handle:
        return list(decode_lines(split_lines(handle, path, max_line_bytes), path))


def texts_or_input(args: argparse.Namespace, what: str) -> list[str]:
    """TEXT arguments, or the lines of --input (or of stdin); never both, never none."""
    if args.texts and args.input is not None:
        raise CliError("give TEXT arguments or --input FILE, not both")
    texts = args.texts or read_input_lines(args.input, args.max_line_bytes)
    if not texts:
        raise CliError(f"nothing to {what}: the input is empty")
    return texts


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Inside: warnings (a truncated line, a dropped metrics record, ...) print as one `warning:`
    line each, without source lines. The process's own hook is back afterwards."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ARG001
        print(f"warning: {message}", file=sys.stderr)

    previous = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


# Every character str.splitlines() breaks a line at: a byte-level vocabulary can produce any of
# them, and each output must stay on its own line.
LINE_BREAKS = str.maketrans(dict.fromkeys("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029", " "))


def one_line(text: str) -> str:
    """`text` with its line-break characters printed as spaces."""
    return text.translate(LINE_BREAKS)


def parse_assignment(text: str) -> tuple[str, object]:
    """KEY=VALUE with VALUE read as JSON when it is JSON (numbers, true/false), else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CliError(f"--model expects KEY=VALUE (e.g. d_model=512 or norm=pre), got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value
