"""Glossaries: terms whose translation is prescribed, found in the source and put into the output.

A term is found as whole words, after Unicode normalisation (NFKC) and case folding, the longest
term first where terms overlap ("file" inside "file name" is not a second match). The model
translates freely; then each term whose target is not already in the translation is put in place
of the translated words aligned to it (`vaswani.translation.align`, the model's own cross-attention
or its guided head), keeping their punctuation. A term none of whose words is aligned, or whose
words' translation another term has taken, is reported (`Translation.terms`), never dropped in
silence. Why this and not constrained beam search: docs/glossaries.md.

Files: TSV and CSV (source term, target term; `#` comments and a header line allowed) and TBX
(TBX 2 `termEntry` and TBX 3 `conceptEntry`, read with defusedxml: no entities, no DTD).
"""

from __future__ import annotations

import bisect
import csv
import io
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import defusedxml.ElementTree as SafeTree
from defusedxml import DefusedXmlException

from vaswani.decoding.text import Translation
from vaswani.errors import VaswaniError
from vaswani.languages import base_of
from vaswani.translation.align import Alignment, word_starts

MAX_TERM_CHARS = 300
"""Longer "terms" (a pasted paragraph, a hostile file's megabyte) are skipped and counted."""
MAX_TERM_WORDS = 16
MAX_FILE_BYTES = 64 << 20
WORD = re.compile(r"\w+(?:['’-]\w+)*")
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
HEADER = {"source", "src", "term", "source term", "target", "tgt", "translation", "target term"}


class GlossaryError(VaswaniError, ValueError):
    """A glossary file that cannot be read: one line naming the file and the fix."""


def normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def words_of(text: str) -> list[re.Match]:
    return list(WORD.finditer(unicodedata.normalize("NFKC", text)))


@dataclass(frozen=True)
class Match:
    """A term found in a source text: its whitespace-separated words (first, last), as
    alignments count them, and the prescribed target."""

    source: str
    target: str
    first: int
    last: int


@dataclass
class Glossary:
    """Source terms (as normalised word tuples) and their targets."""

    terms: dict[tuple[str, ...], str] = field(default_factory=dict)
    sources: dict[tuple[str, ...], str] = field(default_factory=dict)
    """Each term's source as written."""
    skipped: Counter = field(default_factory=Counter)
    """Entries not taken, by reason (empty, too long, a duplicate)."""
    longest: int = 0
    """The most words of a term: how far `find` looks ahead."""

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str]]) -> Glossary:
        """A glossary of (source term, target term) pairs; a later duplicate replaces an earlier."""
        glossary = cls()
        for source, target in pairs:
            glossary.add(source, target)
        return glossary

    def add(self, source: str, target: str) -> None:
        source, target = source.strip(), " ".join(target.split())
        key = tuple(normal(m.group()) for m in words_of(source))
        if not key or not target:
            self.skipped["empty"] += 1
        elif (
            len(source) > MAX_TERM_CHARS
            or len(target) > MAX_TERM_CHARS
            or len(key) > MAX_TERM_WORDS
        ):
            self.skipped[f"over {MAX_TERM_CHARS} characters or {MAX_TERM_WORDS} words"] += 1
        else:
            if key in self.terms:
                self.skipped["a duplicate (the later kept)"] += 1
            self.terms[key], self.sources[key] = target, source
            self.longest = max(self.longest, len(key))

    def __len__(self) -> int:
        return len(self.terms)

    def merged(self, other: Glossary | None) -> Glossary:
        """This glossary with `other`'s terms added (they win where both have one)."""
        if not other:
            return self
        terms, sources = {**self.terms, **other.terms}, {**self.sources, **other.sources}
        return Glossary(terms, sources, longest=max(self.longest, other.longest))

    def find(self, text: str) -> list[Match]:
        """The terms in `text`, left to right, the longest first where they overlap."""
        if not self.terms:
            return []
        normalised = unicodedata.normalize("NFKC", text)
        found = list(WORD.finditer(normalised))
        keys = [m.group().casefold() for m in found]
        starts = word_starts(normalised)
        matches, i = [], 0
        while i < len(keys):
            for n in range(min(self.longest, len(keys) - i), 0, -1):
                key = tuple(keys[i : i + n])
                if key in self.terms:
                    first = bisect.bisect_right(starts, found[i].start()) - 1
                    last = bisect.bisect_right(starts, found[i + n - 1].start()) - 1
                    matches.append(Match(self.sources[key], self.terms[key], first, last))
                    i += n
                    break
            else:
                i += 1
        return matches


