"""Code inside text, protected by construction: placeholders, markup, URLs and keyboard
accelerators taken out of a string before the model sees it and put back exactly once after.

A model copies `%s` most of the time, and "most" breaks software: a `%d` where `%s` was crashes
a C program, a lost `{count}` a Python one. So nothing that is code goes through the model.
`protect` finds the spans of a string in the syntaxes it is written in
(`vaswani.documents.spans`) and gives the `Tagged` form that .html files use: the plain text the model
translates and the spans as elements over it. Markup that wraps words (`<a href=...>our
site</a>`) becomes an element around them; any other span an empty element at its place, with
the space that parted it from its neighbours. `Line.place` puts them back around the
translated words aligned to the source's (`vaswani.documents.markup.place`): each span once, as
it was, the spans whose order the program depends on (printf's `%s %d`) in their order. A
keyboard accelerator (`_Open`, `&Save`, `~Print`) is moved onto a letter of the word aligned to
the one it marked, exactly one. `Line.check` then finds the spans of the result again: the
same spans, in order where it matters, the accelerator once, as many line breaks. A result that
fails is not written: the caller keeps the text as it was.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from vaswani.documents.markup import Alignment, Element, Tagged, place, words
from vaswani.documents.spans import Protection, Span, accelerator_at, check, spans

OPENING, CLOSING = "([{\"'«“‘„<", ")]}\"'»”’“>"
_TAG = re.compile(r"<(/?)([A-Za-z][\w:.-]*)[^<>]*?(/?)>")
_VOID_TAGS = frozenset({"br", "img", "hr", "input", "wbr", "meta", "link", "area", "col"})
_SENTINEL = 0x100000
"""Elements travel through placement as characters of Unicode's private use plane 16, one
each, so that where each lands can be read back (and ordered spans reordered)."""


@dataclass
class Line:
    """A string (a line) as the model translates it: the plain text and the spans taken out of it
    (`tagged`, with each element's opening and closing as a sentinel character, `pieces`
    mapping them back), the accelerator's marker and the plain character it preceded."""

    source: str
    tagged: Tagged
    pieces: dict[str, str]
    ordered: list[str]
    """The sentinels of the spans consumed in order, in source order."""
    found: list[Span]
    protection: Protection
    accelerator: tuple[str, int] | None = None
    index: list[int] | None = None
    """Where each character of `text` is in `source` (None: the same place)."""
    apart: dict[str, tuple[str, str]] = field(default_factory=dict)
    """What each empty element's code had beside it in the source (before, after): "word",
    "space" or "other" (`_kind`). What it gets beside it in the translation must not join
    it to a word it was apart from (`$HOME` and `NEW` would read as `$HOMENEW`)."""

    @property
    def text(self) -> str:
        """What the model translates."""
        return self.tagged.text

    @property
    def changed(self) -> bool:
        """Whether anything was taken out (else the translation is used as it is)."""
        return bool(self.pieces) or self.accelerator is not None

    @property
    def placing(self) -> bool:
        """Whether putting the code back needs the translation's word alignment."""
        return self.changed and bool(self.text.strip())

    def place(self, translation: str, alignment: Alignment) -> Placed:
        """`translation` (of `text`) with the spans put back by `alignment` (source word -
        translated word) and the accelerator on the letter of the aligned word."""
        translation = "".join(c for c in translation if ord(c) < _SENTINEL)
        if not self.changed:
            return Placed(translation, translation, list(range(len(translation))))
        if not self.text.strip():  # nothing but code: kept as it is
            return Placed(translation, self.source, [0] * len(translation))
        placed = place(self.tagged, translation, alignment)
        pieces = self.pieces
        if self.accelerator is not None:
            mark = chr(_SENTINEL + len(pieces))
            pieces = {**pieces, mark: self.accelerator[0]}
            placed = _with_accelerator(self, translation, placed, alignment, mark)
        slots, ordered = iter(self.ordered), set(self.ordered)
        order = {c: next(slots) for c in placed if c in ordered}  # in source order, into slots
        out, index, length = [], [], 0
        last, after = " ", "word"  # the last character out; what the code before it had after
        for c in placed:
            mine = order.get(c, c)
            piece = pieces[mine] if c in pieces else c
            before, next_after = self.apart.get(mine, ("word", "word"))
            if _parted(last, before, piece[0]) or _parted(piece[0], after, last):
                out.append(" ")  # code the source kept apart stays apart
                length += 1
            if c not in pieces:
                index.append(length)
            out.append(piece)
            length += len(piece)
            last, after = piece[-1], next_after
        return Placed(translation, "".join(out), index)

    def aligned(self, alignment: Alignment, placed: Placed) -> Alignment:
        """`alignment` of `text` with `placed.translation` as one of `source` with
        `placed.text` (each word linked as the word it is in)."""
        return aligned(self.text, self.source, self.index, alignment, placed)

    def check(self, result: str) -> str | None:
        """The check `result` fails as a translation of `source` (`spans.check`), or None."""
        return check(self.source, result, self.protection, self.found)


LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass
class Lines:
    """A text of several lines with code in them, each line protected on its own (the model
    translates a line at a time, so no code moves to another line). Read as a `Line` is."""

    source: str
    lines: list[Line]
    breaks: list[str]
    """The line breaks between `lines`, as they were."""
    protection: Protection

    @property
    def text(self) -> str:
        return _joined([line.text for line in self.lines], self.breaks)

    @property
    def found(self) -> list[Span]:
        return spans(self.source, self.protection)

    @property
    def changed(self) -> bool:
        return any(line.changed for line in self.lines)

    @property
    def placing(self) -> bool:
        return self.changed and bool(self.text.strip())

    @property
    def index(self) -> list[int]:
        """Where each character of `text` is in `source`."""
        found, source_at = [], 0
        for line, gap in zip(self.lines, [*self.breaks, ""], strict=True):
            mine = line.index or range(len(line.text))
            found += [source_at + k for k in mine] + [
                source_at + len(line.source) + k for k in range(len(gap))
            ]
            source_at += len(line.source) + len(gap)
        return found

    def place(self, translation: str, alignment: Alignment) -> Placed:
        """Each line of `translation` placed as its source line's (`Line.place`) with
        the links of `alignment` between their words; a translation of another number of
        lines as it is (the check then refuses it)."""
        parts = LINE_BREAK.split(translation)
        if len(parts) != len(self.lines):
            return Placed(translation, translation, list(range(len(translation))))
        source_words = [len(line.text.split()) for line in self.lines]
        target_words = [len(part.split()) for part in parts]
        texts, index, at = [], [], 0
        gaps = LINE_BREAK.findall(translation)
        for k, (line, part) in enumerate(zip(self.lines, parts, strict=True)):
            low, high = sum(source_words[:k]), sum(target_words[:k])
            mine = [
                (i - low, j - high)
                for i, j in alignment
                if low <= i < low + source_words[k] and high <= j < high + target_words[k]
            ]
            placed = line.place(part, mine)
            index += [at + n for n in placed.index]
            gap = gaps[k] if k < len(gaps) else ""
            index += [at + len(placed.text) + n for n in range(len(gap))]
            texts.append(placed.text)
            at += len(placed.text) + len(gap)
        return Placed(translation, _joined(texts, gaps), index)

    def aligned(self, alignment: Alignment, placed: Placed) -> Alignment:
        return aligned(self.text, self.source, self.index, alignment, placed)

    def check(self, result: str) -> str | None:
        parts = LINE_BREAK.split(result)
        if len(parts) != len(self.lines):
            return "newlines"
        for line, part in zip(self.lines, parts, strict=True):
            failed = line.check(part)
            if failed:
                return failed
        return None


Protected = Line | Lines
"""A text with its code taken out, a line at a time or whole."""


def _joined(lines: list[str], breaks: list[str]) -> str:
    return "".join(line + gap for line, gap in zip(lines, [*breaks, ""], strict=True))


def aligned(
    plain: str, source: str, index: list[int] | None, alignment: Alignment, placed: Placed
) -> Alignment:
    """`alignment` of `plain` with `placed.translation` as one of `source` with `placed.text`
    (each word linked as the word it is in; `index`: each plain character's place in
    `source`)."""
    source_words = _word_map(plain, source, index)
    target = _word_map(placed.translation, placed.text, placed.index)
    links = {(source_words[i], target[j]) for i, j in alignment}
    return sorted(links) if source_words and target else []


def protect(text: str, protection: Protection) -> Protected:
    """`text` with its code taken out (`.text`), ready to be put back: a line at a time where it
    has several and code in them."""
    if LINE_BREAK.search(text) and spans(text, protection):
        parts = LINE_BREAK.split(text)
        lines = [protect_line(part, protection) for part in parts]
        return Lines(text, lines, LINE_BREAK.findall(text), protection)
    return protect_line(text, protection)


def protect_line(text: str, protection: Protection) -> Line:
    """`text` (one line, or one with no code to take out) with its code taken out."""
    found = spans(text, protection)
    marker = protection.accelerator
    at = accelerator_at(text, marker, found) if marker is not None else -1
    if not found and at < 0:
        return Line(text, Tagged(text), {}, [], [], protection)
    builder = _Builder(text, found, at if at >= 0 else None)
    tagged = Tagged("".join(builder.plain), builder.root)
    accelerator = (marker, builder.letter) if at >= 0 else None
    ordered = list(dict.fromkeys(builder.sentinel_of[id(s)] for s in found if s.ordered))
    return Line(
        text,
        tagged,
        builder.pieces,
        ordered,
        found,
        protection,
        accelerator,
        builder.index,
        builder.apart,
    )


