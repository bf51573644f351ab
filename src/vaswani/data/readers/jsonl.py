"""JSON lines: one object a line, {"src": ..., "tgt": ...} or named fields (`--fields de,en`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from vaswani.data.corpora import DataError, Pair, numbered_lines, read_lines


def read_jsonl(
    path: Path,
    dropped: Counter,
    fields: tuple[str, str] = ("src", "tgt"),
    skip_invalid: bool = False,
    max_line_bytes: int = 1 << 20,
) -> Iterator[Pair]:
    """(object[fields[0]], object[fields[1]]) of each line; a line that is not a JSON object with
    both fields as strings is an error naming the file and line, or with `skip_invalid` dropped
    and counted."""
    for number, item in numbered_lines(read_lines(path, max_line_bytes), path):
        problem = item if isinstance(item, DataError) else None
        if problem is None and not item.strip():
            dropped["empty line"] += 1
            continue
        if problem is None:
            problem = pair_of(item, fields, f"{path}:{number}")
        if isinstance(problem, DataError):
            if not skip_invalid:
                raise problem
            dropped["invalid line"] += 1
            continue
        source, target = problem
        if source.strip() and target.strip():
            yield source.strip(), target.strip()
        else:
            dropped["empty side"] += 1


def pair_of(line: str, fields: tuple[str, str], where: str) -> Pair | DataError:
    """The two fields of one JSON line, or the DataError saying what is wrong with it."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as error:  # ValueError: also a 5,000-digit number
        return DataError(f"{where}: not a JSON object ({error}); fix it, or pass skip_invalid=True")
    if not isinstance(record, dict):
        return DataError(f"{where}: a JSON {type(record).__name__}, not an object")
    values = [record.get(name) for name in fields]
    for name, value in zip(fields, values, strict=True):
        if not isinstance(value, str):
            have = ", ".join(sorted(map(str, record))[:8]) or "none"
            return DataError(
                f"{where}: field {name!r} is {'missing' if value is None else 'not a string'} "
                f"(fields: {have}); name the two with fields=SRC,TGT"
            )
    return values[0], values[1]
