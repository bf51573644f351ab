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
"""

from __future__ import annotations

import codecs
import re
import struct
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

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
                    f"--max-line-bytes {limit:,}"
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
        if code[:1].isdigit():
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


def po_entries(
    lines: Iterator[tuple[str, str]], limit: int
) -> Iterator[tuple[dict[str, str], set[str], bool]]:
    """Each entry of a PO file's `lines` as its fields (msgctxt, msgid, msgid_plural, msgstr,
    msgstr[N]; continuation lines joined, each field at most `limit` characters), its flags
    (#, fuzzy) and whether it is obsolete (#~)."""
    fields: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    flags: set[str] = set()
    obsolete, key = False, None
    for where, line in lines:
        stripped = line.strip()
        content = stripped[2:].strip() if stripped.startswith("#~") else stripped
        comment = stripped.startswith("#") and not stripped.startswith("#~")
        starts_entry = comment or content.split(" ", 1)[0] in ("msgctxt", "msgid")
        if starts_entry and any(k.startswith("msgstr") for k in fields):
            yield {k: "".join(v) for k, v in fields.items()}, flags, obsolete
            fields, sizes, flags, obsolete, key = {}, {}, set(), False, None
        if stripped.startswith("#~"):  # an obsolete entry: its lines, commented out
            obsolete, stripped = True, stripped[2:].strip()
        elif stripped.startswith("#,"):
            flags.update(flag.strip() for flag in stripped[2:].split(","))
            continue
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith('"'):
            if key is None:
                raise DataError(f"{where}: a string outside any msgid/msgstr")
            part = po_string(stripped, where)
        else:
            key, _, rest = stripped.partition(" ")
            if key.split("[", 1)[0] not in KEYWORDS:
                raise DataError(f"{where}: expected msgctxt, msgid or msgstr, found {key[:40]!r}")
            fields[key], sizes[key], part = [], 0, po_string(rest, where)
        fields[key].append(part)  # joined once the entry is complete: linear, not quadratic
        sizes[key] += len(part)
        if sizes[key] > limit:
            raise DataError(f"{where}: a {key} longer than --max-line-bytes {limit:,}")
    if fields:
        yield {k: "".join(v) for k, v in fields.items()}, flags, obsolete


def read_po(path: Path, dropped: Counter, limit: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[Pair]:
    """The (msgid, msgstr) pairs of one PO file (plural forms paired as in `read_mo`); the
    header, fuzzy, obsolete and untranslated entries skipped and counted."""
    for fields, flags, obsolete in po_entries(po_lines(path, limit), limit):
        if "msgid" not in fields:
            raise DataError(f"{path}: an entry without msgid ({sorted(fields)})")
        if not fields["msgid"]:
            continue  # the header
        if obsolete:
            dropped["obsolete"] += 1
            continue
        if "fuzzy" in flags:
            dropped["fuzzy"] += 1
            continue
        sources = [fields["msgid"], *([fields["msgid_plural"]] if "msgid_plural" in fields else [])]
        targets = [fields.get("msgstr", "")] if "msgstr" in fields else []
        targets += [fields[f"msgstr[{n}]"] for n in range(len(fields)) if f"msgstr[{n}]" in fields]
        yield from message_pairs(sources, targets, dropped)


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
