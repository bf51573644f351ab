"""Java .properties and Apple .strings: key = value files, read by their own small grammars
(both are a few rules) and rewritten by splicing (`vaswani.documents.resources`), so that keys,
comments, order, blank lines and the values' own escapes stay byte for byte.

.properties: logical lines (a trailing backslash continues one), `#` and `!` comments, `key =
value`, `key: value` or `key value`; Java's escapes (`\\uXXXX`, `\\n`, `\\t`...). A file that is
not UTF-8 is ISO-8859-1 (Java's default before 9), and one written in ASCII is written so again
(`\\uXXXX` escapes: Java 8 reads a .properties file as ISO-8859-1). A value with a MessageFormat argument (`{0}`) doubles its apostrophes, as
MessageFormat reads them.

.strings: `"key" = "value";` (or an unquoted key), C and line comments; UTF-8 or UTF-16 (by its
byte-order mark, as Xcode writes older files), written back in its encoding. Its code is
printf's with Apple's `%@`.
"""

from __future__ import annotations

import codecs
import re

from vaswani.documents.formats import DocumentError, DocumentOptions, OtherFile, decoded, paired
from vaswani.documents.resources import APPLE, Spliced, Value
from vaswani.documents.spans import DEFAULT, Protection

PROPERTIES = Protection(DEFAULT | {"brace", "messageformat", "printf-prose"})
_JAVA_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_JAVA_WRITTEN = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}
_ARGUMENT = re.compile(r"\{\d+[,}]")


def java_unescaped(raw: str) -> str:
    """A .properties value as Java reads it: escapes decoded, a line continued by a backslash
    joined without the next line's leading white space."""
    out, k = [], 0
    while k < len(raw):
        char = raw[k]
        if char != "\\":
            out.append(char)
            k += 1
            continue
        if k + 1 == len(raw):  # a line continued past the end of the file: Java drops it
            break
        nxt = raw[k + 1]
        if nxt == "u" and re.fullmatch(r"[\da-fA-F]{4}", raw[k + 2 : k + 6]):
            out.append(chr(int(raw[k + 2 : k + 6], 16)))
            k += 6
        elif nxt in "\r\n":
            k += 2 + (raw[k + 1 : k + 3] == "\r\n")
            while k < len(raw) and raw[k] in " \t\f":
                k += 1
        elif nxt == "u":
            raise ValueError(f"\\u{raw[k + 2 : k + 6]}: not four hexadecimal digits")
        else:
            out.append(_JAVA_ESCAPES.get(nxt, nxt))
            k += 2
    return paired("".join(out))


def java_escaped(text: str, below: int | None) -> str:
    """A value written as .properties writes it: backslashes and control characters escaped,
    a leading space kept by `\\ `, characters from `below` on (128 where the file is ASCII,
    256 where it is ISO-8859-1) as `\\uXXXX`."""
    out = "".join(_JAVA_WRITTEN.get(c, c) for c in text)
    if out.startswith(" "):
        out = "\\" + out
    if below is not None:
        out = "".join(
            c if ord(c) < below else "".join(f"\\u{u:04x}" for u in _utf16(c)) for c in out
        )
    return out


