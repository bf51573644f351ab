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

ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b",
           "f": "\f", "v": "\v", "?": "?", "'": "'"}  # fmt: skip
KEYWORDS = ("msgctxt", "msgid_plural", "msgid", "msgstr")


def po_string(text: str, where: str) -> str:
    """The value of one quoted PO string ("a\\tb" -> a<TAB>b), C escapes decoded; an unclosed
    string or an unknown escape is a DataError at `where` (file:line)."""
    text = text.strip()
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise DataError(f"{where}: expected a quoted string, found {text[:40]!r}")
    out, i, body = [], 0, text[1:-1]
    while i < len(body):
        char = body[i]
        if char == '"':
            raise DataError(f"{where}: an unescaped quote inside a string")
        if char != "\\":
            out.append(char)
            i += 1
            continue
        code = body[i + 1 : i + 2]
        if code in ESCAPES:
            out.append(ESCAPES[code])
            i += 2
        elif code.isdigit() and code < "8":  # octal, up to three digits
            digits = body[i + 1 : i + 4]
            digits = digits[: len(digits) - len(digits.lstrip("01234567"))] or digits[:1]
            out.append(chr(int(digits, 8)))
            i += 1 + len(digits)
        elif code == "x" and body[i + 2 : i + 4].strip("0123456789abcdefABCDEF") == "":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        else:
            raise DataError(f"{where}: bad escape \\{code or '(end of string)'} in a string")
    return "".join(out)


def po_entries(path: Path, text: str) -> Iterator[tuple[dict[str, str], set[str], bool]]:
    """Each entry of PO `text` as its fields (msgctxt, msgid, msgid_plural, msgstr, msgstr[N];
    continuation lines joined), its flags (#, fuzzy) and whether it is obsolete (#~)."""
    fields: dict[str, str] = {}
    flags: set[str] = set()
    obsolete, key = False, None
    for number, line in enumerate(text.split("\n"), 1):
        where, stripped = f"{path}:{number}", line.strip()
        content = stripped[2:].strip() if stripped.startswith("#~") else stripped
        comment = stripped.startswith("#") and not stripped.startswith("#~")
        starts_entry = comment or content.split(" ", 1)[0] in ("msgctxt", "msgid")
        if starts_entry and any(k.startswith("msgstr") for k in fields):
            yield fields, flags, obsolete  # the entry before is complete
            fields, flags, obsolete, key = {}, set(), False, None
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
            fields[key] += po_string(stripped, where)
            continue
        word, _, rest = stripped.partition(" ")
        if word.split("[", 1)[0] not in KEYWORDS:
            raise DataError(f"{where}: expected msgctxt, msgid or msgstr, found {word[:40]!r}")
        key = word
        fields[key] = po_string(rest, where)
    if fields:
        yield fields, flags, obsolete


def read_po(path: Path, dropped: Counter) -> Iterator[Pair]:
    """The (msgid, msgstr) pairs of one PO file (plural forms paired as in `read_mo`); the
    header, fuzzy, obsolete and untranslated entries skipped and counted."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise DataError(
            f"{path}:{line}: not UTF-8 at byte {error.start}; convert the catalog "
            "(msgconv --to-code=UTF-8)"
        ) from None
    for fields, flags, obsolete in po_entries(path, text):
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
        found = sorted(p for p in path.rglob(f"*{suffix}") if p.is_file())
        if not found:
            raise DataError(f"{path}: a directory without any {suffix} file")
        return found
    return [path]
