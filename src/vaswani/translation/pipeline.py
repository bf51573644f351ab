"""The steps from texts to translations, written once for the CLI, Python, evaluation and the
server, in two phases around the model:

    prepare: take the code out of each text (placeholders, markup, URLs, accelerators:
             `vaswani.documents.protect`), split into sentences (`Sentences`), take the texts a
             translation memory holds whole as one segment, look up the memory's exact matches,
             the target's prefix ids
    -> the segments still to translate go to the model: `Engine.segments` here, the server's
       batching worker there (`vaswani.serve.worker`)
    finish:  fuzzy matches, the glossary's terms put in by word alignment, sentences joined
             back into texts, the code put back by word alignment and each text checked (one
             that fails is answered with its source, marked `unsafe`), the texts' alignments

`translate` runs the three in a row; the server awaits its worker between `prepare` and `finish`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from vaswani.decoding.text import Segments, Translation
from vaswani.documents.protect import Protected, keep, protect, visible
from vaswani.documents.spans import Protection, without_code
from vaswani.translation.align import Alignment, AlignSettings, join_alignments
from vaswani.translation.glossary import enforce
from vaswani.translation.request import Aids, Request
from vaswani.translation.segment import Segmented, Sentences


class Aligner(Protocol):
    """What word-aligns translations with their sources (an `Engine`; none for a pivot)."""

    def align(
        self, sources: Segments, translations: list[str], settings: AlignSettings | None = None
    ) -> list[Alignment]: ...


class Translating(Aligner, Protocol):
    """What the pipeline needs of a model (`vaswani.translation.Engine` is one): the languages
    it translates between (the source's rules split sentences), the prefixes of a target, the
    n-best translations of segments and their word alignment."""

    @property
    def source_language(self) -> str | None: ...

    @property
    def target_language(self) -> str | None: ...

    def prefixes(
        self,
        targets: str | list[str] | None,
        count: int,
        sources: str | list[str | None] | None = None,
    ) -> list[list[int]] | None: ...

    def segments(
        self,
        segments: Segments,
        request: Request | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> list[list[Translation]]: ...


@dataclass(frozen=True)
class Split:
    """Texts as the model sees them: each with its code taken out (`protected`), split into
    segments (`sentences`)."""

    protected: list[Protected]
    sentences: Sentences

    @property
    def flat(self) -> list[str]:
        return self.sentences.flat


@dataclass
class Prepared:
    """A request's texts ready for the model: its segments, their prefixes, and the answers the
    translation memory already holds."""

    protected: list[Protected]
    sentences: Sentences
    prefixes: list[list[int]] | None
    """Ids before each text (a multilingual model's target-language token), or None."""
    known: dict[int, list[Translation]]
    """The memory's exact matches, by segment of `sentences.flat`."""

    @functools.cached_property
    def todo(self) -> list[int]:
        """The segments the model translates: all but the memory's."""
        return [i for i in range(len(self.sentences.flat)) if i not in self.known]

    def segments(self, indices: list[int] | None = None) -> Segments:
        """The segments `indices` (by default those to translate) with their prefixes and names."""
        indices = self.todo if indices is None else indices
        flat, prefixes = self.sentences.flat, self.sentences.spread(self.prefixes)
        labels = self.sentences.labels("line")
        return Segments(
            [flat[i] for i in indices],
            None if prefixes is None else [prefixes[i] for i in indices],
            [labels[i] for i in indices],
        )


@dataclass
class Finished:
    """Each text's n-best translations and, where asked, its word alignment."""

    found: list[list[Translation]]
    alignments: list[Alignment | None]

    @property
    def best(self) -> list[Translation | None]:
        """Each text's best translation; None for a blank text."""
        return [options[0] if options else None for options in self.found]


def sentences_of(texts: list[str], request: Request, language: str | None) -> Split:
    """`texts` as segments by `request`: their code taken out as `request.protect` says (not
    from a text a translation memory holds whole, which it answers as it is), split by the rules
    of its language (by default `language`, the model's source language)."""
    each = request.protect
    each = each if isinstance(each, list) else [each] * len(texts)
    memory = request.aids.memory
    protected = [
        keep(text, protection) if memory and memory.holds(text) else protect(text, protection)
        for text, protection in zip(texts, each, strict=True)
    ]
    plain = [p.text for p in protected]
    return Split(protected, Sentences.of(plain, request.language or language, request.split))


def prepare(split: Split, aids: Aids, prefixes: list[list[int]] | None) -> Prepared:
    """The first phase: texts a memory holds whole made one segment, its exact matches taken."""
    sentences = split.sentences
    if aids.memory:
        sentences = aids.memory.unsplit(sentences)
    known = aids.memory.exact(sentences.flat) if aids.memory else {}
    return Prepared(split.protected, sentences, prefixes, known)


def finish(
    prepared: Prepared,
    answered: list[list[Translation]],
    request: Request,
    aligner: Aligner | None,
) -> Finished:
    """The second phase, given the model's n-best lists of `prepared.todo` (`answered`, in
    order): code the model made up dropped, the memory's answers and fuzzy matches, the
    glossary's terms, sentences joined back into texts, their code put back and checked, the
    alignments asked for."""
    flat, aids = prepared.sentences.flat, request.aids
    found: list[list[Translation]] = [prepared.known.get(i, []) for i in range(len(flat))]
    owners = [owner for owner, _ in prepared.sentences.owners()]
    for i, mine in zip(prepared.todo, answered, strict=True):
        protection = prepared.protected[owners[i]].protection
        found[i] = [cleaned(t, protection) for t in mine]
    if aids.memory and aids.fuzzy_threshold is not None:
        aids.memory.mark_fuzzy(flat, found, aids.fuzzy_threshold)
    if aids.glossary and aligner is not None:

        def aligned(indices: list[int]) -> list[Alignment]:
            best = [found[i][0].text for i in indices]
            return aligner.align(prepared.segments(indices), best, request.alignment)

        enforce(aids.glossary, flat, found, aligned)
    texts = range(len(prepared.sentences.texts))
    wanted = [i for i in texts if request.align or prepared.protected[i].placing]
    by_text = texts_aligned(prepared, found, wanted, request, aligner)
    by_text = dict(zip(wanted, by_text, strict=True))
    joined = join_nbest(prepared.sentences, found)
    alignments: list[Alignment | None] = [None] * len(joined)
    for i, protected in enumerate(prepared.protected):
        joined[i], alignment = restored(protected, joined[i], by_text.get(i))
        alignments[i] = alignment if request.align else None
    if aids.report is not None:
        aids.report(joined)
    return Finished(joined, alignments)


def texts_aligned(
    prepared: Prepared,
    found: list[list[Translation]],
    wanted: list[int],
    request: Request,
    aligner: Aligner | None,
) -> list[Alignment | None]:
    """The alignment of each text `wanted` with its joined best translation, from its
    segments' (None each without an aligner: a pivot's)."""
    if aligner is None or not wanted:
        return [None] * len(wanted)
    sentences = prepared.sentences
    chosen = set(wanted)
    todo = [k for k, (owner, _) in enumerate(sentences.owners()) if owner in chosen]
    best = [found[k][0].text if found[k] else "" for k in todo]
    each = iter(aligner.align(prepared.segments(todo), best, request.alignment))
    best_of = iter(best)
    return [
        join_alignments(
            sentences.texts[i],
            [next(best_of) for _ in sentences.texts[i].sentences],
            [next(each) for _ in sentences.texts[i].sentences],
        )
        for i in wanted
    ]


def cleaned(translation: Translation, protection: Protection) -> Translation:
    """The model's `translation` of a segment without the code it made up (its source had none:
    it was taken out), before any word of it is aligned."""
    text = without_code(visible(translation.text), protection)
    return translation if text == translation.text else dataclasses.replace(translation, text=text)


def restored(
    protected: Protected, found: list[Translation], alignment: Alignment | None
) -> tuple[list[Translation], Alignment | None]:
    """A text's n-best translations with its code put back (the best by `alignment`, the others
    by relative position) and checked, and its alignment as one of the text as it was. A
    translation that fails a check (an empty one too) is the source as it was, marked `unsafe`
    with the check's name; a text of nothing but code is kept as it is."""
    same = None if alignment is None else [(i, i) for i in range(len(protected.source.split()))]
    if not found and not protected.source.strip():  # a blank text
        return [], alignment
    if not found and protected.changed:  # nothing but code
        return [Translation(protected.source, 0.0, 0.0, origin="kept")], same
    if not found:  # no answer (a pivot's middle came back blank): never written empty
        return [Translation(protected.source, 0.0, 0.0, unsafe="empty")], same
    out, placed = [], []
    for k, translation in enumerate(found):
        mine = protected.place(translation.text, (alignment or []) if k == 0 else [])
        check = protected.check(mine.text)
        text = protected.source if check else mine.text
        out.append(dataclasses.replace(translation, text=text, unsafe=check))
        placed.append(mine)
    if out[0].unsafe:  # the source as it was, word for word
        return out, same
    if alignment is not None and protected.changed:
        alignment = protected.aligned(alignment, placed[0])
    return out, alignment


def translate(
    engine: Translating,
    texts: list[str] | Split,
    request: Request | None = None,
    progress: Callable[[int], None] | None = None,
) -> Finished:
    """Each text translated by `engine` as `request` asks (sentence by sentence, all in one
    batch, with its aids): its n-best translations and, with `request.align`, its word
    alignment. `progress` is told of the segments each batch finished."""
    request = request or Request()
    if not isinstance(texts, Split):
        texts = sentences_of(texts, request, engine.source_language)
    count = len(texts.protected)
    prefixes = engine.prefixes(request.target, count, request.language or engine.source_language)
    prepared = prepare(texts, request.aids, prefixes)
    if prepared.known and progress is not None:
        progress(len(prepared.known))
    answered = engine.segments(prepared.segments(), request, progress)
    return finish(prepared, answered, request, engine)


def join_nbest(sentences: Sentences, found: list[list[Translation]]) -> list[list[Translation]]:
    """Each text's n-best translations from those of its segments (`found`, one list per segment
    of `sentences.flat`)."""
    return [
        joined(text, mine)
        for text, mine in zip(sentences.texts, sentences.per_text(found), strict=True)
    ]


def joined(text: Segmented, found: list[list[Translation]]) -> list[Translation]:
    """A text's n-best translations from its segments': the k-th joins each segment's k-th best
    (its last where it has fewer); its score is the segments' mean, its log-probability and
    tokens their sums. No translation for a text without segments (a blank text)."""
    if not text.sentences:
        return []
    if len(found) == 1 and text.gaps == ("", ""):  # one segment as it is: nothing to join
        return found[0]
    kth = [[f[min(k, len(f) - 1)] for f in found] for k in range(max(len(f) for f in found))]
    texts = [
        Translation(
            text.join([t.text for t in ts]),
            sum(t.score for t in ts) / len(ts),
            sum(t.log_prob for t in ts),
            sum(t.tokens for t in ts),
        )
        for ts in kth
    ]
    best = kth[0]
    if any(t.assessed is not None for t in best):  # each sentence's share by its tokens
        texts[0].assessed = sum(t.confidence * t.tokens for t in best) / texts[0].tokens
    if all(t.origin == best[0].origin for t in best):
        texts[0].origin = best[0].origin
    texts[0].terms = [term for t in best for term in t.terms]
    return texts


def best_texts(nbest: list[list[Translation]]) -> list[str]:
    """The best translation's text per input, "" where there is none (a blank input)."""
    return [found[0].text if found else "" for found in nbest]


def confident(found: list[Translation], least: float | None) -> str | None:
    """The best translation's text ("" for a blank text), None where it failed a check or its
    confidence is under `least`."""
    if not found:
        return ""
    if found[0].unsafe or (least is not None and found[0].confidence < least):
        return None
    return found[0].text
