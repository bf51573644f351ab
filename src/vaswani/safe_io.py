"""Reading what a run directory, a dataset or a checkpoint names, by one rule.

Such directories are copied, downloaded and edited by hand, so nothing in them is trusted: a file
name written inside one (a manifest entry, a tokenizer named in data.json, the `latest` pointer)
must resolve to a regular file inside that same directory. `../x`, an absolute path, a symbolic link
that leads out, a FIFO or a device is refused in one line instead of being read, hashed or copied.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from vaswani.errors import VaswaniError


class UnsafeFileError(VaswaniError, ValueError):
    """A file named inside a directory that points elsewhere, or is not a regular file."""


class DamagedFileError(VaswaniError, ValueError):
    """A file vaswani wrote that can no longer be read as what it was."""


def member(directory: Path, name: Any, what: str) -> Path:
    """The path of file `name` inside `directory`, after checking that it stays inside it (links
    resolved) and is a regular file. `what` names the record that gave the name, for the error."""
    directory = Path(directory)
    if not isinstance(name, str) or not name or "\x00" in name:
        raise UnsafeFileError(f"{what} names {name!r}, which is not a file name")
    try:
        root = directory.resolve()
        path = (directory / name).resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symbolic link loop, before Python 3.13
        raise UnsafeFileError(
            f"{what} names {name!r}, but {directory / name} is a loop of symbolic links"
        ) from None
    if Path(name).is_absolute() or not path.is_relative_to(root):
        raise UnsafeFileError(
            f"{what} names {name!r}, outside {directory}; refusing to read it (a file named in a "
            "run or data directory must be inside it)"
        )
    try:
        mode = path.stat().st_mode
    except OSError:
        raise UnsafeFileError(f"{what} names {name!r}, but {directory / name} is missing") from None
    if not stat.S_ISREG(mode):
        raise UnsafeFileError(
            f"{what} names {name!r}, but {directory / name} is not a regular file"
        )
    return path


def regular_file(path: Path, what: str = "file") -> Path:
    """`path`, after checking that it can be opened as a regular file: a missing file, a loop of
    symbolic links, a directory, a FIFO or a device is one line naming it."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except OSError as error:
        reason = "a loop of symbolic links" if error.errno == errno.ELOOP else error.strerror
        raise DamagedFileError(f"{path}: cannot read the {what}: {reason}") from None
    if not stat.S_ISREG(mode):
        raise DamagedFileError(f"{path}: the {what} is not a regular file")
    return path


MAX_TEXT_BYTES = 1 << 30
"""The most bytes of a text file read whole (an evaluation split, the language pairs of a split)."""
MAX_JSON_BYTES = 64 << 20
"""The most bytes of a JSON file read whole (meta.json, a manifest, decoding.json)."""


