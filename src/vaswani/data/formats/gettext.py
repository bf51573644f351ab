"""gettext catalogs: compiled MO files (the translations every Linux program installs).

A catalog maps a message (msgid, in the program's source language, usually English) to its
translation (msgstr). vaswani reads it as pairs (msgid, msgstr):
  - a message with a context (msgctxt) is stored as "context\\x04msgid"; the context is a label for
    translators, not text, so it is dropped;
  - a plural message holds "singular\\x00plural" and one translation per plural form; the singular
    pairs with the first form and the plural with the second (when the catalog has one);
  - the header (empty msgid) and untranslated messages (empty msgstr) are skipped and counted.
MO files hold no fuzzy or obsolete entries: msgfmt leaves them out.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from vaswani.data.corpora import DataError, Pair

MAGIC_LE = 0x950412DE
CONTEXT_SEPARATOR = "\x04"


def _charset(header: str) -> str:
    """The charset a catalog's header declares (Content-Type: text/plain; charset=UTF-8)."""
    for line in header.split("\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-type" and "charset=" in value:
            return value.split("charset=", 1)[1].strip() or "utf-8"
    return "utf-8"


def mo_entries(path: Path) -> Iterator[tuple[bytes, bytes, int]]:
    """(msgid bytes, msgstr bytes, offset of the msgid) of every entry of the MO file `path`, in
    file order. A file that is not an MO catalog, or is cut short, is a DataError naming the
    offset."""
    data = Path(path).read_bytes()
    if len(data) < 20:
        raise DataError(f"{path}: not an MO catalog ({len(data)} bytes, shorter than its header)")
    for order in ("<", ">"):
        if struct.unpack_from(order + "I", data, 0)[0] == MAGIC_LE:
            break
    else:
        raise DataError(f"{path}: not an MO catalog (no gettext magic number at offset 0)")
    _, count, ids_at, strs_at = struct.unpack_from(order + "4I", data, 4)
    table_end = max(ids_at, strs_at) + 8 * count
    if table_end > len(data):
        raise DataError(
            f"{path}: truncated MO catalog: its tables of {count} entries end at byte {table_end}, "
            f"the file at {len(data)}"
        )
    for i in range(count):
        id_len, id_at = struct.unpack_from(order + "2I", data, ids_at + 8 * i)
        str_len, str_at = struct.unpack_from(order + "2I", data, strs_at + 8 * i)
        for length, at in ((id_len, id_at), (str_len, str_at)):
            if at + length > len(data):
                raise DataError(
                    f"{path}: truncated MO catalog: entry {i} points to bytes {at}..{at + length}, "
                    f"the file ends at {len(data)}"
                )
        yield data[id_at : id_at + id_len], data[str_at : str_at + str_len], id_at


def read_mo(path: Path, dropped: Counter) -> Iterator[Pair]:
    """The (msgid, msgstr) pairs of one MO catalog; skipped entries counted in `dropped`."""
    charset = "utf-8"
    for raw_id, raw_str, offset in mo_entries(path):
        if not raw_id:  # the header: metadata, not a message
            charset = _charset(raw_str.decode("ascii", "replace"))
            continue
        try:
            msgid, msgstr = raw_id.decode(charset), raw_str.decode(charset)
        except (UnicodeDecodeError, LookupError) as error:
            raise DataError(
                f"{path}: entry at byte offset {offset} is not valid {charset} ({error}); "
                "the catalog's declared charset is wrong"
            ) from None
        if CONTEXT_SEPARATOR in msgid:
            msgid = msgid.split(CONTEXT_SEPARATOR, 1)[1]
        sources, targets = msgid.split("\x00"), msgstr.split("\x00")
        if not any(targets):
            dropped["untranslated"] += 1
            continue
        for source, target in zip(sources, targets, strict=False):
            if target:
                yield source, target


def catalogs(path: Path, suffix: str) -> list[Path]:
    """`path` itself, or every file ending in `suffix` under the directory `path`, sorted (so
    that the corpus, and so the prepared data, does not depend on directory order)."""
    path = Path(path)
    if path.is_dir():
        found = sorted(p for p in path.rglob(f"*{suffix}") if p.is_file())
        if not found:
            raise DataError(f"{path}: a directory without any {suffix} file")
        return found
    return [path]