def _utf16(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [int.from_bytes(data[k : k + 2], "big") for k in range(0, len(data), 2)]


def read_properties(data: bytes, name: str, options: DocumentOptions) -> Spliced:
    try:
        text, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = data.decode("iso-8859-1"), "iso-8859-1"
    # ASCII stays ASCII, as Java 8's Properties.load(InputStream) reads ISO-8859-1; a file with
    # UTF-8 characters of its own stays UTF-8 (Java 9's resource bundles)
    below = 128 if text.isascii() else None if encoding == "utf-8" else 256
    values = []
    for start, end in _logical_lines(text):
        line = text[start:end]
        body = line.lstrip(" \t\f\ufeff")  # a byte-order mark is no key
        if not body or body[0] in "#!":
            continue
        key = re.match(r"(?:\\.|[^\s=:\\])*", body, re.S)
        at = start + (len(line) - len(body)) + key.end()
        separator = re.compile(r"[ \t\f]*[=:]?[ \t\f]*").match(text, at, end)
        raw = text[separator.end() : end]
        try:
            value = java_unescaped(raw)
        except ValueError as error:  # Java's Properties.load refuses it too
            line = text.count("\n", 0, start) + 1
            raise DocumentError(f"{name}:{line}: {error} (Java reads no such escape)") from None
        if not value.strip():
            continue
        quoted = bool(_ARGUMENT.search(value))  # read by MessageFormat: '' is one apostrophe
        if quoted:
            value = value.replace("''", "'")

        def write(translation: str, quoted: bool = quoted) -> str:
            if quoted:  # each apostrophe doubled, as MessageFormat reads them
                translation = translation.replace("'", "''")
            return java_escaped(translation, below)

        values.append(Value(separator.end(), end, value, write, PROPERTIES))
    return Spliced(text, values, lambda out: out.encode(encoding))


def _logical_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each logical line: physical lines joined where one ends in an odd number
    of backslashes (end excludes the line break)."""
    found, start = [], 0
    lines = re.finditer(r"[^\r\n]*(\r\n|\r|\n|$)", text)
    for match in lines:
        if match.start() == len(text) and not match.group():
            break
        body_end = match.end() - len(match.group(1))
        trailing = len(text[match.start() : body_end]) - len(
            text[match.start() : body_end].rstrip("\\")
        )
        if trailing % 2 == 1 and match.group(1):
            continue  # continued on the next line
        found.append((start, body_end))
        start = match.end()
    return found


_STRINGS_TOKEN = re.compile(
    r'(?P<space>\s+)|(?P<comment>/\*.*?\*/|//[^\n]*)|(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<word>[\w.\-$:/]+)|(?P<punct>[=;])",
    re.S,
)
_APPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "0": "\0"}


def strings_unescaped(quoted: str) -> str:
    """A .strings quoted string's text: `\\"`, `\\n`, `\\U00e9`, ... decoded."""

    def one(match: re.Match) -> str:
        if match.group(1):
            return chr(int(match.group(1), 16))
        return _APPLE_ESCAPES.get(match.group(2), match.group(2))

    return paired(re.sub(r"\\(?:[uU]([\da-fA-F]{4})|(.))", one, quoted[1:-1], flags=re.S))


def strings_quoted(text: str) -> str:
    body = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + body.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r") + '"'


def read_strings(data: bytes, name: str, options: DocumentOptions) -> Spliced:
    if data.startswith(b"bplist"):
        raise OtherFile(f"{name}: a compiled .strings (a binary plist); translate its source")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as error:
            raise DocumentError(f"{name}: not UTF-16 text (byte {error.start})") from None
    else:
        text = decoded(data, name)
    tokens, at = [], 0
    while at < len(text):
        match = _STRINGS_TOKEN.match(text, at)
        if match is None:
            line = text.count("\n", 0, at) + 1
            raise DocumentError(f"{name}:{line}: not a .strings file ({text[at : at + 20]!r})")
        if match.lastgroup not in ("space", "comment"):
            tokens.append(match)
        at = match.end()
    values = []
    for k in range(0, len(tokens), 4):
        entry = tokens[k : k + 4]
        shape = "".join(_SHAPE.get(t.lastgroup, t.group()) for t in entry)
        if shape not in ('"=";', 'k=";'):
            line = text.count("\n", 0, entry[0].start()) + 1
            raise DocumentError(f'{name}:{line}: expected "key" = "value"; here')
        value = entry[2]
        unquoted = strings_unescaped(value.group())
        if unquoted.strip():
            values.append(Value(value.start(), value.end(), unquoted, strings_quoted, APPLE))
    bom = next((b for b in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE) if data.startswith(b)), b"")
    codec = {codecs.BOM_UTF16_LE: "utf-16-le", codecs.BOM_UTF16_BE: "utf-16-be"}.get(bom)
    if not bom and data.startswith(codecs.BOM_UTF8):
        bom, codec = codecs.BOM_UTF8, "utf-8"
    return Spliced(text, values, lambda out: bom + out.encode(codec or "utf-8"))


_SHAPE = {"string": '"', "word": "k"}
