"""A string with its code taken out: the plain text the model translates, and the code as
elements over it (`Tagged`, `vaswani.documents.markup`), each element's text kept aside under a
sentinel character. `Builder` makes them for `vaswani.documents.protect`.

A tag closed later, or an ICU message's syntax, becomes an element around the words it held.
Any other span becomes an empty element at its place. Spans side by side with nothing but spaces
and punctuation between them (`%s/%s`, `<pid> <gid>`) make one piece, kept in its order. A piece
takes with it the brackets that hold nothing else, and the punctuation that ties it to no word
(`(%s)`, `#%lu,`). It also takes the space that parts it from its word: after the word before it
(`period %s`), or before the word after it (`%d files`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable

from vaswani.documents.markup import Element
from vaswani.documents.spans import Span

OPENING, CLOSING = "([{\"'«“‘„<", ")]}\"'»”’“>"
QUOTES = "\"'«»“”‘’„‹›"
"""Quotes are the language's (`'%s'` becomes `« %s »` in French): a span keeps its place
inside them, but they stay in the text the model translates."""
_TAG = re.compile(r"<(/?)([A-Za-z][\w:.-]*)[^<>]*?(/?)>")
_VOID_TAGS = frozenset({"br", "img", "hr", "input", "wbr", "meta", "link", "area", "col"})
SENTINEL = 0x100000
"""Elements travel through placement as characters of Unicode's private use plane 16, one
each, so that where each lands can be read back (and ordered spans reordered)."""


_SPACE = " \t"
"""The spaces a span takes with it (never a line break: lines are translated apart)."""


class Builder:
    """The plain text of a string and its spans (`found`, in order) as elements, read once:
    `plain` (its pieces), `root` (the elements, each opening and closing a sentinel),
    `pieces` (each sentinel's code), `index` (each plain character's place in the string),
    `letter` (the plain place of the letter after the accelerator `marker`, left out),
    `apart` (what each empty element had beside it: `kind`), `quoted` (those alone inside
    quotes)."""

    def __init__(self, text: str, found: list[Span], marker: int | None) -> None:
        self.text, self.marker = text, marker
        self.plain: list[str] = []
        self.index: list[int] = []  # where each plain character is in the original
        self.length, self.letter = 0, -1
        self.tail = ""  # the plain text's last two characters
        self.root, self.pieces, self.sentinel_of = Element(""), {}, {}
        self.apart: dict[str, tuple[str, str]] = {}
        self.quoted: set[str] = set()
        stack: list[tuple[int, Element]] = []  # open elements, with their closing tag's start
        closes = _closed_tags(found)
        self.starts = [span.start for span in found]
        at = 0
        paired = set(closes) | set(closes.values())
        for group in _groups(text, found, paired):
            first = group[0]
            if first.start in closes:  # an element's opening tag
                self.copy(at, first.start)
                element = Element(self.sentinel(first.text, group), start=self.length)
                self.parent(stack).children.append(element)
                stack.append((closes[first.start], element))
                at = first.end
            elif stack and first.start == stack[-1][0]:  # its closing tag
                self.copy(at, first.start)
                element = stack.pop()[1]
                element.closing, element.end = self.sentinel(first.text, group), self.length
                at = first.end
            else:
                at = self.empty(at, group, stack)
        self.copy(at, len(text))

    def empty(self, at: int, group: list[Span], stack: list[tuple[int, Element]]) -> int:
        """A group of spans as an empty element: glued to the word before it with the space
        between (`period %s`), or before the next word with the space after (`%d files`).
        Returns where the original text goes on."""
        text = self.text
        start, end = group[0].start, group[-1].end
        if not any(span.syntax == "icu" for span in group):  # a plural's `#` stays in its arm
            start, end = _widened(text, start, end, at, self.next_start(end))
        self.copy(at, start)
        before = start > 0 and text[start - 1] in _SPACE and self.plain_ends_in_space()
        after = end < len(text) and text[end] in _SPACE
        piece = text[start:end]
        if before and (end == len(text) or not re.match(r"\w", text[end])):
            self.plain[-1], self.length = self.plain[-1][:-1], self.length - 1
            self.index.pop()
            self.tail = "".join(self.plain[-2:])[-2:]
            piece = text[start - 1] + piece
        elif after and (start == 0 or start == at or text[start - 1] in _SPACE):
            piece, end = piece + text[end], end + 1
        mark = self.sentinel(piece, group)
        if start > 0 and end < len(text) and text[start - 1] + text[end] in PAIRED_QUOTES:
            self.quoted.add(mark)
        sides = (text[start - 1] if start > 0 else " ", text[end] if end < len(text) else " ")
        self.apart[mark] = (kind(piece[0], sides[0]), kind(piece[-1], sides[1]))
        element = Element(mark, start=self.length, end=self.length)
        self.parent(stack).children.append(element)
        return end

    def next_start(self, end: int) -> int:
        """Where the first span from `end` on starts (the text's end: none)."""
        k = bisect.bisect_left(self.starts, end)
        return self.starts[k] if k < len(self.starts) else len(self.text)

    def sentinel(self, piece: str, group: Iterable[Span]) -> str:
        mark = chr(SENTINEL + len(self.pieces))
        self.pieces[mark] = piece
        for span in group:
            self.sentinel_of[id(span)] = mark
        return mark

    def parent(self, stack: list[tuple[int, Element]]) -> Element:
        return stack[-1][1] if stack else self.root

    def plain_ends_in_space(self) -> bool:
        """Whether the plain text so far ends in one space right after a word."""
        return len(self.tail) == 2 and self.tail[1] in _SPACE and not self.tail[0].isspace()

    def copy(self, start: int, end: int) -> None:
        """Original characters start .. end into the plain text, the accelerator's marker
        left out (and the place of the letter after it kept)."""
        part, where = self.text[start:end], range(start, end)
        if self.marker is not None and start <= self.marker < end:
            k = self.marker - start
            part, where = part[:k] + part[k + 1 :], [*where[:k], *where[k + 1 :]]
            self.letter = self.length + k
        self.index += where
        self.tail = (self.tail + part)[-2:]
        if part:
            self.plain.append(part)
            self.length += len(part)


def _closed_tags(found: list[Span]) -> dict[int, int]:
    """The spans that open an element closed later (a tag, an ICU message or arm): their
    start -> the closing span's."""
    closes = {span.start: span.partner for span in found if span.partner is not None}
    stack: list[tuple[str, int]] = []
    for span in found:
        if span.syntax != "markup":
            continue
        match = _TAG.fullmatch(span.text)
        if match is None or match.group(3) or match.group(2).lower() in _VOID_TAGS:
            continue
        name = match.group(2)
        if not match.group(1):
            stack.append((name, span.start))
        elif stack and stack[-1][0] == name:
            closes[stack.pop()[1]] = span.start
        else:  # a closing tag out of order: everything open is left as empty spans
            stack.clear()
    return closes


def _groups(text: str, found: list[Span], paired: set[int]) -> list[list[Span]]:
    """Spans side by side with nothing between them but spaces and punctuation (`%s/%s`,
    `%d%%`, `<pid> <gid>`) as one group, taken out as one piece, in its order; a span that
    opens or closes an element (at a start in `paired`: a tag closed later, an ICU message's
    syntax) stays a group of its own."""
    groups: list[list[Span]] = []
    for span in found:
        previous = groups[-1][-1] if groups else None
        if (
            previous is not None
            and span.start not in paired
            and previous.start not in paired
            and not re.search(r"\w|\n", text[previous.end : span.start])
        ):
            groups[-1].append(span)
        else:
            groups.append([span])
    return groups


def _widened(text: str, start: int, end: int, low: int, high: int) -> tuple[int, int]:
    """A span with the brackets that hold nothing else (`(%s)`), and the punctuation that ties
    it to no word (`#%lu,`, `%s: `), but quotes (the language's) and a sentence's end (`%s.`);
    never beyond `low` .. `high` (the spans beside it)."""
    while start > low and end < high:
        k = OPENING.find(text[start - 1])
        if text[start - 1] in QUOTES:
            break
        if k < 0 or text[end] != CLOSING[k]:
            break
        start, end = start - 1, end + 1
    left = start
    while left > low and _punctuation(text[left - 1]):
        left -= 1
    if left == 0 or text[left - 1] in _SPACE:
        start = left
    right = end
    while right < high and _punctuation(text[right]) and text[right] not in _ENDS:
        right += 1
    if right == len(text) or right < high and text[right] in _SPACE:
        end = right
    return start, end


_ENDS = ".!?…。"
"""What ends a sentence: left to the model, which ends its translation as it will."""


def kind(edge: str, beside: str) -> str:
    """What code ending in `edge` had `beside` it in the source: "word" (a letter, digit or
    `_`: `file%d`), "space" (or the text's edge), "other" (punctuation: `$HOME.`); "word"
    too where the code's own edge is a space (it brings its space with it)."""
    if edge.isspace() or word_char(beside):
        return "word"
    return "space" if beside.isspace() else "other"


def word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _punctuation(char: str) -> bool:
    return not char.isspace() and not char.isalnum() and char != "_" and char not in QUOTES


PAIRED_QUOTES = {"''", '""', "«»", "“”", "‘’", "„“", "‹›", "»«"}
