"""translate's whole files: `--input FILE...` each written in its format to `--output` (or
into `--output-dir`), and `--input-dir DIR`, a project's tree of files translated into a tree
mirrored under `--output-dir`; what translating says at the end (`Report`)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from vaswani.cli.common import (
    CliError,
    aids_of,
    decode_config,
    load_for_inference,
    not_over,
    request_of,
    writable_file,
)
from vaswani.decoding.text import Translation
from vaswani.documents.formats import (
    FORMATS,
    REGISTRY,
    UNREAD,
    Document,
    DocumentError,
    DocumentOptions,
    OtherFile,
    format_of,
    read_document,
    translate_documents,
)
from vaswani.documents.projects import placed, project_files
from vaswani.progress import progress_bar
from vaswani.safe_io import read_bounded, write_output
from vaswani.tasks import TRANSLATE
from vaswani.translation.engine import Engine
from vaswani.translation.files import document_translator


@dataclass
class Report:
    """What translating says on stderr at the end: the glossary's terms put in and those that
    could not be, the texts kept as they were because their translation failed a check (a
    placeholder, the accelerator, a line break). Told each batch's translations in order."""

    what: str
    """How a text is named: "line", "text"."""
    count: int = 0
    terms: list[tuple[str, tuple[str, str, bool]]] = dataclasses.field(default_factory=list)
    kept: Counter = dataclasses.field(default_factory=Counter)
    kept_where: list[str] = dataclasses.field(default_factory=list)
    """The first texts kept (for the message)."""

    def add(self, found: list[list[Translation]]) -> None:
        for mine in found:
            self.count += 1
            label = f"{self.what} {self.count}"
            if not mine:
                continue
            self.terms += [(label, term) for term in mine[0].terms]
            if mine[0].unsafe:
                self.kept[mine[0].unsafe] += 1
                if len(self.kept_where) < 10:
                    self.kept_where.append(label)

    def say(self) -> None:
        if self.terms:
            missed = [f"{source!r} ({where})" for where, (source, _, put) in self.terms if not put]
            print(
                f"glossary: {len(self.terms) - len(missed)} of {len(self.terms)} terms put in"
                + (
                    f"; not placed (no word aligned to them): {', '.join(missed[:10])}"
                    if missed
                    else ""
                ),
                file=sys.stderr,
            )
        if self.kept:
            checks = ", ".join(f"{name} {n}" for name, n in self.kept.most_common())
            print(
                f"checks: {sum(self.kept.values())} of {self.count} {self.what}s kept as they were, "
                f"their translation failed a check ({checks}): {', '.join(self.kept_where)}",
                file=sys.stderr,
            )


def document_mode(args: argparse.Namespace, inputs: list[Path]) -> bool:
    """Whether to translate whole files: several, or --output-dir, or --format, or a file
    whose extension names a document format (a .txt file is translated line by line)."""
    if args.format is None:
        for path in inputs:  # a format vaswani does not read is refused, never read as text
            if path.suffix.lower() in UNREAD:
                format_of(path)
    known = any(FORMATS.get(p.suffix.lower(), "text") != "text" for p in inputs)
    return len(inputs) > 1 or args.output_dir is not None or args.format is not None or known


def file_outputs(args: argparse.Namespace, inputs: list[Path]) -> list[Path | None]:
    """Where each --input file's translation goes (None: stdout), after checking the flags; an
    output that is its input is refused."""
    if not inputs:
        raise CliError("--format and --output-dir translate files: give them with --input FILE")
    if args.output_dir is None and len(inputs) > 1:
        raise CliError("several --input files go into a directory: give --output-dir DIR")
    zipped = REGISTRY[format_of(inputs[0], args.format)].binary
    if args.output_dir is None and args.output is None and zipped:
        raise CliError(f"{inputs[0]} translates into a zip file: give --output FILE")
    if args.output_dir is not None and args.output is not None:
        raise CliError("give --output FILE or --output-dir DIR, not both")
    if args.output_format != "text" or args.n_best != 1:
        raise CliError("--output-format jsonl and --n-best are for lines, not whole files")
    outputs: list[Path | None] = [args.output]
    reads = reads_of(args, inputs)
    if args.output_dir is not None:
        not_over(args.output_dir, "--output-dir", reads)
        outputs = [args.output_dir / p.name for p in inputs]
        named, count = Counter(p.name for p in inputs).most_common(1)[0]
        if count > 1:
            raise CliError(
                f"--output-dir {args.output_dir}: several inputs are named {named}, and "
                "their translations would be written over each other; translate them apart"
            )
        args.output_dir.mkdir(parents=True, exist_ok=True)
    for target in outputs:
        writable_file(target, reads=reads)
    return outputs


