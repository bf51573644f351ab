"""The XML resource files of apps: Android's `res/values/strings.xml`, Qt's `.ts`, .NET's `.resx`
and Apple's `.stringsdict`. lxml reads the structure (after `parse_xml` refused entities and
document types); expat, which reports where each element's tags are, gives the places; and the
file is rewritten by splicing (`vaswani.documents.resources`): only the content of the elements
translated changes (and, where the format names the language, that attribute), every other byte
stays as it was: comments, attributes and their quotes, entities, white space.

Android: `<string>`, `<string-array>`'s items and `<plurals>`' items, not those marked
`translatable="false"`; `<xliff:g>` (what must not change) kept whole, with the rest of the inner
markup; Android's escapes read (`\\'`) and written back (an apostrophe of the translation is
escaped, as aapt requires); plural items by the target's CLDR categories.
Qt: each `<message>`'s `<source>` into its empty `<translation>` (kept `type="unfinished"` for
review unless fuzzy is off; `numerus` messages get as many `<numerusform>` as lupdate wrote for
the file's language, else as many as the target has plural forms); the `<TS>`'s `language` set
(unless it names the target already, `fr_FR`); `&` accelerators and `%1` kept.
resx: each string `<data>`'s `<value>` (not typed resources: images, sizes; not `>>` designer
entries). stringsdict: each format key and plural rule's category strings, by the target's
categories.
"""

from __future__ import annotations

import bisect
import itertools
import plistlib
import re
from typing import Any
from xml.parsers.expat import ExpatError
from xml.sax.saxutils import escape

from vaswani.documents.formats import DocumentError, DocumentOptions, OtherFile, decoded
from vaswani.documents.office import parse_xml, xml_text
from vaswani.documents.po import accelerator_of, plural_rule
from vaswani.documents.resources import APPLE, CATEGORIES, Spliced, Value, plural_edits, utf8
from vaswani.documents.spans import DEFAULT, Protection

XLIFF_G = r"<xliff:g\b[^<>]*>.*?</xliff:g>"  # a pattern of a Protection: RE2, linear time
CDATA = r"<!\[CDATA\[|\]\]>"
ANDROID = Protection(DEFAULT | {"printf"}, (XLIFF_G, CDATA))
_START_TAG = re.compile(rb"<(?:[^>\"']|\"[^\"]*\"|'[^']*')*>")


class Places:
    """Where each element of an XML file is written, as character offsets of its text: its
    start tag's start and end, its end tag's start and end (one tag: both the same)."""

    def __init__(self, data: bytes, text: str, root: Any) -> None:
        import xml.parsers.expat

        found: list[list[int]] = []
        open_: list[tuple[list[int], bool]] = []  # every element open, whether it has an end tag
        parser = xml.parsers.expat.ParserCreate()

        def start(name: str, attributes: dict) -> None:
            at = parser.CurrentByteIndex
            tag = _START_TAG.match(data, at)
            place = [at, tag.end(), tag.end(), tag.end()]
            open_.append((place, not tag.group().endswith(b"/>")))
            found.append(place)

        def end(name: str) -> None:
            place, tagged = open_.pop()  # expat reports ends well nested
            if tagged:
                closing = _START_TAG.match(data, parser.CurrentByteIndex)
                place[2], place[3] = parser.CurrentByteIndex, closing.end()

        parser.StartElementHandler, parser.EndElementHandler = start, end
        parser.Parse(data, True)
        sizes = [0, *itertools.accumulate(len(c.encode("utf-8")) for c in text)]
        self.places = {
            element: [bisect.bisect_left(sizes, b) for b in place]
            for element, place in zip(root.iter("*"), found, strict=True)
        }

    def inner(self, element: Any) -> tuple[int, int]:
        place = self.places[element]
        return place[1], place[2]

    def whole(self, element: Any) -> tuple[int, int]:
        place = self.places[element]
        return place[0], place[3]

    def start_tag(self, element: Any) -> tuple[int, int]:
        place = self.places[element]
        return place[0], place[1]


