"""Corpus formats: one reader per format, each yielding (source, target) pairs and counting what
it skips; chosen by `--format` or by the file's extension (a trailing .gz is looked through).

    tsv     source<TAB>target lines                      .tsv (and any single file of no format)
    moses   two aligned files, source then target        two files of no known format
    tmx     translation memory (TMX 1.4)                 .tmx
    xliff   XLIFF 1.2 / 2.0                              .xlf .xliff
    po, mo  gettext catalogs (msgid -> msgstr)           .po .mo; a directory: every catalog in it
    jsonl   {"src": ..., "tgt": ...} a line              .jsonl
"""

from __future__ import annotations

import importlib
import re
import struct
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vaswani.data.corpora import DataError, Pair, read_parallel_files, read_tsv, walk_files


@dataclass
class Corpus:
    """One corpus of a dataset: what it is, its pairs, and what its reader skipped."""

    description: dict
    pairs: Iterator[Pair]
    dropped: Counter = field(default_factory=Counter)


@dataclass(frozen=True)
class ReadOptions:
    format: str | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    markup: str = "strip"
    fields: tuple[str, str] = ("src", "tgt")
    skip_invalid: bool = False
    max_line_bytes: int = 1 << 20


@dataclass(frozen=True)
class CorpusFormat:
    """All the corpus readers know of a format, in one record of `REGISTRY`: its name (for
    `--format`), the extensions that name it, its reader, whether a directory of its files is
    read file by file (gettext catalogs), and whether its reader checks the text line by line as
    it reads (`checked` then need not look at it again). Adding a format is its reader's module
    and one `register` line."""

    name: str
    suffixes: tuple[str, ...]
    read: Callable[[Path, ReadOptions, Counter], Iterator[Pair]] | None
    """A file, the options and the counter of what it skips -> its pairs; None: moses, two
    aligned files read together (`open_corpora`)."""
    directory: bool = False
    line_checked: bool = False
    tagged: bool = False
    """Its files tag each text with its language (TMX, XLIFF): a pair's sides are told apart by
    the languages asked, or the file's own."""


REGISTRY: dict[str, CorpusFormat] = {}
"""Each corpus format's record, by name (in the order `--format` lists them)."""
SUFFIXES: dict[str, str] = {}
"""The format of each extension (from `REGISTRY`)."""


def register(fmt: CorpusFormat) -> CorpusFormat:
    """Add a corpus format (or replace one of its name): its record and extensions."""
    REGISTRY[fmt.name] = fmt
    SUFFIXES.update(dict.fromkeys(fmt.suffixes, fmt.name))
    return fmt


def _module(name: str) -> Any:
    """A reader module, imported when a file of its format is read (XML and gettext need
    libraries the command line's start-up does without)."""
    return importlib.import_module(f"vaswani.data.readers.{name}")


def _gettext(kind: str) -> Callable[[Path, ReadOptions, Counter], Iterator[Pair]]:
    """The reader of gettext's `kind` of catalog (po, mo): a directory of them is read whole."""
    return lambda path, o, dropped: getattr(_module("gettext"), f"read_{kind}")(
        path, dropped, o.max_line_bytes
    )


register(
    CorpusFormat(
        "tsv",
        (".tsv",),
        lambda path, o, dropped: read_tsv(path, dropped, o.skip_invalid, o.max_line_bytes),
        # whole UTF-8 lines through `corpora.decode_line`: NUL is refused there, UTF-8 has no
        # surrogates and a side is no longer than its line (a second look cost 0.8 s a million
        # pairs, half the reading time)
        line_checked=True,
    )
)
register(CorpusFormat("moses", (), None))
register(
    CorpusFormat(
        "tmx",
        (".tmx",),
        lambda path, o, dropped: _module("xml").read_tmx(
            path, o.src_lang, o.tgt_lang, dropped, o.markup, o.max_line_bytes
        ),
        tagged=True,
    )
)
register(
    CorpusFormat(
        "xliff",
        (".xlf", ".xliff"),
        lambda path, o, dropped: _module("xml").read_xliff(
            path, dropped, o.markup, o.max_line_bytes
        ),
        tagged=True,
    )
)
register(CorpusFormat("po", (".po",), _gettext("po"), directory=True))
register(CorpusFormat("mo", (".mo",), _gettext("mo"), directory=True))
register(
    CorpusFormat(
        "jsonl",
        (".jsonl",),
        lambda path, o, dropped: _module("jsonl").read_jsonl(
            path, dropped, o.fields, o.skip_invalid, o.max_line_bytes
        ),
    )
)
FORMATS = tuple(REGISTRY)
"""The names `--format` takes."""


