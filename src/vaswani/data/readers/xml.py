"""Translation memories and localisation files: TMX 1.4 and XLIFF 1.2 / 2.0.

Both are read as a stream (`iterparse`, each unit dropped from its parent once read), so a
multi-GB TMX never sits in memory, with defusedxml's parser: a file that declares entities (the
"billion laughs") or names an external one (a local file, a URL) is refused, never expanded.

Inline markup inside a segment is of two kinds. Codes stand for formatting of the original
document (TMX `<bpt> <ept> <ph> <it> <ut>`, XLIFF 1.2 `<bpt> <ept> <ph> <it> <x/> <bx/> <ex/>`,
XLIFF 2.0 `<ph/> <sc/> <ec/>`): `markup="strip"` (the default) leaves them out, `"keep"` keeps the
native code they hold (e.g. `<b>`) as text. Wrappers around real text (`<hi> <g> <mrk> <pc>`)
keep their text either way.
"""

from __future__ import annotations

import codecs
import re
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import defusedxml
import defusedxml.ElementTree as SafeTree

from vaswani.data.corpora import DEFAULT_MAX_LINE_BYTES, DataError, Pair, open_binary
from vaswani.languages import language_matches, normal

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
CODES = {"bpt", "ept", "ph", "it", "ut", "x", "bx", "ex", "sc", "ec", "sub"}
MARKUP = ("strip", "keep")


def local(tag: str) -> str:
    """A tag without its namespace: "{urn:oasis:names:tc:xliff:document:2.0}unit" -> "unit"."""
    return tag.rsplit("}", 1)[-1]


MAX_DEPTH = 256  # elements open at once: a TMX is 4 deep plus inline markup; 100,000 is an attack
CHUNK = 1 << 16


def declared_encoding(head: bytes, path: Path) -> str | None:
    """The encoding an XML declaration at the start of `head` names (normalised by codecs), or
    None; a name Python does not know is a DataError."""
    found = re.match(rb"(?:\xef\xbb\xbf)?<\?xml[^>]*?encoding\s*=\s*[\"']([^\"']{1,40})[\"']", head)
    if not found:
        return None
    name = found.group(1).decode("ascii", "replace")
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise DataError(
            f"{path}: declares the unknown encoding {name!r}; save it as UTF-8"
        ) from None


class Utf8Sniffer:
    """Watches the bytes of a file that declares a one-byte encoding (ISO-8859-1, cp1252): if all
    of them decode as UTF-8 and some are not ASCII, the declaration is wrong and the text would
    come out as mojibake ("Ã©" for "é")."""

    def __init__(self) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.utf8, self.non_ascii = True, False

    def feed(self, data: bytes) -> None:
        if self.utf8 and not data.isascii():
            self.non_ascii = True
            try:
                self.decoder.decode(data)
            except UnicodeDecodeError:
                self.utf8 = False

    def check(self, path: Path, declared: str) -> None:
        if self.utf8 and self.non_ascii:
            raise DataError(
                f"{path}: declares the encoding {declared} but its bytes are UTF-8; fix the "
                'declaration (encoding="UTF-8")'
            )


def chunks(path: Path, limit: int, found: list[int]) -> Iterator[tuple[bytes, bool]]:
    """The bytes of `path` (through gzip) in chunks, each with whether it is the last. The caller
    sets `found[0]` to the number of events the chunk gave: after a chunk that completed nothing
    (one long text or attribute), the next is twice as large, so expat (which parses an
    unfinished token again from its start on every feed) does linear work, not quadratic."""
    size, since_event = CHUNK, 0
    with open_binary(path) as handle:
        data = handle.read(size)
        while data:
            following = handle.read(size)
            yield data, not following
            events = found[0]
            since_event = 0 if events else since_event + len(data)
            if since_event > limit:
                raise DataError(
                    f"{path}: a text or attribute longer than {limit:,} bytes near byte "
                    f"{handle.tell():,}; raise max_line_bytes={limit} if it really is one segment"
                )
            size = CHUNK if events else min(2 * size, limit + CHUNK)
            data = following


class Tree:
    """The elements open while a file streams through, and which of them are wanted units."""

    def __init__(self, path: Path, names: set[str]) -> None:
        self.path, self.names = path, names
        self.stack: list[ElementTree.Element] = []
        self.open_units = self.unit_start = 0

    def events(
        self, pull: ElementTree.XMLPullParser, offset: int, found: list[int]
    ) -> Iterator[tuple[ElementTree.Element, list[str]]]:
        """The units completed by the events `pull` holds (`found[0]` counts the events). Every
        element is removed from its parent once complete (outside a unit, as soon as it ends)."""
        for event, element in pull.read_events():
            found[0] += 1
            if event == "start":
                self.stack.append(element)
                if len(self.stack) > MAX_DEPTH:
                    raise DataError(f"{self.path}: elements nested deeper than {MAX_DEPTH}")
                if local(element.tag) in self.names:
                    self.open_units, self.unit_start = self.open_units + 1, offset
                continue
            self.stack.pop()
            wanted = local(element.tag) in self.names
            if wanted:
                self.open_units -= 1
                yield element, [local(e.tag) for e in self.stack]
            if self.stack and (wanted or not self.open_units):
                self.stack[-1].remove(element)


