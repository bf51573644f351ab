"""gettext catalogs: PO sources and compiled MO files (the translations every Linux program
installs).

A catalog maps a message (msgid, in the program's source language, usually English) to its
translation (msgstr). vaswani reads it as pairs (msgid, msgstr):
  - a message with a context (msgctxt) is stored as "context\\x04msgid"; the context is a label for
    translators, not text, so it is dropped;
  - a plural message holds "singular\\x00plural" and one translation per plural form; the singular
    pairs with the first form and the plural with the second (when the catalog has one);
  - the header (empty msgid) and untranslated messages (empty msgstr) are skipped and counted.
A PO file also holds fuzzy entries (a guess awaiting review) and obsolete ones (#~): both are
skipped and counted. MO files hold neither: msgfmt leaves them out.

A PO file is read by polib, for corpora and for documents (`vaswani.documents.po`) alike, once each
of its lines has passed `check_po` (keywords, quoted strings, C's escapes decoded as gettext does,
a field's length): `read_catalog` is the one PO reader.
"""

from __future__ import annotations

import codecs
import re
import struct
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from vaswani.data.corpora import (
    BOM,
    DEFAULT_MAX_LINE_BYTES,
    DataError,
    Pair,
    open_binary,
    read_lines,
    walk_files,
)
from vaswani.safe_io import regular_file

if TYPE_CHECKING:
    import polib

MAGIC_LE = 0x950412DE
CONTEXT_SEPARATOR = "\x04"


