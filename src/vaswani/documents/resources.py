"""What the resource files of apps share: a file rewritten by splicing, and plurals by the target's
CLDR categories.

A resource file (Java .properties, Apple .strings, JSON, ARB, YAML, Android and Qt XML...) is
translated in place: its reader finds where each translatable value is written (`Value`: the
characters start .. end of the file, its text, the code in it) and `Spliced.rebuild` writes
the translations there, each in the format's own quoting (`Value.write`), and nothing else: keys,
comments, order and white space stay byte for byte, since they are never re-serialised.

Plurals: a language's categories come from CLDR (babel); `icu_plurals` gives an ICU message's
plural arms the target's categories, `categories_for` says which to write where a format keeps
one entry per category (Android's `<plurals>`, `.stringsdict`, i18next's `_one` keys).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from vaswani.documents.formats import Document, DocumentError
from vaswani.documents.markup import Alignment
from vaswani.documents.spans import DEFAULT, ICU_ARM, ICU_MESSAGE, Protection

APPLE = Protection(DEFAULT | {"printf", "apple"})
"""The code of Apple's strings (.strings, .stringsdict, .xcstrings): printf with `%@`."""
CATEGORIES = ("zero", "one", "two", "few", "many", "other")
"""CLDR's plural categories, in their order."""


def plural_categories(language: str | None) -> tuple[str, ...] | None:
    """The CLDR plural categories of `language` in order (`ru`: one, few, many, other); None
    for no language or one babel does not know."""
    if not language:
        return None
    from babel import Locale, UnknownLocaleError

    try:
        tags = Locale.parse(re.sub("-", "_", language.strip())).plural_form.tags
    except (UnknownLocaleError, ValueError, TypeError):
        return None
    return tuple(c for c in CATEGORIES if c in tags | {"other"})


def categories_for(have: list[str], language: str | None) -> list[str]:
    """The plural categories to write for a target `language`, from those a source entry `have`:
    the target's categories (those missing filled from "other"), explicit ones (`=0`, Android's
    `zero` where English has it) kept only where the target has them; the source's own where
    the language is unknown."""
    wanted = plural_categories(language)
    if wanted is None:
        return list(have)
    return [c for c in wanted if c in have or "other" in have]


def icu_plurals(text: str, language: str | None) -> str:
    """`text` with each ICU plural message's arms (`one {# file} other {# files}`) made the
    target's CLDR categories: an arm the target has is kept as it is written, a missing one is
    a copy of `other` put before it, one the target lacks is dropped; exact arms (`=0 {...}`)
    are kept. Left as it is where the language is unknown or a message's braces do not
    balance."""
    wanted = plural_categories(language)
    if wanted is None or "{" not in text:
        return text
    edits: list[tuple[int, int, str]] = []
    done = 0
    for head in ICU_MESSAGE.finditer(text):
        if head.group(1) == "select":
            continue  # a plural inside one is found next
        arms, end = _arms(text, head.end())
        if head.start() < done or arms is None or "other" not in arms:
            continue  # nested in a message rewritten, or not one to rewrite
        done = end
        have = [name for name in arms if not name.startswith("=")]
        for name, (start, stop, _) in arms.items():
            if not name.startswith("=") and name not in wanted:
                edits.append((start, stop, ""))
        start, stop, selector = arms["other"]
        written = text[start:stop]
        added = [c for c in wanted if c not in have]
        copies = "".join(written.replace(selector, c, 1) for c in added)
        edits.append((start, start, copies))
    return splice(text, edits) if edits else text


def _arms(text: str, at: int) -> tuple[dict[str, tuple[int, int, str]] | None, int]:
    """The arms of an ICU message whose arms begin at `at` (selector -> where the arm is
    written, spaces before it included, and its selector as written) and where the message's
    closing brace ends; None where they do not parse."""
    arms: dict[str, tuple[int, int, str]] = {}
    while (arm := ICU_ARM.match(text, at)) is not None:
        depth, k = 1, arm.end()
        while k < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
        if depth:
            return None, at
        arms[arm.group(2)] = (arm.start(), k, arm.group(2))
        at = k
    closing = re.compile(r"\s*\}").match(text, at)
    return (arms, closing.end()) if closing and arms else (None, at)


def plural_edits(
    text: str,
    wholes: dict[str, tuple[int, int]],
    language: str | None,
    item: Callable[[str], str],
    drop: bool = True,
) -> list[tuple[int, int, str]]:
    """The edits that give a format's plural entry (an item per category, each written at
    `wholes[category]`) the target's categories: each missing one written by `item(category)`
    before the `other` item (on a line of its own where that one is), those the target lacks
    removed with the white space before them (unless not `drop`)."""
    if "other" not in wholes:
        return []
    wanted = categories_for(list(wholes), language)
    edits = [without(text, whole) for c, whole in wholes.items() if drop and c not in wanted]
    start = wholes["other"][0]
    before = text[text.rfind("\n", 0, start) + 1 : start]
    between = "\n" + before if not before.strip() else " "
    added = "".join(item(c) + between for c in wanted if c not in wholes)
    return edits + [(start, start, added)] * bool(added)