@dataclass(frozen=True)
class Placed:
    """A translation with the code put back (`text`), and where each character of the
    model's `translation` is in it (`index`)."""

    translation: str
    text: str
    index: list[int]


def _word_map(plain: str, full: str, index: list[int] | None) -> list[int]:
    """The word of `full` that each word of `plain` is in (`index`: each plain character's
    place in `full`, None for the same place)."""
    starts = [start for start, _ in words(full)]
    return [
        bisect.bisect_right(starts, start if index is None else index[start]) - 1
        for start, _ in words(plain)
    ]


def keep(text: str, protection: Protection) -> Line:
    """`text` as it is, for a translation that is checked but has no code to put back (a
    translation memory's, whose target carries its own)."""
    return Line(text, Tagged(text), {}, [], spans(text, protection), protection)


_SPACE = " \t"
"""The spaces a span takes with it (never a line break: lines are translated apart)."""


class _Builder:
    """The plain text and elements of a string and its spans."""

    def __init__(self, text: str, found: list[Span], marker: int | None) -> None:
        self.text, self.marker = text, marker
        self.plain: list[str] = []
        self.index: list[int] = []  # where each plain character is in the original
        self.length, self.letter = 0, -1
        self.tail = ""  # the plain text's last two characters
        self.root, self.pieces, self.sentinel_of = Element(""), {}, {}
        self.apart: dict[str, tuple[str, str]] = {}
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
        sides = (text[start - 1] if start > 0 else " ", text[end] if end < len(text) else " ")
        self.apart[mark] = (_kind(piece[0], sides[0]), _kind(piece[-1], sides[1]))
        element = Element(mark, start=self.length, end=self.length)
        self.parent(stack).children.append(element)
        return end

    def next_start(self, end: int) -> int:
        """Where the first span from `end` on starts (the text's end: none)."""
        k = bisect.bisect_left(self.starts, end)
        return self.starts[k] if k < len(self.starts) else len(self.text)

    def sentinel(self, piece: str, group: Iterable[Span]) -> str:
        mark = chr(_SENTINEL + len(self.pieces))
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
    """A span with the brackets or quotes that hold nothing else (`(%s)`, `"%s"`), and the
    punctuation that ties it to no word (`#%lu,`, `%s: `), but a sentence's end (`%s.`); never
    beyond `low` .. `high` (the spans beside it)."""
    while start > low and end < high:
        k = OPENING.find(text[start - 1])
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


def _kind(edge: str, beside: str) -> str:
    """What code ending in `edge` had `beside` it in the source: "word" (a letter, digit or
    `_`: `file%d`), "space" (or the text's edge), "other" (punctuation: `$HOME.`); "word"
    too where the code's own edge is a space (it brings its space with it)."""
    if edge.isspace() or _word(beside):
        return "word"
    return "space" if beside.isspace() else "other"


def _parted(neighbour: str, kind: str, edge: str) -> bool:
    """Whether code whose `edge` was `kind`-apart in the source needs a space to stay apart
    from `neighbour` in the translation."""
    if kind == "space":
        return not neighbour.isspace() and neighbour not in OPENING and edge not in CLOSING
    return kind == "other" and _word(neighbour) and _word(edge)


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _punctuation(char: str) -> bool:
    return not char.isspace() and not char.isalnum() and char != "_"


def _with_accelerator(
    protected: Line, translation: str, placed: str, alignment: Alignment, mark: str
) -> str:
    """`placed` (the translation with sentinels) with the accelerator's marker before a letter
    of the word aligned to the source word that had it: the same letter where that word has
    it, else its first letter; the first letter of the translation where no word is aligned."""
    letter = protected.accelerator[1]
    source = protected.text
    word = max(bisect.bisect_right([start for start, _ in words(source)], letter) - 1, 0)
    spans_ = words(translation)
    targets = sorted(j for i, j in alignment if i == word and j < len(spans_))
    at = -1
    if targets:
        start, end = spans_[targets[0]]
        chunk = translation[start:end].lower()
        k = chunk.find(source[letter].lower())
        if k < 0:
            k = next((n for n, c in enumerate(chunk) if c.isalnum()), -1)
        at = start + k if k >= 0 else -1
    if at < 0:
        at = next((n for n, c in enumerate(translation) if c.isalnum()), -1)
    if at < 0:
        return placed
    k = -1  # the placed index of translation character `at`: count the characters not sentinels
    for n, c in enumerate(placed):
        if ord(c) < _SENTINEL:
            k += 1
            if k == at:
                return placed[:n] + mark + placed[n:]
    return placed
