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
from collections.abc import Container, Iterator
from dataclasses import dataclass
from typing import TypeVar

from vaswani.errors import VaswaniError

T = TypeVar("T")

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


def whole(text: str) -> Segmented:
    """`text` as one segment, as it is (no sentence of a blank text)."""
    return Segmented((text,), ("", "")) if text.strip() else Segmented((), (text,))


@dataclass(frozen=True)
class Sentences:
    """Several texts as one list of segments to translate together (`flat`), and the way back
    from the segments' translations to the texts'. With `split` each text's segments are its
    sentences; without, each non-blank text is one segment as it is."""

    texts: tuple[Segmented, ...]

    @classmethod
    def of(
        cls, texts: list[str], language: str | list[str | None] | None = None, split: bool = True
    ) -> Sentences:
        """`texts` split by the rules of `language` (one for all, or one per text; None:
        sentencex's default rules)."""
        if not split:
            return cls(tuple(whole(text) for text in texts))
        languages = language if isinstance(language, list) else [language] * len(texts)
        return cls(
            tuple(
                split_sentences(text, lang or "en")
                for text, lang in zip(texts, languages, strict=True)
            )
        )

    @property
    def flat(self) -> list[str]:
        """Every text's segments, in order."""
        return [sentence for text in self.texts for sentence in text.sentences]

    def owners(self) -> Iterator[tuple[int, int]]:
        """(text index, segment index within it) of each segment of `flat`."""
        for i, text in enumerate(self.texts):
            for j in range(len(text.sentences)):
                yield i, j

    def labels(self, what: str) -> list[str]:
        """How messages name each segment: "line 3", or "line 3, sentence 2" in a text of several."""
        return [
            f"{what} {i + 1}" + (f", sentence {j + 1}" if len(self.texts[i].sentences) > 1 else "")
            for i, j in self.owners()
        ]

    def spread(self, per_text: list[T] | None) -> list[T] | None:
        """A value per text (a multilingual model's target token) as one per segment."""
        return None if per_text is None else [per_text[i] for i, _ in self.owners()]

    def blanked(self, indices: Container[int]) -> Sentences:
        """These sentences with the segments at `indices` (of `flat`) made blank: what
        translation then leaves alone (e.g. those a translation memory answers)."""
        flat = iter(range(len(self.flat)))
        return Sentences(
            tuple(
                Segmented(
                    tuple("" if next(flat) in indices else s for s in text.sentences), text.gaps
                )
                for text in self.texts
            )
        )

    def per_text(self, per_segment: list[T]) -> list[list[T]]:
        """What was found for each segment of `flat`, grouped by text."""
        if len(per_segment) != sum(len(text.sentences) for text in self.texts):
            raise ValueError(f"{len(per_segment)} results for {len(self.flat)} segments")
        found, start = [], 0
        for text in self.texts:
            found.append(per_segment[start : start + len(text.sentences)])
            start += len(text.sentences)
        return found

    def join(self, translations: list[str]) -> list[str]:
        """Each text with its segments replaced by their translations, in the text's own
        spacing; "" for a text without any (a blank text)."""
        return [
            text.join(mine) if text.sentences else ""
            for text, mine in zip(self.texts, self.per_text(translations), strict=True)
        ]


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