def _charset(header: str) -> str:
    """The charset a catalog's header declares (Content-Type: text/plain; charset=UTF-8)."""
    for line in header.split("\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-type" and "charset=" in value:
            return value.split("charset=", 1)[1].strip() or "utf-8"
    return "utf-8"


MAX_MO_BYTES = 1 << 30  # 1 GiB: LibreOffice's largest catalog is under 1 MB


def mo_bytes(path: Path) -> bytes:
    """The bytes of an MO catalog (through gzip), refused past MAX_MO_BYTES: /dev/zero or a
    gzip bomb is one line, not a MemoryError."""
    with open_binary(regular_file(path, "MO catalog")) as handle:
        try:
            data = handle.read(MAX_MO_BYTES + 1)
        except (OSError, EOFError, zlib.error) as error:
            raise DataError(f"{path}: cannot read the catalog ({error})") from None
    if len(data) > MAX_MO_BYTES:
        raise DataError(f"{path}: larger than {MAX_MO_BYTES:,} bytes, not an MO catalog")
    return data


def mo_entries(
    path: Path, limit: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[tuple[bytes, bytes, int]]:
    """(msgid bytes, msgstr bytes, offset of the msgid) of every entry of the MO file `path`, in
    file order. A file that is not an MO catalog, is cut short, or holds a string longer than
    `limit` bytes is a DataError naming the offset."""
    data = mo_bytes(path)
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
            if length > limit:
                raise DataError(
                    f"{path}: entry {i} at byte {at} holds {length:,} bytes, more than "
                    f"max_line_bytes={limit:,}"
                )
            if at + length > len(data):
                raise DataError(
                    f"{path}: truncated MO catalog: entry {i} points to bytes {at}..{at + length}, "
                    f"the file ends at {len(data)}"
                )
        yield data[id_at : id_at + id_len], data[str_at : str_at + str_len], id_at


def text_charset(name: str, path: Path) -> str:
    """The codec of a catalog's declared charset; one that is unknown, or not a text encoding
    of bytes (punycode, idna, rot13), is a DataError."""
    try:
        codec = codecs.lookup(name)
    except LookupError:
        raise DataError(f"{path}: declares the unknown charset {name!r}") from None
    if codec.name in ("punycode", "idna") or not getattr(codec, "_is_text_encoding", True):
        raise DataError(f"{path}: declares the charset {name!r}, which is not a text encoding")
    return codec.name


def read_mo(path: Path, dropped: Counter, limit: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[Pair]:
    """The (msgid, msgstr) pairs of one MO catalog; skipped entries counted in `dropped`."""
    charset = codec = "utf-8"
    for raw_id, raw_str, offset in mo_entries(path, limit):
        if not raw_id:  # the header: metadata, not a message
            charset = _charset(raw_str.decode("ascii", "replace"))
            codec = text_charset(charset, path)
            continue
        try:
            msgid, msgstr = raw_id.decode(codec), raw_str.decode(codec)
        except (UnicodeError, LookupError) as error:
            raise DataError(
                f"{path}: entry at byte offset {offset} is not valid {charset} ({error}); "
                "the catalog's declared charset is wrong"
            ) from None
        if CONTEXT_SEPARATOR in msgid:
            msgid = msgid.split(CONTEXT_SEPARATOR, 1)[1]
        yield from message_pairs(msgid.split("\x00"), msgstr.split("\x00"), dropped)


def message_pairs(sources: list[str], targets: list[str], dropped: Counter) -> Iterator[Pair]:
    """The pairs of one message: singular with the first form, plural with the second; a message
    without any translation is counted as untranslated."""
    if not any(targets):
        dropped["untranslated"] += 1
        return
    for source, target in zip(sources, targets, strict=False):
        if target:
            yield source, target


# --- PO ---------------------------------------------------------------------------------------

ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    '"': '"',
    "\\": "\\",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "?": "?",
    "'": "'",
}
KEYWORDS = ("msgctxt", "msgid_plural", "msgid", "msgstr")


ESCAPE = re.compile(r'\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.?)|"', re.DOTALL)


def po_string(text: str, where: str) -> str:
    """The value of one quoted PO string ("a\\tb" -> a<TAB>b), C escapes decoded in linear time;
    an unclosed string or an unknown escape is a DataError at `where` (file:line)."""
    text = text.strip()
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise DataError(f"{where}: expected a quoted string, found {text[:40]!r}")

    def unescape(found: re.Match) -> str:
        code = found.group(1)
        if code is None:
            raise DataError(f"{where}: an unescaped quote inside a string")
        if code in ESCAPES:
            return ESCAPES[code]
        if code[:1] in tuple("01234567"):  # \8 and \9 are no octal escape
            return chr(int(code, 8))
        if code[:1] == "x" and len(code) > 1:
            return chr(int(code[1:], 16))
        raise DataError(f"{where}: bad escape \\{code or '(end of string)'} in a string")

    return ESCAPE.sub(unescape, text[1:-1])


def po_lines(path: Path, limit: int) -> Iterator[tuple[str, str]]:
    """("file:line", text) of each line of a PO file (through gzip), streamed; a line longer than
    `limit` bytes or not UTF-8 is a DataError naming the line."""
    for number, raw in enumerate(read_lines(regular_file(path, "PO catalog"), limit), 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DataError(
                f"{path}:{number}: not UTF-8 at byte {error.start} of the line; convert the "
                "catalog (msgconv --to-code=UTF-8)"
            ) from None
        yield f"{path}:{number}", text.removeprefix(BOM) if number == 1 else text


POLIB_ESCAPES = str.maketrans(
    {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\v": "\\v", "\b": "\\b", "\f": "\\f"}
    | {'"': '\\"'}
)
"""The escapes polib reads back exactly. It reads C's others (\a, \0, \x41, ...) as a backslash
and a letter, and would write that back doubled: the check hands it each string decoded and
escaped in this set, so that an entry holds the text gettext means."""
UNREADABLE = "\x1c\x1d\x1e\x85\u2028\u2029"
"""Characters polib's reader takes for line breaks (str.splitlines): inside a string they would
cut the entry."""


def check_po(lines: Iterable[tuple[str, str]], limit: int) -> list[str]:
    """The lines of a PO file (("file:line", text) each) once each has passed the checks a catalog
    from anywhere must pass before polib reads it, with its strings in the escapes polib reads
    exactly (`POLIB_ESCAPES`): a keyword (msgctxt, msgid, msgid_plural, msgstr, msgstr[N]) and a
    quoted string with C's escapes, or a comment, or a continuation string of a field; each field
    at most `limit` characters. polib itself reads some broken lines without a word."""
    kept: list[str] = []
    key, size = None, 0
    for where, line in lines:
        stripped = line.strip()
        lead = "#~ " if stripped.startswith("#~") else ""
        if lead:  # an obsolete entry: its lines, commented out
            stripped = stripped[2:].strip()
        if not stripped or stripped.startswith("#"):
            key = key if not stripped else None  # a comment starts an entry
            kept.append(line)
            continue
        if stripped.startswith('"'):
            if key is None:
                raise DataError(f"{where}: a string outside any msgid/msgstr")
            head, part = "", po_string(stripped, where)
        else:
            key, _, rest = stripped.partition(" ")
            if key.split("[", 1)[0] not in KEYWORDS:
                raise DataError(f"{where}: expected msgctxt, msgid or msgstr, found {key[:40]!r}")
            head, size, part = f"{key} ", 0, po_string(rest, where)
        size += len(part)
        if size > limit:
            raise DataError(f"{where}: a {key} longer than max_line_bytes={limit:,}")
        odd = next((c for c in part if c in UNREADABLE), None)
        if odd is not None:
            raise DataError(f"{where}: U+{ord(odd):04X} inside a string, which polib cannot read")
        if "\x04" in part:
            raise DataError(f"{where}: U+0004 inside a string: gettext's context separator")
        kept.append(f'{lead}{head}"{part.translate(POLIB_ESCAPES)}"')
    return kept


def read_catalog(lines: Iterable[tuple[str, str]], name: str, limit: int) -> polib.POFile:
    """A PO catalog read by polib (comments, flags, contexts and plural forms kept, for writing it
    back) once its lines pass `check_po`: the one PO reader of corpora and documents."""
    import polib

    text = "\n".join(check_po(lines, limit)) + "\n"
    try:
        return polib.pofile(text, wrapwidth=0)
    except (OSError, ValueError, UnicodeError) as error:  # polib's syntax errors are OSErrors
        raise DataError(f"{name}: not a valid PO file ({error})") from None


MAX_PO_BYTES = 256 << 20
"""polib reads a catalog whole: a PO file over this is refused (LibreOffice's largest is under
1 MB; 256 MiB holds millions of messages)."""


def po_catalog(path: Path, limit: int) -> polib.POFile:
    """One PO file (through gzip) as polib's catalog, its lines checked as they are read."""

    def bounded() -> Iterator[tuple[str, str]]:
        total = 0
        for where, text in po_lines(path, limit):
            total += len(text) + 1
            if total > MAX_PO_BYTES:
                raise DataError(f"{path}: over {MAX_PO_BYTES >> 20} MiB of PO; split the catalog")
            yield where, text

    return read_catalog(bounded(), str(path), limit)


def read_po(path: Path, dropped: Counter, limit: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[Pair]:
    """The (msgid, msgstr) pairs of one PO file (plural forms paired as in `read_mo`); the
    header, fuzzy, obsolete and untranslated entries skipped and counted."""
    for entry in po_catalog(path, limit):
        if not entry.msgid:
            continue  # a header
        if entry.obsolete:
            dropped["obsolete"] += 1
            continue
        if "fuzzy" in entry.flags:
            dropped["fuzzy"] += 1
            continue
        sources = [entry.msgid, *([entry.msgid_plural] if entry.msgid_plural else [])]
        forms = entry.msgstr_plural if entry.msgid_plural else {0: entry.msgstr}
        yield from message_pairs(sources, [forms[k] for k in sorted(forms)], dropped)


def catalogs(path: Path, suffix: str) -> list[Path]:
    """`path` itself, or every file ending in `suffix` under the directory `path`, sorted (so
    that the corpus, and so the prepared data, does not depend on directory order)."""
    path = Path(path)
    if path.is_dir():
        found = sorted(p for p in walk_files(path) if p.name.endswith(suffix))
        if not found:
            raise DataError(f"{path}: a directory without any {suffix} file")
        return found
    return [path]