def without(text: str, span: tuple[int, int]) -> tuple[int, int, str]:
    """An edit that removes characters `span` of `text` with the white space before them."""
    return len(text[: span[0]].rstrip(" \t\n\r")), span[1], ""


def pieces(text: str, start: int = 0, end: int | None = None, plural: bool = False) -> list:
    """The parts of `text` translated apart, as (start, end, inside a plural's arm): an ICU
    message's syntax is never given to the model, so that it cannot move or mix its arms; the
    text around each plural or select message and the text of each of its arms (nested
    messages likewise), those with words only."""
    end = len(text) if end is None else end
    found, at = [], start
    for head in ICU_MESSAGE.finditer(text, start, end):
        arms, close = _arms(text, head.end())
        if head.start() < at or arms is None or close > end:
            continue
        found.append((at, head.start(), plural))
        for arm_start, arm_end, _ in arms.values():
            opened = text.index("{", arm_start) + 1
            found += pieces(text, opened, arm_end - 1, head.group(1) != "select")
        at = close
    found.append((at, end, plural))
    return [p for p in found if text[p[0] : p[1]].strip()]


def utf8(data: bytes) -> Callable[[str], bytes]:
    """How a file read from `data` is written back: in UTF-8, with its byte-order mark if it
    had one (Visual Studio writes one; the readers take it off)."""
    bom = b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b""
    return lambda text: bom + text.encode("utf-8")


@dataclass
class Value:
    """A translatable value where a file writes it: characters `start` .. `end` of the file
    (quotes and escapes included), its `text` as a translator reads it, the code in it, and how
    a translation is written back in its place."""

    start: int
    end: int
    text: str
    write: Callable[[str], str]
    protection: Protection | None = None
    elsewhere: bool = False
    """Whether the translation goes where the text is not (a Qt message's `<translation>`), so
    that one the same as the text is written too."""


@dataclass
class Spliced(Document):
    """A file as its translatable values: rebuilt by writing each translation where its value
    was, and any `extra` edits (a locale, plural entries) that the format makes for the target.
    A value with ICU messages is translated a piece at a time (`pieces`), put together again
    around the message's syntax, its plural arms made the target's (`icu_plurals`)."""

    source: str
    values: list[Value]
    encode: Callable[[str], bytes] = field(default=str.encode)  # UTF-8
    extra: Callable[[list[str], str | None], list[tuple[int, int, str]]] | None = None
    markup = False

    def __post_init__(self) -> None:
        self.parts = [pieces(value.text) for value in self.values]

    def texts(self) -> list[str]:
        return [
            v.text[a:b] for v, mine in zip(self.values, self.parts, strict=True) for a, b, _ in mine
        ]

    def protections(self) -> list[Protection | None]:
        return [
            _number(v.protection or Protection()) if plural else v.protection
            for v, mine in zip(self.values, self.parts, strict=True)
            for _, _, plural in mine
        ]

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        whole, at = [], 0  # each value's translation, its pieces put back in its text
        for value, mine in zip(self.values, self.parts, strict=True):
            done = translations[at : at + len(mine)]
            edits = [(a, b, t) for (a, b, _), t in zip(mine, done, strict=True)]
            whole.append(icu_plurals(splice(value.text, edits), language) if mine else value.text)
            at += len(mine)
        # the format's own edits first: one may learn from the language how to write its
        # values (a Qt plural message's number of forms)
        edits = [] if self.extra is None else self.extra(whole, language)
        edits += [  # a value kept as it was keeps its bytes (its quotes, its escapes)
            (v.start, v.end, v.write(t))
            for v, t in zip(self.values, whole, strict=True)
            if t != v.text or v.elsewhere
        ]
        return self.encode(splice(self.source, edits))


def _number(protection: Protection) -> Protection:
    """`protection` with a plural arm's `#` (the number) kept."""
    return Protection(protection.syntaxes, (*protection.patterns, "#"), protection.accelerator)


def splice(source: str, edits: list[tuple[int, int, str]]) -> str:
    """`source` with characters start .. end of each edit replaced (an insertion has start ==
    end); an edit inside one that replaces more (a plural entry dropped, its value with it) is
    left out, one that overlaps another partly is an error."""
    out, at, last = [], 0, (-1, -1)
    for start, end, text in sorted(edits, key=lambda e: (e[0], -e[1])):
        if last[0] <= start and end <= last[1] and last[0] < last[1] and (start, end) != last:
            continue
        if start < at:
            raise DocumentError(f"overlapping edits at character {start}")
        out += [source[at:start], text]
        at, last = end, (start, end)
    return "".join(out) + source[at:]
