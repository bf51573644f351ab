"""Translation memory: translations already approved, reused.

A memory is read from the corpora `vaswani prepare` reads (TMX, TSV, XLIFF and PO/MO, whose
readers keep approved translations only: no fuzzy or empty PO entries, XLIFF targets whatever
their state), streamed, so a million entries cost their text and a dictionary, not a copy of the
file. A segment whose source equals an entry's after whitespace is normalised is answered with the
entry's target verbatim (`Translation.origin` "memory", confidence 1), and a text of several
sentences that an entry holds whole is answered whole; with a fuzzy threshold, the
most similar entry (rapidfuzz's normalised Indel similarity, 0-100) at or above it is reported
beside the model's translation.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from vaswani.decoding.text import Translation
from vaswani.errors import VaswaniError
from vaswani.translation.segment import Sentences, whole

FUZZY_ROWS = 64
"""Segments scored against the whole memory at once (a block of rows x entries bytes)."""


class MemoryFileError(VaswaniError, ValueError):
    """A translation memory that cannot be read."""


def key_of(text: str) -> str:
    """The form entries and segments are matched in: whitespace runs as one space, ends trimmed."""
    return " ".join(text.split())


class Memory:
    """Approved translations by their normalised source."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self.entries: dict[str, str] = {}
        for source, target in pairs:
            key = key_of(source)
            if key and target.strip():
                self.entries[key] = target
        self._keys: list[str] | None = None

    def __len__(self) -> int:
        return len(self.entries)

    @classmethod
    def read(
        cls, paths: list[Path], source: str | None = None, target: str | None = None
    ) -> Memory:
        """A memory of every pair in `paths`, read as `vaswani prepare` reads corpora (by
        extension; TMX and XLIFF pick `source` and `target` languages by their tags)."""
        from vaswani.data.corpora import DataError
        from vaswani.data.readers import REGISTRY, ReadOptions, format_of, open_corpora

        try:
            corpora = open_corpora(
                [Path(p) for p in paths], ReadOptions(src_lang=source, tgt_lang=target)
            )
            return cls(pair for corpus in corpora for pair in corpus.pairs)
        except DataError as error:
            formats = [format_of(Path(p)) for p in paths]
            tagged = any(REGISTRY[f].tagged for f in formats if f is not None)
            unnamed = tagged and not (source and target)  # picked by their tags
            hint = " (the model's data records no language pair)" if unnamed else ""
            raise MemoryFileError(f"translation memory: {error}{hint}") from None

    def unsplit(self, sentences: Sentences) -> Sentences:
        """`sentences` with each text of several sentences that the memory holds whole made one
        segment again, so that it is answered whole (a catalog's message of two sentences)."""
        texts = tuple(
            whole(original)
            if len(text.sentences) > 1 and key_of(original) in self.entries
            else text
            for text in sentences.texts
            for original in [text.join(list(text.sentences))]
        )
        return Sentences(texts)

    def holds(self, text: str) -> bool:
        """Whether the memory holds `text` whole."""
        return key_of(text) in self.entries

    def exact(self, segments: list[str]) -> dict[int, list[Translation]]:
        """The segments the memory holds, by index: its target as their one translation."""
        known = {}
        for i, segment in enumerate(segments):
            target = self.entries.get(key_of(segment))
            if target is not None:
                known[i] = [Translation(target, 0.0, 0.0, 1, assessed=1.0, origin="memory")]
        return known

    def mark_fuzzy(
        self, segments: list[str], found: list[list[Translation]], threshold: float
    ) -> None:
        """Give each segment's best translation made by the model (`found`, n-best lists by
        segment) its best fuzzy match at or above `threshold`."""
        todo = [i for i, f in enumerate(found) if f and f[0].origin == "model"]
        for j, match in self.fuzzy([segments[i] for i in todo], threshold).items():
            found[todo[j]][0].fuzzy = match

    def fuzzy(self, segments: list[str], threshold: float) -> dict[int, tuple[float, str, str]]:
        """The most similar entry of each segment at or above `threshold` (0-100), by index:
        (score, its source, its target)."""
        from rapidfuzz import fuzz, process

        if self._keys is None:
            self._keys = list(self.entries)
        found = {}
        wanted = [i for i, s in enumerate(segments) if key_of(s)]
        for start in range(0, len(wanted), FUZZY_ROWS):
            rows = wanted[start : start + FUZZY_ROWS]
            scores = process.cdist(
                [key_of(segments[i]) for i in rows],
                self._keys,
                scorer=fuzz.ratio,
                score_cutoff=threshold,
                dtype="uint8",
                workers=-1,
            )
            for row, i in enumerate(rows):
                best = int(scores[row].argmax())
                if scores[row, best] >= max(threshold, 1):
                    source = self._keys[best]
                    found[i] = (float(scores[row, best]), source, self.entries[source])
        return found