def xml_escaped(text: str) -> str:
    """Text as XML character data: `&`, `<`, `>` escaped, a carriage return as `&#13;` (a
    parser would read it as a line feed), characters XML cannot hold dropped."""
    return escape(xml_text(text), {"\r": "&#13;"})


def _read(data: bytes, name: str) -> tuple[str, Any, Places]:
    text = decoded(data, name)
    if not text.lstrip().startswith("<"):
        raise OtherFile(f"{name}: not XML (a .ts of TypeScript?)")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    root = parse_xml(data, name, doctype=True)
    try:
        return text, root, Places(data, text, root)
    except ExpatError as error:  # a name libxml2 takes and expat does not (`<a 😀b="">`)
        raise DocumentError(f"{name}: not well-formed XML ({error})") from None


# Android


REFERENCE = re.compile(r"\s*[@?](?:[\w.]+:)?[\w]+/[\w.]+\s*")
"""An Android string that is a reference to another resource (`@string/app_name`,
`?attr/title`): not text."""


def android_text(raw: str) -> str:
    """What a translator reads of an Android string's inner XML: its double quotes (which keep
    white space) taken off, `\\'` and `\\"` as the characters."""
    if len(raw) > 1 and raw.startswith('"') and raw.endswith('"'):
        raw = raw[1:-1]
    return re.sub(r"\\(['\"@?])", r"\1", raw)


_ANDROID_MARKUP = re.compile(
    r"(<!\[CDATA\[.*?\]\]>|<!--.*?-->|</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>)", re.S
)
_BARE_AMPERSAND = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[\da-fA-F]+);)")


def android_written(translation: str) -> str:
    """A translation as Android's inner XML: outside its tags, a bare `&` or `<` (a model's
    "R&D") escaped for XML, apostrophes and double quotes for aapt (inside CDATA too, which
    aapt reads the same way), and an `@` or `?` that begins it (which would read as a
    reference)."""
    pieces = _ANDROID_MARKUP.split(xml_text(translation))
    for k, piece in enumerate(pieces):
        if k % 2 == 0:
            piece = _BARE_AMPERSAND.sub("&amp;", piece).replace("<", "&lt;").replace("\r", "&#13;")
        if k % 2 == 0 or piece.startswith("<![CDATA["):
            piece = re.sub(r"(?<!\\)(['\"])", r"\\\1", piece)
        pieces[k] = piece
    out = "".join(pieces)
    if not _well_formed(out):  # markup no XML reader takes: written as the text it is
        out = re.sub(r"(?<!\\)(['\"])", r"\\\1", xml_escaped(translation))
    return "\\" + out if out[:1] in ("@", "?") else out


def _well_formed(inner: str) -> bool:
    from lxml import etree

    prefixes = set(re.findall(r"</?([A-Za-z_][\w.-]*):", inner))  # declared on <resources>
    declared = "".join(f' xmlns:{p}="urn:vaswani:{p}"' for p in sorted(prefixes))
    wrapped = f"<r{declared}>{inner}</r>"
    try:
        etree.fromstring(wrapped.encode("utf-8"), etree.XMLParser(resolve_entities=False))
    except etree.XMLSyntaxError:
        return False
    return True


def _android_entries(root: Any) -> list[tuple[Any, list[Any]]]:
    """Each translatable entry of a `<resources>` and its elements of text: a `<string>`
    itself, a `<string-array>`'s or `<plurals>`' items."""
    found = []
    for element in root:
        if not isinstance(element.tag, str) or element.get("translatable") == "false":
            continue
        if element.tag == "string":
            found.append((element, [element]))
        elif element.tag in ("string-array", "plurals"):
            found.append((element, [item for item in element if item.tag == "item"]))
    return found


