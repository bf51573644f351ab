"""Translate TEXT arguments, or --input FILE, or stdin, with beam search (or greedy search with
--beam-size 1). Output has one line per input line, in order; an empty line gives an empty line.
A line of several sentences is translated sentence by sentence and joined back with its own
spacing (--no-split: as one segment). Sentences are batched by length for speed. A file of a
document format (HTML, Markdown, subtitles, PO, XLIFF, DOCX, PPTX, ODT, ODP, EPUB) or of an app's
resources (Android strings.xml, iOS .strings, .stringsdict and .xcstrings, JSON, ARB, YAML, Java
.properties, Qt .ts, .NET .resx) is translated whole, in its format, into --output (several into
--output-dir; a project's tree with --input-dir)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vaswani.cli.common import (
    CliError,
    add_aid_flags,
    add_decoding_flags,
    add_split_flags,
    aids_of,
    decode_config,
    load_for_inference,
    one_line,
    positive_int,
    protection_of,
    read_input_lines,
    request_of,
    unit_interval,
    writable_file,
)
from vaswani.cli.files import Report, document_mode, reads_of, translate_files, translate_tree
from vaswani.decoding.text import Translation
from vaswani.documents.formats import FORMATS, READERS
from vaswani.progress import progress_bar
from vaswani.safe_io import write_output
from vaswani.tasks import TRANSLATE
from vaswani.translation import pipeline
from vaswani.translation.align import Alignment, pharaoh
from vaswani.translation.files import fuzzy_record, terms_record
from vaswani.translation.pipeline import Split

HELP = "translate text with a trained model (arguments, a file, or stdin)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="texts to translate")
    parser.add_argument(
        "--input",
        type=Path,
        action="extend",
        nargs="+",
        metavar="FILE",
        help="a file to translate (- = stdin): a .txt file line by line; an HTML page, ... "
        "whole, in its format (by its extension or --format); several go to --output-dir",
    )
    parser.add_argument("--output", type=Path, help="write translations here instead of stdout")
    parser.add_argument(
        "--input-dir",
        type=Path,
        metavar="DIR",
        help="translate a project's tree of files (Android res/, iOS .lproj folders, "
        "locales/en/, docs) into --output-dir, mirrored and named as each platform names the "
        "target's files (values/ -> values-es/, en.lproj/ -> es.lproj/, en.yml -> es.yml); "
        "files of other languages and formats are left out",
    )
    parser.add_argument(
        "--list-skipped",
        action="store_true",
        help="with --input-dir: name each file left out and why (by default, a count by reason)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        metavar="DIR",
        help="write each translated --input file here (or the --input-dir tree)",
    )
    parser.add_argument(
        "--format",
        choices=sorted(READERS),
        help="read every --input file as this format (default: by its extension: "
        + ", ".join(f"{ext} {fmt}" for ext, fmt in FORMATS.items())
        + ")",
    )
    parser.add_argument(
        "--no-fuzzy",
        dest="fuzzy",
        action="store_false",
        help="PO files: do not mark the entries translated fuzzy (by default they are, for review)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="PO and XLIFF files: translate entries that have a translation already (kept "
        "by default)",
    )
    parser.add_argument(
        "--n-best",
        type=positive_int,
        default=1,
        help="hypotheses per line (at most --beam-size); more than 1 prints LINE ||| TEXT ||| SCORE",
    )
    parser.add_argument(
        "--output-format",
        choices=("text", "jsonl"),
        default="text",
        help="text: a translation a line; jsonl: a JSON object a line with translation, "
        "confidence (the model's mean probability per token, 0..1), and alignment or "
        "alternatives when asked",
    )
    parser.add_argument(
        "--alignments",
        action="store_true",
        help="also give each translation's word alignment, as Pharaoh pairs SRC-TGT over "
        "the whitespace-separated words (0-0 1-2 ...), read from the model's cross-attention; "
        "in text form after ' ||| '",
    )
    parser.add_argument(
        "--attention-alignment",
        action="store_true",
        help="read word alignments from the last layer's heads averaged even where the model "
        "has a head trained by --guided-alignment (which is read by default)",
    )
    parser.add_argument(
        "--min-confidence",
        type=unit_interval,
        metavar="X",
        help="translations whose confidence (0..1) is under X: marked in --output-format jsonl "
        "(below_min_confidence), left untranslated in PO and XLIFF files (for a translator)",
    )
    add_aid_flags(parser)
    add_decoding_flags(parser)
    add_split_flags(parser)


@dataclass
class Translated:
    """A text's n-best translations, and its word alignment when asked."""

    found: list[Translation]
    alignment: Alignment | None = None


