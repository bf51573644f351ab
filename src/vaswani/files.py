"""Reading what a run directory, a dataset or a checkpoint names, by one rule.

Such directories are copied, downloaded and edited by hand, so nothing in them is trusted: a file
name written inside one (a manifest entry, a tokenizer named in data.json, the `latest` pointer)
must resolve to a regular file inside that same directory. `../x`, an absolute path, a symbolic link
that leads out, a FIFO or a device is refused in one line instead of being read, hashed or copied.
"""

from __future__ import annotations

import json
import os
import stat
import warnings
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
    root = directory.resolve()
    path = (directory / name).resolve()
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


def read_json(path: Path, what: str = "") -> Any:
    """The JSON content of `path`; a damaged, unreadable or non-UTF-8 file is one line naming it."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise DamagedFileError(f"{path}: not a regular file")
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DamagedFileError(
            f"{path}: damaged{f' {what}' if what else ''} (not valid JSON: {error})"
        ) from None


def read_records(path: Path) -> list[dict]:
    """The records of a JSON-lines log such as metrics.jsonl, each an object with an int "step".
    A line that does not parse (a run killed while appending leaves half a line) is dropped with a
    warning: a crash must never make a run unreadable or unresumable."""
    records = []
    for number, line in enumerate(Path(path).read_bytes().split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                raise ValueError("not a step record")
        except ValueError:
            warnings.warn(
                f"{path}:{number}: a damaged record (torn by a kill?), dropped", stacklevel=2
            )
            continue
        records.append(record)
    return records


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that readers see the old or the new content, never a mix."""
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    tmp.write_bytes(data)
    fsync(tmp)
    os.replace(tmp, path)