def read_android(data: bytes, name: str, options: DocumentOptions) -> Spliced:
    text, root, places = _read(data, name)
    if root.tag != "resources":
        raise OtherFile(f"{name}: not an Android resource file (its root is not <resources>)")
    values: list[Value] = []
    plurals: list[dict[str, tuple[Any, Value]]] = []
    for entry, items in _android_entries(root):
        mine = {}
        for item in items:
            start, end = places.inner(item)
            value = Value(start, end, android_text(text[start:end]), android_written, ANDROID)
            mine[item.get("quantity")] = (item, value)
            values += [value] * bool(value.text.strip() and not REFERENCE.fullmatch(value.text))
        if entry.tag == "plurals":
            plurals.append(mine)

    def extra(translations: list[str], language: str | None) -> list[tuple[int, int, str]]:
        done = {id(v): t for v, t in zip(values, translations, strict=True)}
        edits = []
        for mine in plurals:
            other = mine.get("other", (None, None))[1]
            written = other and android_written(done.get(id(other), other.text))
            wholes = {c: places.whole(item) for c, (item, _) in mine.items()}
            edits += plural_edits(
                text, wholes, language, lambda c, w=written: f'<item quantity="{c}">{w}</item>'
            )
        return edits

    return Spliced(text, values, utf8(data), extra)


# Qt


def _qt_messages(root: Any, options: DocumentOptions) -> list[tuple[Any, str, Any]]:
    """(message, source text, translation element) of each `<message>` to translate."""
    found = []
    for message in root.iter("message"):
        source, translation = message.find("source"), message.find("translation")
        if source is None or translation is None or not (source.text or "").strip():
            continue
        if translation.get("type") in ("vanished", "obsolete"):
            continue
        if options.overwrite or not "".join(translation.itertext()).strip():
            found.append((message, source.text, translation))
    return found


def read_qt(data: bytes, name: str, options: DocumentOptions) -> Spliced:
    text, root, places = _read(data, name)
    if root.tag != "TS":
        raise OtherFile(f"{name}: not a Qt .ts file (its root is not <TS>)")
    messages = _qt_messages(root, options)
    code = Protection(DEFAULT | {"qt"}, accelerator=accelerator_of([m[1] for m in messages]))
    forms = [2, 0]  # a numerus message's forms by CLDR; whether the file's are the target's

    def writer(translation: Any, numerus: bool):
        tag = text[slice(*places.start_tag(translation))]
        if not options.fuzzy:  # unfinished: for a translator to review in Qt Linguist
            tag = re.sub(r"\s+type=([\"'])unfinished\1", "", tag)
        tag = tag[:-2].rstrip() + ">" if tag.endswith("/>") else tag

        def write(translated: str) -> str:
            inner = xml_escaped(translated)
            if numerus:  # as many forms as lupdate wrote, where it wrote for the target
                count = forms[1] and len(translation.findall("numerusform")) or forms[0]
                inner = f"<numerusform>{inner}</numerusform>" * count
            return f"{tag}{inner}</translation>"

        return write

    values = [
        Value(*places.whole(t), source, writer(t, m.get("numerus") == "yes"), code, True)
        for m, source, t in messages
    ]

    def extra(translations: list[str], language: str | None) -> list[tuple[int, int, str]]:
        rule = plural_rule(language) if language else None
        named = re.split(r"[-_]", root.get("language") or "")[0].lower()
        forms[:] = [rule[0] if rule else 2, named == re.split(r"[-_]", language or "")[0].lower()]
        if not language or forms[1]:
            return []  # lupdate's fr_FR is French already
        start, end = places.start_tag(root)
        tag = text[start:end]
        if re.search(r"\slanguage=", tag):
            new = re.sub(r"(\slanguage=)([\"'])[^\"']*\2", rf"\g<1>\g<2>{language}\g<2>", tag)
        else:
            new = re.sub(r"\s*/?>$", lambda m: f' language="{language}"' + m.group().strip(), tag)
        return [(start, end, new)]

    return Spliced(text, values, utf8(data), extra)


# resx


