"""JSON resource files (flat or nested, i18next's, Flutter's ARB) and Apple's string catalogs
(.xcstrings), read by a scanner that keeps where each string is written, and rewritten by
splicing (`vaswani.documents.resources`): keys, order, indentation and the values' escapes stay
byte for byte.

JSON: every string value is translated, keys never. Its code: ICU messages, `{name}`,
`{{name}}` (i18next), `%{name}`, printf. i18next's plural keys (`item_one`, `item_other`) get
the target's CLDR categories (`item_few` added after its siblings, a copy of `item_other`'s
translation).

ARB: values of `@`-keys are metadata, kept; `@@locale` becomes the target; ICU plurals get the
target's categories.

.xcstrings: each string's source-language text (or its key) is translated into a new
localization of the target language, state `needs_review`; plural variations by the target's
categories; `shouldTranslate: false` kept out. The catalog is written back as Xcode writes it
(two-space indentation, `" : "`), so that an Xcode file's diff shows only the added lines.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from json.decoder import scanstring

from vaswani.documents.formats import Document, DocumentError, DocumentOptions, decoded
from vaswani.documents.markup import Alignment
from vaswani.documents.resources import APPLE, Spliced, Value, categories_for, plural_edits, utf8
from vaswani.documents.spans import DEFAULT, Protection

JSON_CODE = Protection(DEFAULT | {"brace", "ruby", "printf-prose"}, (r"\$t\([^()]{0,200}\)",))
"""JSON's code: what DEFAULT reads, `{x}`, Rails' `%{x}`, printf, and i18next's nesting
(`$t(common:ok)`)."""
MAX_DEPTH = 100
"""The deepest nesting of a JSON file read (real ones nest a few levels; a hostile one a
million, which would exhaust the stack)."""
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")
_SPACE = re.compile(r"[ \t\r\n]*")
PLURAL_KEY = re.compile(r"(.+)_(zero|one|two|few|many|other)")


@dataclass
class Found:
    """A string value of a JSON file: its key path, where it is written, its text."""

    path: tuple[str | int, ...]
    start: int
    end: int
    text: str
    member: int
    """Where its member begins: its key's opening quote (its own start in a list)."""


def scan(text: str, name: str) -> list[Found]:
    """Every string value of the JSON in `text` with its key path and place; a DocumentError
    for text that is not JSON or nests over MAX_DEPTH."""
    found: list[Found] = []
    try:
        end = _value(text, _SPACE.match(text, 0).end(), (), found)
    except (ValueError, IndexError) as error:
        raise DocumentError(f"{name}: not JSON ({error})") from None
    if _SPACE.match(text, end).end() != len(text):
        raise DocumentError(f"{name}: not JSON (text after the value at character {end})")
    return found


def _value(text: str, at: int, path: tuple, found: list[Found], member: int = 0) -> int:
    if len(path) > MAX_DEPTH:
        raise DocumentError(f"JSON nested over {MAX_DEPTH} levels deep; refused")
    char = text[at]
    if char == '"':
        value, end = scanstring(text, at + 1)
        found.append(Found(path, at, end, value, member))
        return end
    if char in "{[":
        closing, key = "}" if char == "{" else "]", 0
        at = _SPACE.match(text, at + 1).end()
        if text[at] == closing:
            return at + 1
        while True:
            member = at
            if char == "{":
                if text[at] != '"':
                    raise ValueError(f"a key expected at character {at}")
                key, at = scanstring(text, at + 1)
                at = _SPACE.match(text, at).end()
                if text[at] != ":":
                    raise ValueError(f"':' expected at character {at}")
                at = _SPACE.match(text, at + 1).end()
            at = _SPACE.match(text, _value(text, at, (*path, key), found, member)).end()
            if text[at] == closing:
                return at + 1
            if text[at] != ",":
                raise ValueError(f"',' or {closing!r} expected at character {at}")
            at = _SPACE.match(text, at + 1).end()
            key = key + 1 if char == "[" else key
    number = _NUMBER.match(text, at)
    if number is None:
        raise ValueError(f"a value expected at character {at}")
    return number.end()


