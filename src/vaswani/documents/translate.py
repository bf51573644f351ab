"""Translating files with a loaded run, from Python (`translate_file`) and for the CLI
(`translator`): the texts of a document split into sentences, all translated in one batch,
aligned when the format carries markup, and written back by the format's reader."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vaswani.config import DecodeConfig
from vaswani.decoding.text import Translation, best_texts, join_nbest, translate_segments
from vaswani.documents.align import Alignment, AlignSettings, align_texts
from vaswani.documents.files import (
    DocumentOptions,
    Translator,
    format_of,
    read_document,
    translate_documents,
)
from vaswani.documents.segment import Sentences
from vaswani.files import write_atomic


def translate_sentences(
    loaded: Any,
    sentences: Sentences,
    target: str | None = None,
    dc: DecodeConfig | None = None,
    too_long: str = "error",
    progress: Callable[[int], None] | None = None,
    align: bool = False,
    alignment: AlignSettings | None = None,
) -> tuple[list[list[Translation]], list[Alignment | None]]:
    """Each text of `sentences` translated by `loaded` (a `vaswani.run.LoadedRun`) into `target`
    (a multilingual model's), all its sentences in one batch: its n-best translations and, with
    `align`, its word alignment (read as `alignment` says; None each otherwise). Runs under the
    caller's autocast."""
    prefixes = loaded.prefixes(target, len(sentences.texts))
    model, src, tgt = loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer
    segments = translate_segments(
        model, src, tgt, sentences, dc, too_long, progress, loaded.shortlist, prefixes
    )
    aligned = (
        align_texts(model, src, tgt, sentences, segments, prefixes, alignment)
        if align
        else [None] * len(sentences.texts)
    )
    return join_nbest(sentences, segments), aligned


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
) -> Translator:
    """A `Translator` over `loaded` (a `vaswani.run.LoadedRun`): texts split into sentences by
    the rules of `language` (default: the model's source language) unless not `split`,
    translated into `target` (a multilingual model's), under `context` (e.g. autocast);
    `progress(total)` gives a callable told of each batch's sentences; `alignment`: where word
    alignments are read from."""

    def translate(texts: list[str], alignments: bool) -> tuple[list[str], list[Any]]:
        sentences = Sentences.of(texts, language or loaded.source_language, split)
        update = progress(len(sentences.flat)) if progress is not None else None
        with context():
            found, aligned = translate_sentences(
                loaded, sentences, target, dc, too_long, update, alignments, alignment
            )
        return best_texts(found), aligned

    return translate


def translate_file(
    loaded: Any,
    source: str | Path,
    output: str | Path | None = None,
    fmt: str | None = None,
    options: DocumentOptions | None = None,
    target: str | None = None,
    dc: DecodeConfig | None = None,
) -> bytes:
    """The file `source` translated whole in its format (by its extension, or `fmt`), written to
    `output` when given (atomically: never half-written); its bytes."""
    source = Path(source)
    document = read_document(source.read_bytes(), format_of(source, fmt), str(source), options)
    language = target or loaded.target_language
    data = translate_documents([document], translator(loaded, target, dc), language)[0]
    if output is not None:
        write_atomic(Path(output), data)
    return data
