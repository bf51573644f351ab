"""Subtitles (SRT and WebVTT): numbering, timings, styles and notes kept, one translation per cue.

The files are read by the field's parsers (`srt`, `webvtt-py`), which also refuse broken
timings; the translation is written into the original blocks, so everything but the cue text
stays as it was. A sentence that runs over several cues (a cue not ending in . ! ? or …) is
translated whole, and its translation shared out among its cues by word alignment: each
translated word goes to the cue of the source word it is aligned to (kept in order). A cue of
two lines gets its translation back on two lines, broken at the space nearest the middle.
"""

from __future__ import annotations

import functools
import io
import itertools
import re
from array import array
from dataclasses import dataclass, field

from vaswani.documents.formats import Document, DocumentError, DocumentOptions, decoded
from vaswani.documents.markup import Alignment, Element, Tagged, place

_BLOCKS = re.compile(r"(?:\r?\n){2,}")
_TAG = re.compile(r"<(/?)([A-Za-z][\w.]*|\d[\d:.]*)[^<>]*>")
_PAIRED = {"b", "i", "u", "s", "font", "c", "v", "lang", "ruby", "rt", "span"}
_VTT_BLOCK = re.compile(r"(NOTE|STYLE|REGION)(\s|$)")
"""What a WebVTT block that is not a cue (nor the header) may be."""
MAX_SENTENCE_CUES = 12
"""The most cues translated as one sentence: a file whose cues never end a sentence (no
punctuation at all) is translated 12 cues at a time, not as one text of every cue."""
_ENDS_SENTENCE = re.compile(r"""[.!?…。！？]["'»”’)\]]*$""")


@dataclass
class Subtitles(Document):
    """A subtitle file's text and where its cues lie in it (a cue: its lines up to its timing
    line, then its text lines), as offsets, so that a million cues cost their text and a few
    numbers each; `markup`: alignments share sentences out."""

    text: str
    newline: str
    heads: array = field(default_factory=lambda: array("q"))
    """Where each cue's timing line ends (its text lines begin a newline later)."""
    ends: array = field(default_factory=lambda: array("q"))
    """Where each cue ends."""
    others: list[tuple[int, int]] = field(default_factory=list)
    """Where each block that is no cue begins and ends (a header, a note, a style)."""
    markup = True

    def rows(self, i: int) -> list[str]:
        """Cue i's text lines."""
        head, end = self.heads[i], self.ends[i]
        return self.text[head + len(self.newline) : end].split(self.newline) if end > head else []

    @functools.cached_property
    def groups(self) -> list[list[int]]:
        """Runs of consecutive cues that make one sentence (the last of each ends one)."""
        found, current = [], []
        for i, text in enumerate(self.plain):
            if not text.strip():
                continue
            current.append(i)
            if _ENDS_SENTENCE.search(text) or len(current) == MAX_SENTENCE_CUES:
                found.append(current)
                current = []
        return found + ([current] if current else [])

    @functools.cached_property
    def plain(self) -> list[str]:
        """Each cue's text without its tags."""
        return [cue_tagged(self.rows(i)).text for i in range(len(self.heads))]

    def texts(self) -> list[str]:
        return [" ".join(self.plain[i] for i in group) for group in self.groups]

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        out, at = bytearray(), 0  # the file as written up to `at`, then each cue translated
        for group, translation, alignment in zip(
            self.groups, translations, alignments, strict=True
        ):
            rows = [self.rows(i) for i in group]
            tagged = [cue_tagged(cue_rows) for cue_rows in rows]
            words = translation.split()
            parts = share([t.text for t in tagged], len(words), alignment or [])
            first_source = 0
            for i, cue_rows, cue, part in zip(group, rows, tagged, parts, strict=True):
                n_source = len(cue.text.split())
                local = [
                    (a - first_source, b - part.start)
                    for a, b in alignment or []
                    if first_source <= a < first_source + n_source and b in part
                ]
                text = place(cue, " ".join(words[j] for j in part), local)
                translated = self.newline.join(lines(text, len(cue_rows)))
                out += f"{self.text[at : self.heads[i]]}{self.newline}{translated}".encode()
                at = self.ends[i]
                first_source += n_source
        out += self.text[at:].encode()
        return bytes(out)


def cue_text(lines: list[str]) -> str:
    """A cue's text on one line, its spaces collapsed, its tags (<i>, <c.red>, <v Bob>) in."""
    return " ".join(" ".join(lines).split())