def contains(text: str, term: str, within: bool = True) -> bool:
    """Whether `term` is in `text` as whole words (normalised and case-folded) or, `within`,
    a one-word term of 4 letters or more inside a word: inflected or compounded the way the
    model wrote it ("Achse" in "X-Achse", "Datei" in "Dateien"), which a replacement would
    only break."""
    wanted = [normal(m.group()) for m in words_of(term)]
    have = [normal(m.group()) for m in words_of(text)]
    n = len(wanted)
    if any(have[i : i + n] == wanted for i in range(len(have) - n + 1)):
        return True
    return within and n == 1 and len(wanted[0]) >= 4 and any(wanted[0] in word for word in have)


def put_terms(
    text: str, matches: list[Match], alignment: Alignment, protect: tuple[str, ...] = ()
) -> tuple[str, list[bool]]:
    """`text` (a translation) with each match's target put in place of the translated words
    aligned to its source words, and whether each was placed. The words it replaces are the
    longest run of consecutive aligned ones, their leading and trailing punctuation kept; where
    one of them carries a term of `protect` (one already in place), or none is aligned, the
    target is inserted beside them instead. A match is not placed when nothing in the sentence
    is aligned, or its words overlap another's."""
    words = text.split()
    # (first, last, target) of words replaced; (j + 0.5, j + 0.5, target) inserted after word j
    spans: list[tuple[float, float, str]] = []
    placed = []
    for match in matches:
        run = longest_run(sorted({j for i, j in alignment if match.first <= i <= match.last}))
        kept = [j for j in run if any(contains(words[j], t) for t in protect)]
        if kept:  # a word that carries another term stays; the term goes after it
            span: tuple[float, float] | None = (kept[-1] + 0.5, kept[-1] + 0.5)
        else:
            span = (run[0], run[-1]) if run else gap_for(match, alignment)
        free = span is not None and all(span[1] < a or span[0] > b for a, b, _ in spans)
        if free:
            spans.append((*span, match.target))
        placed.append(bool(free))
    for first, last, target in sorted(spans, reverse=True):
        if first != int(first):  # inserted after word `first - 0.5`
            words.insert(int(first + 0.5), target)
            continue
        first, last = int(first), int(last)
        lead = re.match(r"\W*", words[first]).group()
        trail = re.search(r"\W*$", words[last]).group()
        if first == 0 and words[0][len(lead) : len(lead) + 1].isupper():
            target = target[:1].upper() + target[1:]
        words[first : last + 1] = [lead + target + trail]
    return " ".join(words) if spans else text, placed


def gap_for(match: Match, alignment: Alignment) -> tuple[float, float] | None:
    """Where to insert a term none of whose words is aligned: after the translation of the
    nearest aligned source word before it, or else before that of the nearest after it."""
    before = [(i, j) for i, j in alignment if i < match.first]
    after = [(i, j) for i, j in alignment if i > match.last]
    if before:
        nearest = max(i for i, _ in before)
        at = max(j for i, j in before if i == nearest) + 0.5
    elif after:
        nearest = min(i for i, _ in after)
        at = min(j for i, j in after if i == nearest) - 0.5
    else:
        return None
    return at, at


def longest_run(values: list[int]) -> list[int]:
    """The longest run of consecutive integers in sorted `values` (the first of equal ones)."""
    best: list[int] = []
    run: list[int] = []
    for v in values:
        run = [*run, v] if run and v == run[-1] + 1 else [v]
        if len(run) > len(best):
            best = run
    return best


