"""Translating files with a loaded run, from Python (`translate_file`) and for the CLI
(`translator`): the texts of a document split into sentences, all translated in one batch,
aligned when the format carries markup, and written back by the format's reader."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vaswani.config import DecodeConfig
from vaswani.decoding.text import join_nbest, translate_segments
from vaswani.documents.align import AlignSettings, align_texts
from vaswani.documents.files import (
    DocumentOptions,
    Translator,
    format_of,
    read_document,
    translate_documents,
)
from vaswani.documents.segment import Sentences
from vaswani.files import write_atomic


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
        prefixes = loaded.prefixes(target, len(texts))
        model, src, tgt = loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer
        update = progress(len(sentences.flat)) if progress is not None else None
        with context():
            segments = translate_segments(
                model, src, tgt, sentences, dc, too_long, update, loaded.shortlist, prefixes
            )
            aligned = (
                align_texts(model, src, tgt, sentences, segments, prefixes, alignment)
                if alignments
                else [None] * len(texts)
            )
        best = [found[0].text if found else "" for found in join_nbest(sentences, segments)]
        return best, aligned

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
