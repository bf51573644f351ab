"""Parallel text: streaming readers for files, and the hash that assigns a pair its split (the
built-in corpora are in `vaswani.data.builtin`).

Readers yield (source, target) pairs one at a time, so a corpus of any size is never held in memory.
Lines are split on b"\\n" only (text mode would also split on \\r, U+2028 and other separators and so
silently misalign the two sides); one trailing \\r is removed, for files written on Windows.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from collections import Counter
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path
from typing import BinaryIO, NamedTuple

from vaswani.errors import VaswaniError

DEFAULT_MAX_LINE_BYTES = 1 << 20  # 1 MiB: a longer line is refused rather than read whole
MAX_LINE_BYTES = 1 << 26  # 64 MiB, the most --max-line-bytes may allow: a line is held whole in
# memory several times over (bytes, text, tokens), and tokenizing one of 50 MB takes minutes
BOM = "\ufeff"

Pair = tuple[str, str]
"""A source and a target text, as the readers yield them."""


class Example(NamedTuple):
    """A kept pair as the later stages of `prepare` read it back: its texts and, in a
    multilingual dataset, the index of its language pair (`Languages.pairs`; 0 otherwise)."""

    src: str
    tgt: str
    language_pair: int = 0
    tagged: bool = False
    """A back-translated pair, whose source is led by the tag token."""


class DataError(VaswaniError, ValueError):
    """Input data vaswani cannot use; the message names the file, the line and what to do."""


def open_binary(path: Path) -> BinaryIO:
    """Open a file for reading bytes, decompressing gzip (recognised by its magic bytes)."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, expected a text file") from None
    if handle.peek(2)[:2] == b"\x1f\x8b":
        return gzip.open(handle, "rb")  # type: ignore[return-value]
    return handle


MAX_DEPTH = 64  # directory levels under a corpus directory


def walk_files(directory: Path) -> Iterator[Path]:
    """The regular files under `directory`, without following links to directories (a link loop
    cannot trap it) and without recursion; deeper than MAX_DEPTH levels is a DataError."""
    pending = [(Path(directory), 0)]
    while pending:
        folder, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise DataError(f"{directory}: directories nested deeper than {MAX_DEPTH} levels")
        try:
            entries = list(os.scandir(folder))
        except OSError as error:
            raise DataError(f"{folder}: cannot list the directory ({error.strerror})") from None
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                pending.append((Path(entry.path), depth + 1))
            elif entry.is_file():
                yield Path(entry.path)


def split_lines(handle: BinaryIO, name: str | Path, max_line_bytes: int) -> Iterator[bytes]:
    """The lines of a binary stream, without the newline, refusing any longer than the limit."""
    if not 1 <= max_line_bytes <= MAX_LINE_BYTES:
        raise DataError(
            f"max_line_bytes={max_line_bytes}: must be in 1 .. {MAX_LINE_BYTES} (64 MiB); a "
            "longer line is not one sentence"
        )
    number = 0
    while True:
        try:
            line = handle.readline(max_line_bytes + 2)  # the line, its \r\n, and one byte more
        except (OSError, EOFError, zlib.error) as error:  # a damaged or truncated .gz, EIO, ...
            raise DataError(f"{name}: cannot read past line {number} ({error})") from None
        if not line:
            return
        number += 1
        body = line[:-1] if line.endswith(b"\n") else line
        if len(body) > max_line_bytes + (1 if body.endswith(b"\r") else 0):
            raise DataError(
                f"{name}:{number}: line longer than {max_line_bytes} bytes; split it, or raise "
                f"the limit max_line_bytes={max_line_bytes} if it really is one sentence"
            )
        yield body[:-1] if body.endswith(b"\r") else body


def read_lines(path: Path, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of a file as bytes, without the newline, refusing any longer than the limit."""
    with open_binary(path) as handle:
        yield from split_lines(handle, path, max_line_bytes)


def decode_line(raw: bytes, path: str | Path, number: int, offset: int) -> str:
    """UTF-8 text of one line, or a DataError naming the file, line and byte offset of the fault."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(
            f"{path}:{number}: invalid UTF-8 at byte offset {offset + error.start} "
            f"(column {error.start + 1}); re-encode the file as UTF-8, or pass skip_invalid=True"
        ) from None
    for bad, name in (("\x00", "NUL byte"), (BOM, "byte-order mark (BOM)")):
        column = text.find(bad)
        if column >= 0:
            at = offset + len(text[:column].encode("utf-8"))
            raise DataError(
                f"{path}:{number}: {name} at byte offset {at}; remove it, or pass skip_invalid=True"
            )
    return text