def enforce(
    glossary: Glossary,
    sources: list[str],
    found: list[list[Translation]],
    align: Callable[[list[int]], list[Alignment]],
) -> None:
    """Put the glossary's terms into the best translation of each source (`found`, n-best lists
    by source), and record each term's fate in its `terms`. `align(indices)` gives the word
    alignment of those sources with their best translations; only sentences with a term that
    is not yet in their translation are aligned."""
    matches = {  # a translation memory's answers are approved as they are
        i: glossary.find(source)
        for i, source in enumerate(sources)
        if found[i] and found[i][0].origin == "model"
    }
    todo = []
    for i, mine in matches.items():
        best = found[i][0]
        best.terms = [(m.source, m.target, contains(best.text, m.target)) for m in mine]
        if not all(placed for _, _, placed in best.terms):
            todo.append(i)
    for i, alignment in zip(todo, align(todo) if todo else [], strict=True):
        best = found[i][0]
        missing = [m for m, (_, _, done) in zip(matches[i], best.terms, strict=True) if not done]
        present = tuple(t for _, t, done in best.terms if done)
        best.text, placed = put_terms(best.text, missing, alignment, present)
        fates = iter(placed)
        best.terms = [(s, t, done or next(fates)) for s, t, done in best.terms]


def read_glossary(path: Path, source: str | None = None, target: str | None = None) -> Glossary:
    """A glossary file by its extension: .tbx (terms of languages `source` and `target`; by
    default the first two languages in the file), .csv, or anything else as TSV."""
    path = Path(path)
    try:  # read as a stream within the limit: a pipe works, /dev/zero is refused
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise GlossaryError(f"{path}: cannot read it ({error.strerror or error})") from None
    if len(data) > MAX_FILE_BYTES:
        raise GlossaryError(f"{path}: over {MAX_FILE_BYTES >> 20} MiB; is it a glossary?")
    if path.suffix.lower() == ".tbx":
        return Glossary.of(tbx_pairs(data, str(path), source, target))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise GlossaryError(f"{path}: not UTF-8 (byte {error.start}); save it as UTF-8") from None
    rows = csv.reader(io.StringIO(text)) if path.suffix.lower() == ".csv" else tsv_rows(text)
    return Glossary.of(table_pairs(rows, str(path), source, target))


def tsv_rows(text: str) -> Iterable[list[str]]:
    return (line.split("\t") for line in text.splitlines())


def table_pairs(
    rows: Iterable[list[str]], name: str, source: str | None, target: str | None
) -> Iterable[tuple[str, str]]:
    """(source, target) of each row with two cells or more; comments, blank lines and a first
    row of column names (source/target, or the languages' codes) left out."""
    names = HEADER | {code.casefold() for code in (source, target) if code}
    for number, row in enumerate(rows, 1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) < 2:
            raise GlossaryError(
                f"{name}: line {number} has one column; give source TAB target (or a .csv)"
            )
        if number == 1 and {row[0].strip().casefold(), row[1].strip().casefold()} & names:
            continue
        yield row[0], row[1]


def tbx_pairs(
    data: bytes, name: str, source: str | None, target: str | None
) -> list[tuple[str, str]]:
    """(source term, target term) pairs of a TBX file: of each entry (`termEntry`, TBX 2, or
    `conceptEntry`, TBX 3), every term of the `source` language to the first of `target`'s.
    Languages match by their primary tag (en-US is en); by default the file's first two."""
    try:
        root = SafeTree.fromstring(data, forbid_dtd=True)
    except (DefusedXmlException, SafeTree.ParseError) as error:
        raise GlossaryError(f"{name}: not a TBX file this reader accepts ({error})") from None
    entries = []
    for entry in root.iter():
        if local(entry.tag) in ("termEntry", "conceptEntry"):
            by_language: dict[str, list[str]] = {}
            for lang_set in entry:
                code = base_of(lang_set.get(XML_LANG) or "")
                terms = [
                    t.text.strip() for t in lang_set.iter() if local(t.tag) == "term" and t.text
                ]
                by_language.setdefault(code, []).extend(terms)
            entries.append(by_language)
    seen = list(dict.fromkeys(code for entry in entries for code in entry))
    source = base_of(source or (seen[0] if seen else ""))
    target = base_of(target or next((c for c in seen if c != source), ""))
    if source not in seen or target not in seen:
        raise GlossaryError(
            f"{name}: no terms in both {source or '?'} and {target or '?'} (its languages: "
            f"{', '.join(seen) or 'none'}); give the model's languages (--source-lang, prepare's --tgt-lang)"
        )
    return [
        (term, entry[target][0])
        for entry in entries
        if entry.get(target)
        for term in entry.get(source, [])
    ]


def local(tag: object) -> str:
    """An XML tag without its namespace."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""