def units(
    path: Path, names: set[str], limit: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[tuple[ElementTree.Element, list[str]]]:
    """Each element named in `names` once it is complete, with the local names of the elements
    open around it (outermost first); memory stays flat (see `Tree.events`). Unsafe or damaged
    XML, a unit of more than 8 * `limit` bytes, a text or attribute of more than `limit` or
    elements nested deeper than MAX_DEPTH is a DataError naming the file."""
    parser = SafeTree.DefusedXMLParser(
        target=ElementTree.TreeBuilder(), forbid_entities=True, forbid_external=True
    )
    pull = ElementTree.XMLPullParser(("start", "end"), _parser=parser)
    tree, sniffer = Tree(path, names), Utf8Sniffer()
    declared, found, offset = None, [0], 0
    try:
        for data, last in chunks(path, limit, found):
            if offset == 0:
                declared = declared_encoding(data[:256], path)
                if declared and (declared.startswith("utf") or declared == "ascii"):
                    declared = None  # only a one-byte encoding can be mistaken for UTF-8
            if declared:
                sniffer.feed(data)
            offset, found[0] = offset + len(data), 0
            pull.feed(data)
            yield from tree.events(pull, offset, found)
            if last:
                pull.close()
                yield from tree.events(pull, offset, found)
            if tree.open_units and offset - tree.unit_start > 8 * limit:
                raise DataError(
                    f"{path}: a unit longer than {8 * limit:,} bytes before byte {offset:,}; "
                    f"raise max_line_bytes={limit} if it really is one"
                )
        if not offset:
            pull.close()  # an empty file: "no element found"
    except defusedxml.DefusedXmlException as error:
        raise DataError(
            f"{path}: refused: the XML declares entities or external references ({error}); a "
            "translation memory needs neither"
        ) from None
    except ElementTree.ParseError as error:
        line, column = error.position
        reason = str(error).split(":", 1)[0]
        raise DataError(f"{path}:{line}:{column + 1}: damaged XML ({reason})") from None
    if declared:
        sniffer.check(path, declared)


def segment_text(element: ElementTree.Element, markup: str = "strip") -> str:
    """The text of a segment; inline codes left out (`strip`) or kept as their native code."""
    parts = [element.text or ""]
    for child in element:
        name = local(child.tag)
        if name not in CODES:
            parts.append(segment_text(child, markup))
        elif markup == "keep":
            parts.append("".join(child.itertext()))
        parts.append(child.tail or "")
    return " ".join("".join(parts).split())


def read_tmx(
    path: Path,
    src_lang: str | None,
    tgt_lang: str | None,
    dropped: Counter,
    markup: str = "strip",
    limit: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[Pair]:
    """(source, target) of each translation unit that has both languages. Language matching is
    tolerant of region and case (`es` matches es-ES, ES, es_MX; `pt-BR` only pt-BR). The source
    language defaults to the header's srclang. A file without the asked languages is one line
    listing those it has."""
    seen: Counter = Counter()
    kept, header = 0, ""
    for element, _ in units(path, {"header", "tu"}, limit):
        if local(element.tag) == "header":
            header = element.get("srclang", "")
            if not src_lang and header.lower() != "*all*":  # its language: en-US matches en-GB
                src_lang = normal(header).split("-", 1)[0]
            continue
        if not src_lang or not tgt_lang:
            raise DataError(
                f"{path}: a TMX file: give src_lang=... and tgt_lang=... (its header's source "
                f"language is {header or 'not set'})"
            )
        texts: dict[str, str] = {}
        for tuv in element:
            if local(tuv.tag) != "tuv":
                continue
            lang = tuv.get(XML_LANG) or tuv.get("lang") or ""
            seen[lang] += 1
            seg = next((s for s in tuv if local(s.tag) == "seg"), None)
            if seg is not None:
                texts.setdefault(lang, segment_text(seg, markup))
        source = next((t for lang, t in texts.items() if language_matches(lang, src_lang)), None)
        target = next((t for lang, t in texts.items() if language_matches(lang, tgt_lang)), None)
        if source and target:
            kept += 1
            yield source, target
        else:
            dropped["a language missing"] += 1
    if not kept and seen:
        have = ", ".join(f"{lang or '(none)'} ({n:,})" for lang, n in seen.most_common())
        raise DataError(
            f"{path}: no unit has both {src_lang} and {tgt_lang}; its languages: {have}"
        )


def read_xliff(
    path: Path, dropped: Counter, markup: str = "strip", limit: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[Pair]:
    """(source, target) of each translated unit of an XLIFF 1.2 file (`<trans-unit>`) or segment
    of an XLIFF 2.0 file (`<segment>`); units without a target are skipped and counted."""
    for element, _ in units(path, {"trans-unit", "segment"}, limit):
        parts = {local(child.tag): child for child in element}
        source, target = parts.get("source"), parts.get("target")
        source_text = segment_text(source, markup) if source is not None else ""
        target_text = segment_text(target, markup) if target is not None else ""
        if not source_text:
            dropped["empty source"] += 1
        elif not target_text:
            dropped["untranslated"] += 1
        else:
            yield source_text, target_text