def numbered_lines(
    lines: Iterator[bytes], name: str | Path
) -> Iterator[tuple[int, str | DataError]]:
    """(line number, text or the error for that line), tracking byte offsets for messages."""
    offset = 0
    for number, raw in enumerate(lines, 1):
        try:
            yield number, decode_line(raw, name, number, offset)
        except DataError as error:
            yield number, error
        offset += len(raw) + 1


def decode_lines(lines: Iterator[bytes], name: str | Path) -> Iterator[str]:
    """UTF-8 text of each line; the first fault raises a DataError with line and byte offset."""
    for _, item in numbered_lines(lines, name):
        if isinstance(item, DataError):
            raise item
        yield item


def _keep(src: str, tgt: str, dropped: Counter) -> bool:
    if not src.strip() or not tgt.strip():
        dropped["empty line"] += 1
        return False
    return True


def read_parallel_files(
    src_path: Path,
    tgt_path: Path,
    dropped: Counter | None = None,
    skip_invalid: bool = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[Pair]:
    """Pairs from two aligned files (line i of one translates line i of the other).

    Different line counts are always an error naming both files and counts. A line that is not
    valid UTF-8 (or holds a NUL byte or a BOM) is an error, or with `skip_invalid` drops the pair
    (both sides, keeping the alignment) and is counted. Empty lines drop the pair and are counted.
    """
    dropped = dropped if dropped is not None else Counter()
    src_lines, tgt_lines = (
        numbered_lines(read_lines(path, max_line_bytes), path) for path in (src_path, tgt_path)
    )
    for count, (src, tgt) in enumerate(zip_longest(src_lines, tgt_lines), 1):
        if src is None or tgt is None:
            longer_total = count + sum(1 for _ in (src_lines if tgt is None else tgt_lines))
            n_src, n_tgt = (longer_total, count - 1) if tgt is None else (count - 1, longer_total)
            raise DataError(
                f"line counts differ: {src_path} has {n_src} lines, {tgt_path} has {n_tgt}; "
                "the files must be aligned line by line"
            )
        errors = [item for _, item in (src, tgt) if isinstance(item, DataError)]
        if errors:
            if not skip_invalid:
                raise errors[0]
            dropped["invalid text"] += 1
            continue
        if _keep(src[1], tgt[1], dropped):
            yield src[1].strip(), tgt[1].strip()


def read_tsv(
    path: Path,
    dropped: Counter | None = None,
    skip_invalid: bool = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    column_names: str = "source, target",
) -> Iterator[Pair]:
    """Pairs from a file of `source<TAB>target` lines (exactly two columns; `column_names` names
    them in messages, e.g. "text, label")."""
    dropped = dropped if dropped is not None else Counter()
    for number, item in numbered_lines(read_lines(path, max_line_bytes), path):
        if isinstance(item, DataError):
            if not skip_invalid:
                raise item
            dropped["invalid text"] += 1
            continue
        if not item.strip():
            dropped["empty line"] += 1
            continue
        columns = item.split("\t")
        if len(columns) != 2:
            if not skip_invalid:
                raise DataError(
                    f"{path}:{number}: expected 2 tab-separated columns ({column_names}), found "
                    f"{len(columns)}; fix the row, or pass skip_invalid=True"
                )
            dropped["not two columns"] += 1
            continue
        if _keep(columns[0], columns[1], dropped):
            yield columns[0].strip(), columns[1].strip()


def read_text_files(
    paths: list[Path],
    dropped: Counter | None = None,
    skip_invalid: bool = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[Pair]:
    """The non-empty lines of plain text files, as ("", line) pairs: a language model's examples
    have no source side (see `vaswani.prepare.stages`)."""
    dropped = dropped if dropped is not None else Counter()
    for path in paths:
        for _, item in numbered_lines(read_lines(path, max_line_bytes), path):
            if isinstance(item, DataError):
                if not skip_invalid:
                    raise item
                dropped["invalid text"] += 1
            elif not item.strip():
                dropped["empty line"] += 1
            else:
                yield "", item.strip()


# --- splits --------------------------------------------------------------------------------------


def pair_digest(src: str, tgt: str) -> bytes:
    """A stable 16-byte fingerprint of a pair (the same in every process and Python version)."""
    return hashlib.blake2b(f"{src}\t{tgt}".encode(), digest_size=16).digest()


def split_of(digest: bytes, valid_fraction: float, test_fraction: float) -> str:
    """'train', 'valid' or 'test', from the pair's digest alone: adding data never moves a pair."""
    u = int.from_bytes(digest[:8], "big") / 2**64
    if u < test_fraction:
        return "test"
    if u < test_fraction + valid_fraction:
        return "valid"
    return "train"