def json_writer(ascii_only: bool):
    def write(translation: str) -> str:
        return json.dumps(translation, ensure_ascii=ascii_only)

    return write


def read_json(data: bytes, name: str, options: DocumentOptions, kind: str = "json") -> Spliced:
    """A JSON resource file (`kind` "json") or a Flutter ARB file ("arb")."""
    text = decoded(data, name)
    found = scan(text, name)
    if kind == "arb" and any(f.path and isinstance(f.path[0], int) for f in found):
        raise DocumentError(f"{name}: an ARB file is one object of messages")
    write = json_writer(text.isascii() and "\\u" in text)
    wanted = [f for f in found if f.text.strip() and not _metadata(f, kind)]
    values = [Value(f.start, f.end, f.text, write, JSON_CODE) for f in wanted]

    def extra(translations: list[str], language: str | None) -> list[tuple[int, int, str]]:
        locale = [f for f in found if f.path == ("@@locale",)]
        edits = []
        if kind == "arb" and language and locale:
            edits.append((locale[0].start, locale[0].end, write(language)))
        return edits + _plural_keys(text, wanted, translations, language, write)

    return Spliced(text, values, utf8(data), extra)


def _metadata(found: Found, kind: str) -> bool:
    return kind == "arb" and any(isinstance(p, str) and p.startswith("@") for p in found.path)


def _plural_keys(
    text: str, wanted: list[Found], translations: list[str], language: str | None, write
) -> list[tuple[int, int, str]]:
    """i18next's plural keys that the target needs and the source lacks, each added before the
    `_other` key, as a copy of its translation (keys the target does not use are kept: i18next
    reads past them)."""
    groups: dict[tuple, dict[str, tuple[Found, str]]] = {}
    for f, t in zip(wanted, translations, strict=True):
        key = f.path[-1] if f.path else None
        match = PLURAL_KEY.fullmatch(key) if isinstance(key, str) else None
        if match:
            groups.setdefault((*f.path[:-1], match[1]), {})[match[2]] = (f, t)
    edits = []
    for group, members in groups.items():
        if "other" not in members:
            continue
        other, translation = members["other"]
        colon = text[scanstring(text, other.member + 1)[1] : other.start]  # ": " as written

        def item(
            c: str, key: str = group[-1], colon: str = colon, value: str = write(translation)
        ) -> str:
            return f"{json.dumps(f'{key}_{c}', ensure_ascii=False)}{colon}{value},"

        wholes = {c: (f.member, f.end) for c, (f, _) in members.items()}
        edits += plural_edits(text, wholes, language, item, drop=False)
    return edits


APPLE_CODE = Protection(APPLE.syntaxes, (r"%arg\b",))
"""A string catalog's code: printf with Apple's `%@`, and a substitution's `%arg` (before
printf, which would read `%a`)."""