def reads_of(args: argparse.Namespace, inputs: list[Path]) -> dict[str, Path]:
    """What translate reads, by name, that no output may write over: the inputs (stdin aside),
    the run, the glossaries and memories."""
    found = {f"--input {p}": p for p in inputs if str(p) != "-"}
    aids = [args.checkpoint, args.glossary, *(args.memory or [])]
    return found | {f"{p}": Path(p) for p in aids if p is not None}


def translate_files(args: argparse.Namespace, inputs: list[Path]) -> int:
    """--input FILE... as documents, each written whole to --output (or into --output-dir; one
    text document without either: to stdout)."""
    outputs = file_outputs(args, inputs)
    options = options_of(args)
    documents = [
        read_document(input_bytes(p, options), format_of(p, args.format), str(p), options)
        for p in inputs
    ]
    check_formats(args, {format_of(p, args.format) for p in inputs})
    loaded = load_for_inference(args, TRANSLATE)
    args, target = written_language(args, loaded)
    results, total = translate_all(args, loaded, documents, target)
    if outputs == [None]:
        sys.stdout.write(results[0].decode("utf-8"))
        return 0
    for target, data in zip(outputs, results, strict=True):
        write_output(target, data)  # never a half-written file; the input is only read
    names = ", ".join(str(p) for p in outputs)
    print(
        f"translated {len(inputs)} file(s), {total:,} characters of text, into {names}",
        file=sys.stderr,
    )
    return 0


def written_language(
    args: argparse.Namespace, loaded: Engine
) -> tuple[argparse.Namespace, str | None]:
    """The target language that files are written in (where a format names it, a plural's
    forms, a tree's file names): --target, else the run's. A model of one pair is not asked
    for a target, so there --target only names the language (its data may not record it)."""
    target = args.target or loaded.target_language
    if loaded.languages is None and args.target is not None:
        if loaded.target_language not in (None, target):
            raise CliError(f"--target {target}: this run translates into {loaded.target_language}")
        args = argparse.Namespace(**{**vars(args), "target": None})
    loaded.prefixes(args.target, 0, args.source_lang)
    return args, target


def options_of(args: argparse.Namespace) -> DocumentOptions:
    return DocumentOptions(args.fuzzy, args.overwrite, max_unit_bytes=args.max_line_bytes)


def check_formats(args: argparse.Namespace, formats: set[str]) -> None:
    partial = {name for name, record in REGISTRY.items() if record.partial}
    if args.min_confidence is not None and not formats <= partial:
        raise CliError(
            "--min-confidence leaves entries untranslated in PO and XLIFF files; "
            f"{', '.join(sorted(formats - partial))} files have no such entries"
        )


def translate_all(
    args: argparse.Namespace, loaded: Engine, documents: list[Document], language: str | None
) -> tuple[list[bytes], int]:
    """The documents translated into `language` (written where a format names it; one progress
    bar for all), the report said; and how many characters of text they held."""
    report = Report("text")
    aids = dataclasses.replace(aids_of(args, loaded, least=args.min_confidence), report=report.add)
    request = request_of(args, decode_config(args), aids)
    total = sum(len(text) for d in documents for text in d.texts())
    with contextlib.ExitStack() as bars:
        shown: list[Any] = []  # one bar, however many chunks the texts are translated in

        def progress(sentences: int) -> Any:
            if not shown:
                bar = progress_bar(total=sentences, unit="sent", desc="translating")
                shown.append(bars.enter_context(bar))
            else:
                shown[0].total += sentences
                shown[0].refresh()
            return shown[0].update

        translate = document_translator(loaded, request, progress)
        results = translate_documents(documents, translate, language)
    report.say()
    return results, total


