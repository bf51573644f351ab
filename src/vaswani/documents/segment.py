"""Sentences: a text of several sentences split into the segments a model translates, one at a
time, and joined back with the text's own spaces, line breaks and paragraph breaks.

A model learns from sentence pairs; given five sentences as one sequence it translates far worse
than given them one by one. The splitting is sentencex's (Wikimedia's rule-based segmenter, with
abbreviation lists for many languages and fallbacks between related ones), chosen by measuring it
beside pysbd on real text (the 5,473 English and 5,480 German one-line messages of LibreOffice's
German catalogs that end in . ! ?, joined four at a time; 2 cores of a Xeon):

    splitter    boundaries found (en / de)   traps split wrongly   sentences per second
    sentencex   98.3% / 96.7%                0 of 12               ~350,000
    pysbd       100.0% / 98.8%               2 of 12               ~3,300

The traps are decimals, ordinals and abbreviations in German, English and Spanish ("3.5",
"1. Januar", "z. B.", "Dr.", "p. ej.", "Sr.", "e.g."), which must not split; sentencex's misses
are sentences that end in a closing quote or bracket before the full stop (»Öffnen«.), pysbd's
split "3.5" and "p. ej." and missed sentences ending in a number. At a hundred times the speed,
splitting a whole document costs nothing beside translating it.

Every line break is a boundary too: a line is never joined with the next, so line and paragraph
breaks come back exactly where they were.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vaswani.errors import VaswaniError

_EDGES = re.compile(r"^(\s*)(.*?)(\s*)$", re.S)
_LINES = re.compile(r"(\r\n|\r|\n)")


class SegmentationError(VaswaniError):
    """Sentence splitting is not available (its library is missing)."""


@dataclass(frozen=True)
class Segmented:
    """A text as its sentences and the text between them: `gaps[i]` comes before `sentences[i]`
    and `gaps[-1]` after the last one, so `join(sentences)` gives the text back."""

    sentences: tuple[str, ...]
    gaps: tuple[str, ...]

    def join(self, translations: list[str]) -> str:
        """The text with each sentence replaced by its translation, in the text's own spacing."""
        if len(translations) != len(self.sentences):
            raise ValueError(
                f"{len(translations)} translations for {len(self.sentences)} sentences"
            )
        parts = [gap + text for gap, text in zip(self.gaps, translations, strict=False)]
        return "".join(parts) + self.gaps[-1]


def split_sentences(text: str, language: str) -> Segmented:
    """`text` split into sentences by the rules of `language` (a tag such as "de", "pt_BR" or
    "en-GB": its first part), and at every line break."""
    segment = _segmenter()
    code = re.split(r"[-_]", language.strip(), maxsplit=1)[0].lower() or "en"
    sentences: list[str] = []
    gaps: list[str] = [""]
    for line in _LINES.split(text):
        if _LINES.fullmatch(line) or not line.strip():
            gaps[-1] += line
            continue
        for piece in segment(code, line):
            before, core, after = _EDGES.match(piece).groups()
            gaps[-1] += before
            if core:
                sentences.append(core)
                gaps.append(after)
            else:
                gaps[-1] += after
    return Segmented(tuple(sentences), tuple(gaps))


def _segmenter():  # noqa: ANN202 - sentencex's function
    try:
        from sentencex import segment
    except ImportError:
        raise SegmentationError(
            "sentence splitting needs sentencex: pip install sentencex (or reinstall vaswani)"
        ) from None
    return segment
