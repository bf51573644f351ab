"""Documents through the pipeline: a file's texts split into sentences, all translated in one
batch, aligned when the format carries markup, and written back by the format's reader
(`vaswani.documents`), from Python (`translate_file`) and for the CLI (`document_translator`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vaswani.decoding.text import Translation
from vaswani.documents.formats import Translator, format_of, read_document, translate_documents
from vaswani.documents.spans import NONE, Protection
from vaswani.safe_io import write_atomic
from vaswani.translation import pipeline
from vaswani.translation.pipeline import Translating
from vaswani.translation.request import Request


def document_translator(
    engine: Translating,
    request: Request | None = None,
    progress: Callable[[int], Callable[[int], None] | None] | None = None,
) -> Translator:
    """A `Translator` over `engine`: texts split into sentences and translated as `request`
    asks (the code in each as its format says, else as the request does); `progress(total)`
    gives a callable told of each batch's sentences. A text whose translation failed a check, or
    whose confidence is under `request.aids.min_confidence`, is answered None."""
    request = request or Request()
    base = request.protect
    if isinstance(base, list):
        raise ValueError("a document's texts are protected as its format says: give one Protection")

    def translate(
        texts: list[str], alignments: bool, code: list[Protection | None]
    ) -> tuple[list[str | None], list[Any]]:
        protect = [combined(mine, base) for mine in code]
        asked = dataclasses.replace(request, align=alignments, protect=protect)
        sentences = pipeline.sentences_of(texts, asked, engine.source_language)
        update = progress(len(sentences.flat)) if progress is not None else None
        done = pipeline.translate(engine, sentences, asked, update)
        least = request.aids.min_confidence
        return [pipeline.confident(f, least) for f in done.found], done.alignments

    return translate


def combined(mine: Protection | None, asked: Protection) -> Protection:
    """What a text of a document is protected from: what its format says (`mine`) with the
    patterns `asked` names (`--protect`), nothing where `asked` is nothing (`--no-protect`), and
    `asked` where the format says nothing."""
    if mine is None or asked == NONE:
        return asked
    return dataclasses.replace(mine, patterns=asked.patterns + mine.patterns)


def translate_file(
    engine: Translating,
    source: str | Path,
    output: str | Path | None = None,
    request: Request | None = None,
) -> bytes:
    """The file `source` translated whole in its format (by its extension) as `request` asks
    (a glossary, a memory, a minimum confidence), written to `output` when given (atomically:
    never half-written); its bytes."""
    source, request = Path(source), request or Request()
    document = read_document(source.read_bytes(), format_of(source), str(source))
    language = request.target or engine.target_language
    translate = document_translator(engine, request)
    data = translate_documents([document], translate, language)[0]
    if output is not None:
        write_atomic(Path(output), data)
    return data


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