def format_translations(
    first_line: int,
    translations: list[Translated],
    n_best: int,
    output_format: str = "text",
    least: float | None = None,
) -> list[str]:
    """One line per input line: the translation (with ` ||| ALIGNMENT` when asked), or a JSON
    object (marked where its confidence is under `least`); with --n-best in text form,
    `LINE ||| TEXT ||| SCORE` per hypothesis."""
    if output_format == "jsonl":
        return [json.dumps(record(t, least), ensure_ascii=False) for t in translations]
    if n_best == 1:
        return [
            one_line(t.found[0].text if t.found else "")
            + ("" if t.alignment is None else f" ||| {pharaoh(t.alignment)}")
            for t in translations
        ]
    return [
        f"{first_line + i} ||| {one_line(t.text)} ||| {t.score:.4f}"
        for i, translated in enumerate(translations)
        for t in translated.found
    ]


def record(translated: Translated, least: float | None = None) -> dict[str, Any]:
    """A line of --output-format jsonl (a blank input line: an empty translation, confidence 1)."""
    best = translated.found[0] if translated.found else None
    out: dict[str, Any] = {
        "translation": best.text if best else "",
        "confidence": round(best.confidence, 4) if best else 1.0,
    }
    if best is not None:
        out.update(extras(best))
        if least is not None and best.confidence < least:
            out["below_min_confidence"] = True
    if translated.alignment is not None:
        out["alignment"] = pharaoh(translated.alignment)
    if len(translated.found) > 1:
        out["alternatives"] = [t.text for t in translated.found[1:]]
    return out


def extras(best: Translation) -> dict[str, Any]:
    """What a translation's JSON says beyond its text: memory, fuzzy match, glossary terms,
    the check it failed (its text is then the source as it was)."""
    out: dict[str, Any] = {}
    if best.origin != "model":
        out["origin"] = best.origin
    if best.fuzzy is not None:
        out["fuzzy_match"] = fuzzy_record(best)
    if best.terms:
        out["terms"] = terms_record(best)
    if best.unsafe:
        out["unsafe"] = best.unsafe
    return out


def run(args: argparse.Namespace) -> int:
    inputs = args.input or []
    protection_of(args)  # a --protect that cannot work is said before anything is loaded
    if args.input_dir is not None:
        return translate_tree(args)
    if args.texts and inputs:
        raise CliError("give TEXT arguments or --input FILE, not both")
    if document_mode(args, inputs):
        return translate_files(args, inputs)
    writable_file(args.output, reads=reads_of(args, inputs))
    dc = decode_config(args, args.n_best)
    interactive = not args.texts and not inputs and sys.stdin.isatty()
    if args.texts:
        lines, name = args.texts, "the arguments"
    elif not interactive:
        path = inputs[0] if inputs else None
        lines = read_input_lines(path, args.max_line_bytes)
        name = "stdin" if path is None else str(path)
        if not lines:
            raise CliError(f"{name} is empty: nothing to translate")
    form = args.output_format
    if args.min_confidence is not None and form != "jsonl":
        raise CliError(
            "--min-confidence marks lines in --output-format jsonl (or leaves PO "
            "and XLIFF entries untranslated); give --output-format jsonl"
        )
    loaded = load_for_inference(args, TRANSLATE)
    # A wrong or missing --target (or --source-lang, where the model is told it): said first.
    loaded.prefixes(args.target, 0, args.source_lang)
    request = dataclasses.replace(
        request_of(args, dc, aids_of(args, loaded)), align=args.alignments
    )

    def translate(texts: list[str] | Split, bar: Any = None) -> list[Translated]:
        done = loaded.translate_nbest(texts, request, bar.update if bar else None)
        return [Translated(f, a) for f, a in zip(done.found, done.alignments, strict=True)]

    if interactive:  # a person typing: answer each line as it comes
        print("type a sentence and press Enter; Ctrl-D ends", file=sys.stderr)
        least = args.min_confidence
        for number, line in enumerate(sys.stdin):
            found = translate([line.rstrip("\n")])
            print("\n".join(format_translations(number, found, dc.n_best, form, least)))
            sys.stdout.flush()
        return 0
    sentences = pipeline.sentences_of(lines, request, loaded.source_language)  # split once
    total, enabled = len(sentences.flat), bool(inputs)
    with progress_bar(total=total, unit="sent", desc="translating", enabled=enabled) as bar:
        found = translate(sentences, bar)
    report = Report("line")
    report.add([t.found for t in found])
    report.say()
    lines_out = format_translations(0, found, dc.n_best, form, args.min_confidence)
    text = "".join(line + "\n" for line in lines_out)
    if args.output is not None:
        write_output(args.output, text.encode("utf-8"))  # never a half-written file
        print(f"translated {len(lines)} lines of {name} into {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