def read_resx(data: bytes, name: str, options: DocumentOptions) -> Spliced:
    text, root, places = _read(data, name)
    if root.tag != "root":
        raise OtherFile(f"{name}: not a .resx file (its root is not <root>)")
    found = []
    for data_ in root.findall("data"):
        value = data_.find("value")
        if value is None or data_.get("type") or data_.get("mimetype"):
            continue
        if (data_.get("name") or "").startswith(">>") or not (value.text or "").strip():
            continue
        found.append((value, value.text))
    code = Protection(
        DEFAULT | {"brace", "printf-prose"}, accelerator=accelerator_of([t for _, t in found])
    )
    values = [Value(*places.inner(v), t, xml_escaped, code) for v, t in found]
    return Spliced(text, values, utf8(data))


# stringsdict


def read_stringsdict(data: bytes, name: str, options: DocumentOptions) -> Spliced:
    text, root, places = _read(data, name)
    if root.tag != "plist":
        raise OtherFile(f"{name}: not a .stringsdict file (its root is not <plist>)")
    try:  # what Apple's parser would refuse (a key without its value) is refused here
        plistlib.loads(data)
    except (ValueError, TypeError, OverflowError, ExpatError) as error:
        raise DocumentError(f"{name}: not a property list ({error})") from None
    values: list[Value] = []
    rules: list[dict[str, tuple[Any, Any, Value]]] = []  # category -> key, string, value
    for entry in root.iter("dict"):
        pairs = _pairs(entry)
        string = pairs.get("NSStringLocalizedFormatKey", (None, None))[1]
        if (
            string is not None
            and string.tag == "string"
            and re.sub(r"%#@\w+@", "", string.text or "").strip()
        ):
            values.append(Value(*places.inner(string), string.text, xml_escaped, APPLE))
        kind = pairs.get("NSStringFormatSpecTypeKey", (None, None))[1]
        if kind is None or kind.text != "NSStringPluralRuleType":
            continue
        mine = {}
        for category, (key, string) in pairs.items():
            if category in CATEGORIES and string.tag == "string":
                mine[category] = (
                    key,
                    string,
                    Value(*places.inner(string), string.text or "", xml_escaped, APPLE),
                )
                values += [mine[category][2]] * bool((string.text or "").strip())
        rules.append(mine)

    def extra(translations: list[str], language: str | None) -> list[tuple[int, int, str]]:
        done = {id(v): t for v, t in zip(values, translations, strict=True)}
        edits = []
        for mine in rules:
            if "other" not in mine:
                continue
            key, string, other = mine["other"]
            between = text[places.whole(key)[1] : places.whole(string)[0]]
            written = xml_escaped(done.get(id(other), other.text))
            wholes = {c: (places.whole(k)[0], places.whole(s)[1]) for c, (k, s, _) in mine.items()}

            def item(c: str, between: str = between, written: str = written) -> str:
                return f"<key>{c}</key>{between}<string>{written}</string>"

            edits += plural_edits(text, wholes, language, item)
        return edits

    return Spliced(text, values, utf8(data), extra)


def _pairs(plist_dict: Any) -> dict[str, tuple[Any, Any]]:
    """A plist `<dict>`'s keys: their elements and those of their values."""
    children = [c for c in plist_dict if isinstance(c.tag, str)]
    return {
        key.text: (key, value)
        for key, value in zip(children[::2], children[1::2], strict=False)
        if key.tag == "key"
    }


def read_xml(data: bytes, name: str, options: DocumentOptions) -> Any:
    """An `.xml` file by its root element: Android's `<resources>` (what a `.xml` of an app
    mostly is), or an XLIFF, Qt, .resx or plist file saved under `.xml`."""
    from vaswani.documents.xliff import read_xliff

    root = next(
        (m[2] for m in re.finditer(rb"<([!?/]?)([A-Za-z_][\w.:-]*)", data[:65536]) if not m[1]),
        b"",
    )
    local = root.decode("ascii", "replace").rsplit(":", 1)[-1]
    readers = {"xliff": read_xliff, "TS": read_qt, "root": read_resx, "plist": read_stringsdict}
    return readers.get(local, read_android)(data, name, options)