def format_of(path: Path) -> str | None:
    """The format a file's extension names (through a trailing .gz), or None."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return SUFFIXES.get(suffixes[-1]) if suffixes else None


def files_under(directory: Path, fmt: str) -> list[Path]:
    """Every file of format `fmt` under `directory`, sorted (so the dataset does not depend on
    directory order); links to directories are not followed, so a link loop cannot trap it."""
    found = [path for path in walk_files(directory) if format_of(path) == fmt]
    if not found:
        raise DataError(f"{directory}: a directory without any {fmt} file")
    return sorted(found)


def catalogs_in(directory: Path) -> str | None:
    """The format of the gettext catalogs in `directory` (po or mo), None if it holds neither;
    both kinds is an error (the same messages would be read twice)."""
    found = {format_of(path) for path in walk_files(directory)}
    kinds = sorted((f for f in found if f is not None and REGISTRY[f].directory), reverse=True)
    if len(kinds) > 1:
        names = " and ".join(f".{kind}" for kind in kinds)
        choices = " or ".join(f"format={kind!r}" for kind in kinds)
        raise DataError(f"{directory}: holds {names} catalogs; give {choices}")
    return kinds.pop() if kinds else None


def open_corpora(paths: list[Path], opts: ReadOptions) -> list[Corpus]:
    """The corpora of a translation dataset given as files (see the module docstring)."""
    formats = [opts.format or (catalogs_in(p) if p.is_dir() else format_of(p)) for p in paths]
    if opts.format == "moses" or (len(paths) == 2 and formats == [None, None]):
        if len(paths) != 2:
            raise DataError(f"format='moses' reads two aligned files, got {len(paths)}")
        dropped: Counter = Counter()
        pairs = read_parallel_files(
            paths[0], paths[1], dropped, opts.skip_invalid, opts.max_line_bytes
        )
        return [Corpus({"name": "files", "paths": [str(p) for p in paths]}, pairs, dropped)]
    if len(paths) == 1 and formats == [None]:
        formats = ["tsv"]
    corpora = []
    for path, fmt in zip(paths, formats, strict=True):
        if fmt is None:
            raise DataError(
                f"{path}: cannot tell its format from its name; give format=... "
                f"({', '.join(FORMATS)})"
            )
        if path.is_dir() and not REGISTRY[fmt].directory:
            raise DataError(f"{path}: is a directory; give the file(s) in it")
        for file in files_under(path, fmt) if path.is_dir() else [path]:
            dropped = Counter()
            description = {"name": fmt, "path": str(file)}
            corpora.append(Corpus(description, read_file(file, fmt, opts, dropped), dropped))
    return corpora


def read_file(path: Path, fmt: str, opts: ReadOptions, dropped: Counter) -> Iterator[Pair]:
    """The pairs of one file of format `fmt`, read lazily (a reader's errors come as it is read),
    through `checked`."""
    return checked(reader(path, fmt, opts, dropped), path, fmt, opts, dropped)


BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")  # NUL, and halves of a surrogate pair
DAMAGE = (
    RecursionError,
    MemoryError,
    UnicodeError,
    LookupError,
    ValueError,
    OverflowError,
    struct.error,
    OSError,
    EOFError,
    zlib.error,
)


def text_problem(text: str, limit: int) -> str | None:
    """What makes `text` unusable as a segment, or None."""
    if len(text) > limit // 4 and len(text.encode("utf-8", "surrogatepass")) > limit:
        return f"a segment longer than max_line_bytes={limit:,}"
    bad = BAD_CHARACTER.search(text)
    if bad:
        return "a NUL character" if bad.group() == "\x00" else "half of a UTF-16 surrogate pair"
    return None


def checked(
    pairs: Iterator[Pair], path: Path, fmt: str, opts: ReadOptions, dropped: Counter
) -> Iterator[Pair]:
    """The error boundary of every reader: a pair with a NUL, a lone surrogate or more than
    --max-line-bytes on a side is an error (with --skip-invalid: dropped and counted), and
    whatever else a damaged file makes a reader raise is one line naming the file. The text of a
    `line_checked` format was checked line by line as it was read."""
    look, limit = not REGISTRY[fmt].line_checked, opts.max_line_bytes
    try:
        for number, (source, target) in enumerate(pairs, 1):
            problem = look and (text_problem(source, limit) or text_problem(target, limit))
            if not problem:
                yield source, target
            elif opts.skip_invalid:
                dropped["invalid text"] += 1
            else:
                raise DataError(
                    f"{path}: pair {number:,}: {problem}; fix it, or pass skip_invalid=True"
                )
    except DataError:
        raise
    except DAMAGE as error:
        what = type(error).__name__
        raise DataError(f"{path}: a damaged {fmt} file ({what}: {str(error)[:200]})") from None


def reader(path: Path, fmt: str, opts: ReadOptions, dropped: Counter) -> Iterator[Pair]:
    """The reader of format `fmt` over `path`."""
    found = REGISTRY.get(fmt)
    if found is None or found.read is None:
        raise DataError(f"format={fmt!r}: choose one of {', '.join(FORMATS)}")
    return found.read(path, opts, dropped)