def cue_tagged(lines: list[str]) -> Tagged:
    """A cue's text (its `lines`) without its tags, which are elements over it (an unmatched one
    empty)."""
    raw, text, root = cue_text(lines), [], Element("")
    stack: list[tuple[str, Element]] = []
    at = 0
    for match in _TAG.finditer(raw):
        text.append(raw[at : match.start()])
        at, where = match.end(), len("".join(text))
        closing, name = match.group(1), match.group(2).lower()
        if closing and stack and stack[-1][0] == name:
            _, element = stack.pop()
            element.closing, element.end = match.group(), where
            continue
        element = Element(match.group(), start=where, end=where)
        (stack[-1][1] if stack else root).children.append(element)
        if not closing and name in _PAIRED:
            stack.append((name, element))
    text.append(raw[at:])
    plain = "".join(text)
    for _, element in stack:  # never closed in the cue: kept where it opened
        element.end = element.start
    return Tagged(plain, root)


def share(sources: list[str], n_target: int, alignment: Alignment) -> list[range]:
    """Which of the `n_target` translated words go to each of the cues `sources` (joined by
    spaces): each word to the cue of its first aligned source word, in order; without
    alignment, by the cues' share of the source's characters."""
    if len(sources) == 1:
        return [range(n_target)]
    cue_of_word = [k for k, text in enumerate(sources) for _ in text.split()]
    owner: list[float | None] = [None] * n_target
    for i, j in sorted(alignment):
        if j < n_target and i < len(cue_of_word) and owner[j] is None:
            owner[j] = cue_of_word[i]
    total = sum(len(text) for text in sources) or 1
    bounds = [sum(len(t) for t in sources[: k + 1]) / total for k in range(len(sources))]
    counts = [0] * len(sources)
    cue = 0
    for j in range(n_target):
        wanted = owner[j]
        if wanted is None:  # no alignment: where its relative place falls
            wanted = next(k for k, b in enumerate(bounds) if (j + 0.5) / n_target <= b)
        cue = max(cue, int(wanted))  # never back to an earlier cue
        counts[cue] += 1
    starts = [sum(counts[:k]) for k in range(len(sources))]
    return [range(start, start + count) for start, count in zip(starts, counts, strict=True)]


def lines(text: str, count: int) -> list[str]:
    """`text` on `count` lines (1 or 2): two broken at the space nearest the middle."""
    if count < 2 or " " not in text:
        return [text]
    spaces = [m.start() for m in re.finditer(" ", text)]
    cut = min(spaces, key=lambda at: abs(at - len(text) / 2))
    return [text[:cut], text[cut + 1 :]]


def blocks(text: str, is_timing: re.Pattern) -> Subtitles:
    """The file's cues (blocks with a timing line) and its other blocks, by offset."""
    newline = "\r\n" if "\r\n" in text else "\n"
    found = Subtitles(text, newline)
    body, at = len(text.rstrip("\r\n")), 0
    for match in itertools.chain(_BLOCKS.finditer(text, 0, body), [None]):
        end = match.start() if match else body
        head, row_start = None, at
        for row in text[at:end].split(newline) if end > at else []:
            if is_timing.search(row):
                head = row_start + len(row)
                break
            row_start += len(row) + len(newline)
        if head is not None:
            found.heads.append(head)
            found.ends.append(end)
        elif end > at:
            found.others.append((at, end))
        if match:
            at = match.end()
    return found


def read_srt(data: bytes, name: str, options: DocumentOptions) -> Subtitles:
    import srt

    text = decoded(data, name)
    try:
        count = sum(1 for _ in srt.parse(text))
    except (srt.SRTParseError, ValueError, OverflowError) as error:  # 99,999,999,999 hours
        raise DocumentError(f"{name}: not a valid SRT file ({error})") from None
    return _checked(text, count, re.compile(r"-->"), name)


def read_vtt(data: bytes, name: str, options: DocumentOptions) -> Subtitles:
    import webvtt

    text = decoded(data, name)
    try:
        count = len(webvtt.from_buffer(io.StringIO(text)).captions)
    except Exception as error:  # webvtt-py raises its own errors and plain ones
        raise DocumentError(f"{name}: not a valid WebVTT file ({error})") from None
    document = _checked(text, count, re.compile(r"-->"), name)
    for start, end in document.others:
        block = text[start:end]
        if block.strip() and not _VTT_BLOCK.match(block) and not block.startswith("WEBVTT"):
            raise DocumentError(
                f"{name}: line {text.count(chr(10), 0, start) + 1}: a block that is no cue (its "
                "timing line is missing or broken), note, style or region"
            )
    return document


def _checked(text: str, count: int, timing: re.Pattern, name: str) -> Subtitles:
    document = blocks(text, timing)
    if len(document.heads) != count:
        raise DocumentError(
            f"{name}: {count} cues by the parser, {len(document.heads)} blocks with a timing "
            "line; is a cue missing its blank line?"
        )
    return document
