"""Code inside text, protected by construction: placeholders, markup, URLs and keyboard
accelerators taken out of a string before the model sees it and put back exactly once after.

A model copies `%s` most of the time, and "most" breaks software: a `%d` where `%s` was crashes
a C program, a lost `{count}` a Python one. So nothing that is code goes through the model.
`protect` finds the spans of a string in the syntaxes it is written in
(`vaswani.documents.spans`) and gives the `Tagged` form that .html files use
(`vaswani.documents.plain`): the plain text the model translates and the spans as elements over
it. Markup that wraps words (`<a href=...>our site</a>`) becomes an element around them; any
other span an empty element at its place, with the space that parted it from its neighbours.
`Line.place` puts them back around the
translated words aligned to the source's (`vaswani.documents.markup.place`): each span once, as
it was, the spans whose order the program depends on (printf's `%s %d`) in their order. A
keyboard accelerator (`_Open`, `&Save`, `~Print`) is moved onto a letter of the word aligned to
the one it marked, exactly one. `Line.check` then finds the spans of the result again: the
same spans, in order where it matters, the accelerator once, as many line breaks. A result that
fails is not written: the caller keeps the text as it was.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass, field

from vaswani.documents.markup import Alignment, Tagged, place, words
from vaswani.documents.plain import CLOSING, OPENING, SENTINEL, Builder, word_char
from vaswani.documents.spans import Protection, Span, accelerator_at, check, spans

_EMPTY_QUOTES = re.compile(r"([\"'«“‘„‹])(\s*)([\"'»”’“›])")


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
    quoted: frozenset[str] = frozenset()
    """The empty elements whose code was alone inside quotes (`'%s'`): put back inside the
    quotes the translation has there."""
    apart: dict[str, tuple[str, str]] = field(default_factory=dict)
    """What each empty element's code had beside it in the source (before, after): "word",
    "space" or "other" (`vaswani.documents.plain.kind`). What it gets beside it in the
    translation must not join it to a word it was apart from (`$HOME` and `NEW` would read as
    `$HOMENEW`)."""

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
        translation = visible(translation)
        if not self.changed:
            return Placed(translation, translation, list(range(len(translation))))
        if not self.text.strip():  # nothing but code: kept as it is
            return Placed(translation, self.source, [0] * len(translation))
        placed = _into_quotes(place(self.tagged, translation, alignment), self.quoted)
        pieces = self.pieces
        if self.accelerator is not None:
            mark = chr(SENTINEL + len(pieces))
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
        translation = visible(translation)
        parts = LINE_BREAK.split(translation)
        if len(parts) != len(self.lines):
            return Placed(translation, translation, list(range(len(translation))))
        # the first word of each line, counted over the whole text and its translation
        source_at = [0, *itertools.accumulate(len(line.text.split()) for line in self.lines)]
        target_at = [0, *itertools.accumulate(len(part.split()) for part in parts)]
        links: list[Alignment] = [[] for _ in parts]
        for i, j in alignment:
            k = bisect.bisect_right(source_at, i) - 1
            if k < len(parts) and target_at[k] <= j < target_at[k + 1]:
                links[k].append((i - source_at[k], j - target_at[k]))
        texts, index, at = [], [], 0
        gaps = LINE_BREAK.findall(translation)
        for k, (line, part) in enumerate(zip(self.lines, parts, strict=True)):
            placed = line.place(part, links[k])
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


def visible(translation: str) -> str:
    """A model's `translation` without characters from SENTINEL on, which stand for the spans
    taken out (a source's own, from Unicode's last private use plane, are not put back)."""
    return "".join(c for c in translation if ord(c) < SENTINEL)


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
    found = spans(text, protection)
    if found and LINE_BREAK.search(text):
        parts = LINE_BREAK.split(text)
        lines = [protect_line(part, protection) for part in parts]
        return Lines(text, lines, LINE_BREAK.findall(text), protection)
    return protect_line(text, protection, found)


def protect_line(text: str, protection: Protection, found: list[Span] | None = None) -> Line:
    """`text` (one line, or one with no code to take out) with its code taken out; `found`:
    its spans, where they were read already."""
    found = spans(text, protection) if found is None else found
    marker = protection.accelerator
    at = accelerator_at(text, marker, found) if marker is not None else -1
    if not found and at < 0:
        return Line(text, Tagged(text), {}, [], [], protection)
    builder = Builder(text, found, at if at >= 0 else None)
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
        frozenset(builder.quoted),
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


def _parted(neighbour: str, kind: str, edge: str) -> bool:
    """Whether code whose `edge` was `kind`-apart in the source needs a space to stay apart
    from `neighbour` in the translation (an ASCII letter always: `%{reason}s` is other code)."""
    if kind != "word" and neighbour.isascii() and neighbour.isalpha():
        return True
    if kind == "space":
        return not neighbour.isspace() and neighbour not in OPENING and edge not in CLOSING
    return kind == "other" and word_char(neighbour) and word_char(edge)


def _into_quotes(placed: str, quoted: frozenset[str]) -> str:
    """`placed` with each quoted element (`Line.quoted`) moved into the empty quotes the
    translation has, in order, when it has as many as there are such elements (else as
    placed)."""
    marks = [c for c in placed if c in quoted]
    rest = "".join(c for c in placed if c not in quoted)
    pairs = list(_EMPTY_QUOTES.finditer(rest))
    if not marks or len(pairs) != len(marks):
        return placed
    out, at = [], 0
    for mark, pair in zip(marks, pairs, strict=True):
        inner = pair.group(2)
        half = (len(inner) + 1) // 2
        out += [rest[at : pair.start()], pair.group(1), inner[:half], mark, inner[half:]]
        out.append(pair.group(3))
        at = pair.end()
    return "".join(out) + rest[at:]


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
        if ord(c) < SENTINEL:
            k += 1
            if k == at:
                return placed[:n] + mark + placed[n:]
    return placed