@dataclass
class StringCatalog(Document):
    """An Apple string catalog (.xcstrings): its strings' source texts, written back as a
    localization of the target language."""

    catalog: dict
    options: DocumentOptions
    markup = False

    def todo(self) -> list[tuple[str, tuple | None, str]]:
        """(key, where its text is in the source localization, text) of each text: every
        `stringUnit` of the source language's localization (in plural, device and substitution
        variations too); the key itself (None) where the catalog has no source text."""
        source = self.catalog.get("sourceLanguage", "en")
        found: list[tuple[str, tuple | None, str]] = []
        for key, entry in self.catalog.get("strings", {}).items():
            if entry.get("shouldTranslate") is False:
                continue
            mine = entry.get("localizations", {}).get(source)
            units = _units(mine) if isinstance(mine, dict) else []
            found += [(key, path, _at(mine, path)["stringUnit"].get("value")) for path in units]
            if not units:
                found.append((key, None, key))
        return [(k, p, t) for k, p, t in found if isinstance(t, str) and t.strip()]

    def texts(self) -> list[str]:
        return [text for _, _, text in self.todo()]

    def protections(self) -> list[Protection | None]:
        return [APPLE_CODE] * len(self.todo())

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        if not language:
            raise DocumentError("a string catalog needs the target language (give --target)")
        state = "needs_review" if self.options.fuzzy else "translated"
        source = self.catalog.get("sourceLanguage", "en")
        done: dict[str, dict] = {}  # each key's new localization
        for (key, path, _), translation in zip(self.todo(), translations, strict=True):
            localizations = self.catalog["strings"][key].setdefault("localizations", {})
            if language in localizations and not self.options.overwrite:
                continue
            if key not in done:
                done[key] = {} if path is None else copy.deepcopy(localizations.get(source, {}))
            node = _at(done[key], path or ())
            node["stringUnit"] = {"state": state, "value": translation}
        for key, localization in done.items():
            localizations = self.catalog["strings"][key]["localizations"]
            localizations[language] = _plurals_for(localization, language)
            self.catalog["strings"][key]["localizations"] = dict(sorted(localizations.items()))
        return (xcode_json(self.catalog) + "\n").encode("utf-8")


def _units(tree: dict, path: tuple = ()) -> list[tuple]:
    """The paths to every node of a localization that holds a `stringUnit`, in order."""
    found = [path] if isinstance(tree.get("stringUnit"), dict) else []
    for name, child in tree.items():
        if name != "stringUnit" and isinstance(child, dict):
            found += _units(child, (*path, name))
    return found


def _at(tree: dict, path: tuple) -> dict:
    for name in path:
        tree = tree[name]
    return tree


def _plurals_for(tree: dict, language: str) -> dict:
    """A localization with each plural variation's categories made the target's (a missing one
    a copy of `other`, one the target lacks dropped)."""
    out = {}
    for name, child in tree.items():
        if name == "plural" and isinstance(child, dict) and "other" in child:
            wanted = categories_for(list(child), language)
            child = {c: copy.deepcopy(child.get(c, child["other"])) for c in wanted}
        out[name] = _plurals_for(child, language) if isinstance(child, dict) else child
    return out


def xcode_json(value: object, indent: str = "") -> str:
    """JSON as Xcode writes a string catalog: two spaces a level, `" : "`, an empty object as
    `{\\n\\n}`."""
    inner = indent + "  "
    if isinstance(value, dict):
        items = [
            f"{inner}{json.dumps(k, ensure_ascii=False)} : {xcode_json(v, inner)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list):
        if not value:
            return "[\n\n" + indent + "]"
        return "[\n" + ",\n".join(inner + xcode_json(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def read_xcstrings(data: bytes, name: str, options: DocumentOptions) -> StringCatalog:
    document = decoded(data, name)
    scan(document, name)  # what is not JSON, or nests too deep, is refused here
    catalog = json.loads(document)
    if not isinstance(catalog, dict) or not isinstance(catalog.get("strings"), dict):
        raise DocumentError(f'{name}: not a string catalog (no "strings" object)')
    for key, entry in catalog["strings"].items():
        localizations = entry.get("localizations", {}) if isinstance(entry, dict) else {}
        if not isinstance(entry, dict) or not isinstance(localizations, dict):
            what = "entry" if not isinstance(entry, dict) else '"localizations"'
            raise DocumentError(f"{name}: string {key[:80]!r}: its {what} is not an object")
    try:  # the catalog is written back whole: a lone surrogate in a key could not be
        json.dumps(catalog, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as error:
        raise DocumentError(
            f"{name}: U+{ord(error.object[error.start]):04X}, half of a UTF-16 pair without its "
            "other half, in a key or value"
        ) from None
    return StringCatalog(catalog, options)
