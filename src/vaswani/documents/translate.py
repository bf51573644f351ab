"""Translating files with a loaded run, from Python (`translate_file`) and for the CLI
(`translator`): the texts of a document split into sentences, all translated in one batch,
aligned when the format carries markup, and written back by the format's reader."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vaswani.config import DecodeConfig
from vaswani.decoding.text import Translation, join_nbest, translate_segments
from vaswani.documents import align as word_alignment
from vaswani.documents.align import Alignment, AlignSettings, align_texts
from vaswani.documents.files import (
    DocumentOptions,
    Translator,
    format_of,
    read_document,
    translate_documents,
)
from vaswani.documents.glossary import Glossary, enforce
from vaswani.documents.memory import Memory
from vaswani.documents.segment import Sentences
from vaswani.files import write_atomic


@dataclass(frozen=True)
class Aids:
    """What a translation may use beyond the model: a glossary whose terms the output must
    carry, a translation memory whose exact matches are taken as they are (and, with
    `fuzzy_threshold`, whose best fuzzy match is reported)."""

    glossary: Glossary | None = None
    memory: Memory | None = None
    fuzzy_threshold: float | None = None
    min_confidence: float | None = None
    """Documents: leave a text whose confidence is under it untranslated."""
    report: Callable[[list[list[Translation]]], None] | None = None
    """Told each batch's translations (e.g. to say which terms could not be placed)."""


def fuzzy_record(found: Translation | None) -> dict[str, Any] | None:
    """A translation's fuzzy match in the memory, as JSON answers give it."""
    if found is None or found.fuzzy is None:
        return None
    score, source, target = found.fuzzy
    return {"score": score, "source": source, "target": target}


def terms_record(found: Translation | None) -> list[dict[str, Any]]:
    """A translation's glossary terms, as JSON answers give them."""
    terms = found.terms if found is not None else []
    return [{"source": s, "target": t, "placed": placed} for s, t, placed in terms]


def translate_sentences(
    loaded: Any,
    sentences: Sentences,
    target: str | list[str] | None = None,
    dc: DecodeConfig | None = None,
    too_long: str = "error",
    progress: Callable[[int], None] | None = None,
    align: bool = False,
    alignment: AlignSettings | None = None,
    aids: Aids | None = None,
) -> tuple[list[list[Translation]], list[Alignment | None]]:
    """Each text of `sentences` translated by `loaded` (a `vaswani.run.LoadedRun`) into `target`
    (a multilingual model's), all its sentences in one batch, with `aids`: its n-best
    translations and, with `align`, its word alignment (read as `alignment` says; None each
    otherwise). Runs under the caller's autocast."""
    aids = aids or Aids()
    if aids.memory:
        sentences = aids.memory.unsplit(sentences)
    prefixes = loaded.prefixes(target, len(sentences.texts))
    model, src, tgt = loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer
    flat = sentences.flat
    known = aids.memory.exact(flat) if aids.memory else {}
    if known and progress is not None:
        progress(len(known))
    segments = translate_segments(
        model,
        src,
        tgt,
        sentences.blanked(known) if known else sentences,
        dc,
        too_long,
        progress,
        loaded.shortlist,
        prefixes,
        loaded.confidence,
    )
    for i, found in known.items():
        segments[i] = found
    if aids.memory and aids.fuzzy_threshold is not None:
        aids.memory.mark_fuzzy(flat, segments, aids.fuzzy_threshold)
    if aids.glossary:
        each = sentences.spread(prefixes)

        def aligned_segments(indices: list[int]) -> list[Alignment]:
            return word_alignment.align(
                model,
                src,
                tgt,
                [flat[i] for i in indices],
                [segments[i][0].text for i in indices],
                None if each is None else [each[i] for i in indices],
                alignment,
            )

        enforce(aids.glossary, flat, segments, aligned_segments)
    aligned = (
        align_texts(model, src, tgt, sentences, segments, prefixes, alignment)
        if align
        else [None] * len(sentences.texts)
    )
    found = join_nbest(sentences, segments)
    if aids.report is not None:
        aids.report(found)
    return found, aligned


def translator(
    loaded: Any,
    target: str | None = None,
    dc: DecodeConfig | None = None,
    split: bool = True,
    language: str | None = None,
    too_long: str = "error",
    context: Callable[[], Any] = contextlib.nullcontext,
    progress: Callable[[int], Callable[[int], None] | None] | None = None,
    alignment: AlignSettings | None = None,
    aids: Aids | None = None,
) -> Translator:
    """A `Translator` over `loaded` (a `vaswani.run.LoadedRun`): texts split into sentences by
    the rules of `language` (default: the model's source language) unless not `split`,
    translated into `target` (a multilingual model's) with `aids`, under `context` (e.g.
    autocast); `progress(total)` gives a callable told of each batch's sentences; `alignment`:
    where word alignments are read from. A text whose confidence is under `aids.min_confidence`
    is answered None (left untranslated)."""
    aids = aids or Aids()

    def translate(texts: list[str], alignments: bool) -> tuple[list[str | None], list[Any]]:
        sentences = Sentences.of(texts, language or loaded.source_language, split)
        update = progress(len(sentences.flat)) if progress is not None else None
        with context():
            found, aligned = translate_sentences(
                loaded, sentences, target, dc, too_long, update, alignments, alignment, aids
            )
        return [confident(f, aids.min_confidence) for f in found], aligned

    return translate


def confident(found: list[Translation], least: float | None) -> str | None:
    """The best translation's text ("" for a blank text), None where its confidence is under
    `least`."""
    if not found:
        return ""
    return None if least is not None and found[0].confidence < least else found[0].text


def translate_file(
    loaded: Any,
    source: str | Path,
    output: str | Path | None = None,
    fmt: str | None = None,
    options: DocumentOptions | None = None,
    target: str | None = None,
    dc: DecodeConfig | None = None,
    aids: Aids | None = None,
) -> bytes:
    """The file `source` translated whole in its format (by its extension, or `fmt`), with
    `aids` (a glossary, a memory, a minimum confidence), written to `output` when given
    (atomically: never half-written); its bytes."""
    source = Path(source)
    document = read_document(source.read_bytes(), format_of(source, fmt), str(source), options)
    language = target or loaded.target_language
    translate = translator(loaded, target, dc, aids=aids)
    data = translate_documents([document], translate, language)[0]
    if output is not None:
        write_atomic(Path(output), data)
    return data