def read_bounded(path: Path, limit: int, what: str = "file") -> bytes:
    """The bytes of `path`, read as a stream and refused past `limit`: what a file holds is
    judged by what is read, never by what `stat` says (a sparse file, a pipe, /dev/zero)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        reason = "a loop of symbolic links" if error.errno == errno.ELOOP else error.strerror
        raise DamagedFileError(f"{path}: cannot read the {what}: {reason}") from None
    if len(data) > limit:
        raise DamagedFileError(
            f"{path}: the {what} is over {limit:,} bytes, the most vaswani reads of one"
        )
    return data


def read_text(path: Path, what: str = "file", limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a file vaswani wrote (a split of a data directory, a pointer): a byte
    that is not UTF-8 is one line naming the file, the line and the byte offset; a file over
    `limit` bytes is refused."""
    data = read_bounded(regular_file(path, what), limit, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise DamagedFileError(
            f"{path}:{line}: damaged {what}: not UTF-8 at byte {error.start}"
        ) from None


def read_json(
    path: Path,
    what: str = "",
    kind: type | None = None,
    keys: Mapping[str, type] | None = None,
    limit: int = MAX_JSON_BYTES,
) -> Any:
    """The JSON content of a file named inside a run, data, checkpoint or model directory. A
    missing or non-regular file, text that is not UTF-8 or not JSON, a top level that is not a
    `kind` (dict, list), or a key of `keys` missing or not of its type is one line naming the
    file, where and what."""
    what = what or "JSON file"
    text = read_text(path, what, limit)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DamagedFileError(
            f"{path}:{error.lineno}:{error.colno}: damaged {what} (not valid JSON: {error.msg})"
        ) from None
    except RecursionError:
        raise DamagedFileError(f"{path}: damaged {what} (JSON nested too deeply)") from None
    if kind is not None and not isinstance(data, kind):
        raise DamagedFileError(
            f"{path}: damaged {what}: expected a JSON {json_name(kind)}, "
            f"found {json_name(type(data))}"
        )
    return check_keys(data, path, what, keys or {})


def check_keys(data: dict, path: Path, what: str, keys: Mapping[str, type]) -> dict:
    """`data` (read from `path`) after checking that each key of `keys` is there with its type."""
    for key, expected in keys.items():
        if key not in data:
            raise DamagedFileError(f"{path}: damaged {what}: no {key!r}")
        if not isinstance(data[key], expected) or isinstance(data[key], bool) != (expected is bool):
            raise DamagedFileError(
                f"{path}: damaged {what}: {key!r} should be a JSON {json_name(expected)}, "
                f"found {json_name(type(data[key]))}"
            )
    return data


def json_name(kind: type) -> str:
    names = {
        dict: "object",
        list: "array",
        str: "string",
        int: "number",
        float: "number",
        bool: "boolean",
        type(None): "null",
    }
    return names.get(kind, kind.__name__)


MAX_RECORD_BYTES = 1 << 20  # one line of metrics.jsonl is ~300 bytes
MAX_LOG_BYTES = 1 << 30  # a million logged steps make ~300 MB


def is_number(value: Any) -> bool:
    """A JSON number a figure can be (not a bool, not an int too large for a float)."""
    return isinstance(value, float) or (
        isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63
    )


def record_of(line: bytes) -> dict | None:
    """One JSON-lines record with an int "step" and numbers a float can hold, or None."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # torn by a kill, nested 100,000 deep, 5,000 digits
        return None
    step = record.get("step") if isinstance(record, dict) else None
    if not (is_number(step) and isinstance(step, int) and step >= 0):
        return None
    numbers = [v for v in record.values() if isinstance(v, int | float) and not is_number(v)]
    return None if numbers else record


def read_records(path: Path) -> list[dict]:
    """The records of a JSON-lines log such as metrics.jsonl, each an object with an int "step".
    A line that does not parse (a run killed while appending leaves half a line), is too long or
    holds a number no float can is dropped with one warning: a crash or a damaged line must never
    make a run unreadable or unresumable. A file larger than any run writes is ignored."""
    path = Path(path)
    if regular_file(path, "log").stat().st_size > MAX_LOG_BYTES:
        warnings.warn(f"{path}: larger than {MAX_LOG_BYTES:,} bytes, ignored", stacklevel=2)
        return []
    records, damaged = [], []
    with open(path, "rb") as handle:
        for number, line in enumerate(iter(lambda: handle.readline(MAX_RECORD_BYTES + 1), b""), 1):
            if len(line) > MAX_RECORD_BYTES:  # skip the rest of an over-long line
                while line and not line.endswith(b"\n"):
                    line = handle.readline(MAX_RECORD_BYTES)
                damaged.append(number)
                continue
            if not line.strip():
                continue
            record = record_of(line)
            if record is None:
                damaged.append(number)
            else:
                records.append(record)
    if damaged:
        warnings.warn(
            f"{path}:{damaged[0]}: {len(damaged)} damaged record(s) dropped (torn by a kill?)",
            stacklevel=2,
        )
    return records


def not_a_link(path: Path, what: str = "file") -> Path:
    """`path`, after checking that it is not a symbolic link: vaswani never writes through one
    inside a run, data or output directory (a link planted there would lead the write elsewhere)."""
    path = Path(path)
    if path.is_symlink():
        raise UnsafeFileError(
            f"{path}: the {what} is a symbolic link; vaswani does not write through links in a run, "
            "data or output directory (remove the link)"
        )
    return path


def inner_directory(path: Path, what: str = "directory") -> Path:
    """The directory `path` inside a run or data directory, created if missing; a symbolic link
    there (to a directory elsewhere) is refused rather than written into."""
    not_a_link(path, what).mkdir(parents=True, exist_ok=True)
    return path


def open_no_follow(path: Path, flags: int) -> int:
    """os.open(path, flags) that refuses a final symbolic link (O_NOFOLLOW) in one line."""
    try:
        return os.open(
            path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o666
        )
    except OSError as error:
        if error.errno == errno.ELOOP or Path(path).is_symlink():
            not_a_link(path)
        raise


def append_record(path: Path, record: dict) -> None:
    """One line of a JSON-lines log such as metrics.jsonl (NaN is written as NaN: visible, never
    dropped); `read_records` reads them back. A link at `path` is refused, never followed."""
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    fd = open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "ab") as handle:
        handle.write(line)


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that readers see the old or the new content, never a mix."""
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    if tmp.is_symlink():
        tmp.unlink()  # a leftover of this name is never written through
    fd = open_no_follow(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)  # replaces a link at `path` itself, never what it points to


def write_output(path: Path, data: bytes) -> None:
    """Write a command's output at `path`: a new or regular file is replaced whole (readers see
    the old or the new, never a mix); this process's own stdout or stderr (`/dev/stdout`), a
    character device (`/dev/null`) or a FIFO is written into, never replaced; anything else that
    exists there (a socket, a block device) is refused."""
    path = Path(path)
    try:
        found = path.stat()  # through links: /dev/stdout leads to /proc/self/fd/1
    except OSError:
        found = None
    if found is not None and not stat.S_ISREG(found.st_mode):
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                if os.path.samestat(found, os.fstat(fd)):
                    stream = (sys.stdout if fd == 1 else sys.stderr).buffer
                    stream.write(data)
                    stream.flush()
                    return
        if not (stat.S_ISCHR(found.st_mode) or stat.S_ISFIFO(found.st_mode)):
            raise UnsafeFileError(
                f"{path}: not a regular file, a device or a pipe; write elsewhere"
            )
        with open(path, "wb") as handle:  # a device or a pipe: written into as it is
            handle.write(data)
        return
    write_atomic(path, data)


def overlap(output: Path, reads: Mapping[str, Path]) -> str | None:
    """The name of what `output` would write over among `reads` (a thing read: "--input a.txt",
    "the dataset"), or None: an output that is a path read, is inside a directory read, or is a
    directory that holds one (it would be replaced) overlaps it."""
    try:
        out = Path(output).resolve()
        for name, path in reads.items():
            read = Path(path).resolve()
            if out == read or out.is_relative_to(read) or read.is_relative_to(out):
                return name
    except (OSError, RuntimeError):  # a loop of links: refused elsewhere
        return None
    return None


@contextlib.contextmanager
def built_in_place(out: Path) -> Iterator[Path]:
    """A fresh work directory beside `out` to build a directory in (a dataset): when the block
    ends it takes the place of `out` at once (an `out` there is replaced), or, on an error, it is
    removed and `out` is left as it was."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        yield work
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            out.rename(old)
            work.rename(out)
            shutil.rmtree(old)
        else:
            work.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def sqlite_transaction(path: Path, immediate: bool = False) -> Iterator[Any]:
    """A connection to the SQLite file `path` whose statements are one transaction, committed or
    rolled back, then closed; a database another process holds is waited on for up to 10 s. With
    `immediate` the transaction takes the write lock at its first statement, so that a
    read-then-write cannot interleave with another process'."""
    import sqlite3

    db = sqlite3.connect(path, timeout=10.0, isolation_level="IMMEDIATE" if immediate else "")
    try:
        with db:
            yield db
    finally:
        db.close()