def translate_tree(args: argparse.Namespace) -> int:
    """--input-dir DIR: the tree's files translated into the mirrored tree under --output-dir,
    each named as its platform names the target's files (`vaswani.documents.projects`); files of
    formats vaswani does not read, of other languages, or with nothing to translate left out."""
    if args.output_dir is None or args.input or args.texts or args.output is not None:
        raise CliError("--input-dir DIR translates a tree into --output-dir DIR (and nothing else)")
    root = args.input_dir
    paths, other = project_files(root)
    not_over(args.output_dir, "--output-dir", reads_of(args, paths) | {f"--input-dir {root}": root})
    formats = {path: format_of(path) for path in paths}
    check_formats(args, set(formats.values()))  # before the model is loaded
    loaded = load_for_inference(args, TRANSLATE)  # the languages say which files are sources
    args, target = written_language(args, loaded)
    if not target:
        raise CliError("--input-dir names the translated files by language: give --target")
    source = args.source_lang or loaded.source_language
    options = options_of(args)
    places = tree_places(formats, root, (source, target), other)
    one_place(places, root, args.output_dir)
    todo: list[tuple[Path, Document]] = []
    for path, fmt in formats.items():
        found = places[path] and tree_document(path, fmt, options, other)
        if found:
            todo.append((args.output_dir / places[path], found))
    left_out(other, root, args.list_skipped)
    if not todo:
        raise CliError(f"--input-dir {root}: no file of the source language to translate")
    results, total = translate_all(args, loaded, [document for _, document in todo], target)
    for (out, _), data in zip(todo, results, strict=True):
        out.parent.mkdir(parents=True, exist_ok=True)
        write_output(out, data)
    print(
        f"translated {len(todo)} file(s), {total:,} characters of text, into {args.output_dir}"
        f" ({len(other)} left out)",
        file=sys.stderr,
    )
    return 0


def tree_places(
    formats: dict[Path, str], root: Path, pair: tuple[str | None, str], other: list
) -> dict[Path, PurePath | None]:
    """Where each file of the tree goes (`placed`, knowing the files beside it); the files
    that are not sources go to `other` with why."""
    names: dict[Path, set[str]] = {}
    for path in formats:
        names.setdefault(path.parent, set()).add(path.name)
    places = {}
    for path, fmt in formats.items():
        beside = frozenset(names[path.parent] - {path.name})
        places[path], why = placed(path.relative_to(root), fmt, *pair, beside)
        if places[path] is None:
            other.append((path, why))
    return places


def tree_document(path: Path, fmt: str, options: DocumentOptions, other: list) -> Document | None:
    """A tree's file read, or None (in `other` with why): not of its format after all, not
    readable (a compiled .strings: said each time, not only counted), nothing to translate."""
    try:
        found = read_document(input_bytes(path, options), fmt, str(path), options)
    except OtherFile as error:  # a .ts of another tool, a JSON file of no strings
        other.append((path, str(error).removeprefix(f"{path}: ")))
        return None
    except DocumentError as error:
        other.append((path, f"{UNREADABLE}: {str(error).removeprefix(f'{path}: ')}"))
        return None
    if not found.texts():
        other.append((path, "nothing to translate"))
        return None
    return found


UNREADABLE = "cannot be read"


def left_out(other: list[tuple[Path, str]], root: Path, listed: bool) -> None:
    """Say on stderr which files of the tree are left out and why: each one (`--list-skipped`),
    else how many for each reason."""
    for path, why in sorted(other):
        if listed or why.startswith(UNREADABLE):
            print(f"left out: {path.relative_to(root)}: {why}", file=sys.stderr)
    if listed:
        return
    reasons = Counter(why.split(" (")[0].split(":")[0] for _, why in other)
    if reasons:
        counted = "; ".join(f"{n} {why}" for why, n in reasons.most_common())
        print(
            f"left out {len(other)} file(s): {counted} (--list-skipped names them)", file=sys.stderr
        )


def one_place(places: dict[Path, PurePath | None], root: Path, output_dir: Path) -> None:
    """A CliError where two files of the tree would be translated into one file (`values/` and
    the source language's `values-es/`, `Base.lproj/` and `en.lproj/`): before anything is
    read or written, naming both."""
    seen: dict[PurePath, Path] = {}
    for path, place in places.items():
        if place is None:
            continue
        if place in seen:
            raise CliError(
                f"--input-dir {root}: {seen[place].relative_to(root)} and "
                f"{path.relative_to(root)} would both be translated into {output_dir / place}; "
                "keep one of them in the tree (or translate each with --input)"
            )
        seen[place] = path


def input_bytes(path: Path, options: DocumentOptions) -> bytes:
    """A file's bytes (`-`: stdin's), read as a stream within the limit of a zip's unpacked
    bytes: `--input <(zcat page.html.gz)` works, `/dev/zero` is refused."""
    if str(path) != "-":
        return read_bounded(path, options.max_unpacked_bytes, "input file")
    data = sys.stdin.buffer.read(options.max_unpacked_bytes + 1)
    if len(data) > options.max_unpacked_bytes:
        raise CliError(f"stdin holds over {options.max_unpacked_bytes:,} bytes; too large")
    return data
