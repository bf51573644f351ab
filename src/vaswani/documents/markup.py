"""Inline markup carried across translation by word alignment.

A sentence with inline markup (`el <b>gran</b> río`, XLIFF's `<g>`, a run of bold text in a Word
document) is translated once as plain text, and each element is put back around the translated
words aligned to the source words it wrapped. The markup itself is never translated, rewritten,
lost or duplicated: each element comes back once, with its opening and closing text exactly as
they were, properly nested; an element over words with no alignment (or over no words at all)
keeps its relative position.

`Tagged` is the format-neutral form: the plain text and a tree of `Element`s over character
ranges of it. The readers of each format build one (`vaswani.documents.html`); `place` writes
the translation with the elements in it.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from vaswani.errors import VaswaniError

Alignment = list[tuple[int, int]]


class Links(Sequence):
    """An alignment kept compactly: its pairs as unsigned ints in one array (8 bytes a link
    instead of a tuple's 64), for files whose every text's alignment is held until they are
    written (a million subtitle cues). Reads as the list of pairs it was made from."""

    __slots__ = ("flat",)

    def __init__(self, pairs: Iterable[tuple[int, int]]) -> None:
        self.flat = array("I", [n for pair in pairs for n in pair])

    def __len__(self) -> int:
        return len(self.flat) // 2

    def __getitem__(self, k: int) -> tuple[int, int]:  # type: ignore[override]
        k = range(len(self))[k]
        return self.flat[2 * k], self.flat[2 * k + 1]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.flat[0::2], self.flat[1::2], strict=True)


@dataclass
class Element:
    """Markup around the characters `start` .. `end` of the plain text (`start == end`: an
    element with nothing in it, or a void one such as `<br/>` or an image)."""

    opening: str
    closing: str = ""
    start: int = 0
    end: int = 0
    children: list[Element] = field(default_factory=list)
    tail: str = ""
    """Text written after the element when it has nothing in it (the space that followed an
    image in a text whose spaces were collapsed)."""


MAX_DEPTH = 100
"""The deepest inline markup read (real documents nest a few levels): placing recurses once a
level, and a file nested thousands deep is an attack, refused as it is read."""


class MarkupError(VaswaniError, ValueError):
    """Inline markup that cannot be carried across translation (nested too deeply)."""


@dataclass
class Tagged:
    """Plain text and the elements over it (`root.children`, in order, properly nested)."""

    text: str
    root: Element = field(default_factory=lambda: Element(""))

    def __post_init__(self) -> None:
        todo = [(element, 1) for element in self.root.children]
        while todo:
            element, depth = todo.pop()
            if depth > MAX_DEPTH:
                raise MarkupError(f"inline markup nested over {MAX_DEPTH} levels deep")
            todo.extend((child, depth + 1) for child in element.children)

    @property
    def elements(self) -> list[Element]:
        """Every element, in document order."""
        found, todo = [], list(reversed(self.root.children))
        while todo:
            element = todo.pop()
            found.append(element)
            todo.extend(reversed(element.children))
        return found


@dataclass
class _Placed:
    """An element's place among the parts of the translated words (`units`): parts `first` ..
    `last` (inclusive), or before part `first` when `last` is None (nothing in it)."""

    element: Element
    first: int
    last: int | None
    children: list[_Placed]
    glued: bool = False
    """Nothing in it, and glued to the word before it (`word<x/> next`): after the translation
    of that word rather than before the next."""


_PARTS = re.compile(r"^([^\w]*)(.*?)([^\w]*)$", re.S)
PARTS = 3
"""Each word is placed as three parts: its leading punctuation, its core and its trailing
punctuation, so that `<i>dark</i>.` comes back as `<i>DUNKEL</i>.`, not `<i>DUNKEL.</i>`."""


def words(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each whitespace-separated word."""
    return [match.span() for match in re.finditer(r"\S+", text)]


def units(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each word's three parts (`PARTS`), in order; a word of punctuation
    only is all core."""
    found = []
    for start, end in words(text):
        lead, core, trail = _PARTS.match(text[start:end]).groups()
        if not core:
            lead, core, trail = "", lead + trail, ""
        middle, stop = start + len(lead), start + len(lead) + len(core)
        found += [(start, middle), (middle, stop), (stop, end)]
    return found


def place(
    tagged: Tagged,
    translation: str,
    alignment: Alignment,
    escape: Callable[[str], str] = lambda text: text,
) -> str:
    """`translation` (of `tagged.text`) with `tagged`'s elements around the words aligned to the
    words they wrap (`alignment`: pairs source word - translated word); text escaped by
    `escape`, markup as it was."""
    if not tagged.root.children:  # no markup: nothing to place
        return escape(translation)
    source, target = units(tagged.text), units(translation)
    n_source, n_target = len(source) // PARTS, len(target) // PARTS
    links: dict[int, list[int]] = {}
    for i, j in alignment:
        if i < n_source and j < n_target:
            links.setdefault(i, []).append(j)
    mapper = _Mapper(source, n_target, links)
    placed = mapper.children(tagged.root.children, 0, len(target) - 1)
    before: list[list[str]] = [[] for _ in range(len(target) + 1)]
    after: list[list[str]] = [[] for _ in range(len(target) + 1)]
    _mark(placed, before, after)
    out, at = [], 0
    for u, (start, end) in enumerate(target):
        out += [escape(translation[at:start]), *before[u], escape(translation[start:end])]
        out += after[u]
        at = end
    out += [escape(translation[at:]), *before[len(target)]]
    return "".join(out)


class _Mapper:
    """Where each source element goes among the parts of the translated words."""

    def __init__(self, source: list[tuple[int, int]], n_target: int, links: dict) -> None:
        self.source, self.n_target, self.links = source, n_target, links
        self.n_source = len(source) // PARTS
        self.starts = [start for start, _ in source]  # sorted: parts come in order
        self.ends = [end for _, end in source]

    def targets(self, i: int) -> list[int]:
        """The translated words of source word i: aligned, or at its relative position."""
        relative = min(self.n_target - 1, i * self.n_target // max(self.n_source, 1))
        return self.links.get(i) or [relative]

    def covered(self, element: Element) -> list[int]:
        """The source word parts the element wraps (those of some length it overlaps)."""
        first = bisect.bisect_right(self.ends, element.start)  # the first part ending after it
        last = bisect.bisect_left(self.starts, element.end)  # the first part starting at its end
        return [u for u in range(first, last) if self.source[u][0] < self.source[u][1]]

    def span(self, element: Element) -> tuple[int, int | None, bool]:
        """The translated parts the element goes around (last None: nothing in it, before part
        first, or after it when glued), before clipping to its parent."""
        covered = self.covered(element) if self.n_target else []
        if not covered:  # nothing in it: after the word it is glued to, or before the next
            if not self.n_target:
                return 0, None, False
            glued = bisect.bisect_right(self.ends, element.start) - 1  # the last part ending here
            if glued >= 0 and self.ends[glued] == element.start and glued % PARTS == PARTS - 1:
                i = glued // PARTS  # right after a whole word: after its translation
                return max(self.targets(i)) * PARTS + PARTS - 1, None, True
            u = bisect.bisect_left(self.starts, element.start)  # the first part from here on
            if u == len(self.source):
                return self.n_target * PARTS, None, False
            return min(self.targets(u // PARTS)) * PARTS + u % PARTS, None, False
        found = [j * PARTS + u % PARTS for u in covered for j in self.targets(u // PARTS)]
        return min(found), max(found), False

    def children(self, elements: list[Element], low: int, high: int) -> list[_Placed]:
        """`elements` (siblings) placed inside the translated parts low .. high: each clipped to
        that range, and moved so that no two overlap (an element left without parts keeps its
        place, empty)."""
        placed = []
        for element in elements:
            first, last, glued = self.span(element)
            if glued and low <= first <= high:
                placed.append(_Placed(element, first, None, [], glued=True))
            elif last is None or high < low:
                first = min(max(first, low), high + 1)
                placed.append(_Placed(element, first, None, []))
            else:
                first = min(max(first, low), high)
                last = min(max(last, first), high)
                placed.append(_Placed(element, first, last, []))
        placed.sort(key=lambda p: (p.first + 0.5 * p.glued, p.last is not None))
        taken = low - 1  # the last part a sibling already holds
        for p in placed:
            if p.last is not None and p.first <= taken:
                p.first = taken + 1
                if p.first > p.last:  # its parts all went to an earlier sibling
                    p.last = None
                    p.first = min(p.first, high + 1)
            if p.last is not None:
                taken = p.last
                p.children = self.children(p.element.children, p.first, p.last)
            else:
                p.children = self.children(p.element.children, p.first, p.first - 1)
        return placed


def _mark(placed: list[_Placed], before: list[list[str]], after: list[list[str]]) -> None:
    """Put each element's opening before its first part and its closing after its last (an
    empty element whole before its part, or after it when glued), parents outside their
    children."""
    for p in placed:
        if p.last is None:
            where = (after if p.glued else before)[p.first]
            where.append(p.element.opening)
            _mark(p.children, before, after)
            where.append(p.element.closing + p.element.tail)
            continue
        before[p.first].append(p.element.opening)
        _mark(p.children, before, after)
        after[p.last].append(p.element.closing)
