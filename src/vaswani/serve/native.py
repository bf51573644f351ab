"""vaswani's own /translate: the answer whole (`native_translate`), or with `"stream": true` as
server-sent events (`text/event-stream`), one event a sentence, in order, each as soon as it and
those before it are translated:

    data: {"text": 0, "sentence": 0, "before": "", "translation": "...", "confidence": 0.93}
    ...
    event: end
    data: {"sentences": 12, "after": [""], "seconds": 1.8}

A text is the `before` of each of its sentences followed by their translations, then its `after`:
the client puts the text back together as it arrives. A sentence the server refuses (a limit, a
full queue) ends the stream with `event: error` and its reason. Each sentence is translated as a
request of its own (its glossary terms, protected code and memory as in a whole request); the
worker batches them with each other and with everyone else's."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator

from fastapi.responses import JSONResponse, StreamingResponse

from vaswani.config import ServeSettings
from vaswani.serve.pairs import Routed
from vaswani.serve.refusals import Refused
from vaswani.serve.schemas import TranslateRequest, TranslateResponse
from vaswani.serve.worker import served, text_problems, with_aids
from vaswani.translation.align import pharaoh
from vaswani.translation.files import fuzzy_record, terms_record
from vaswani.translation.glossary import Glossary
from vaswani.translation.request import Request as Asked
from vaswani.translation.segment import Sentences


def over(name: str, value: int | None, limit: int) -> list[str]:
    """A request setting over the server's limit, as a problem."""
    return [f"{name} {value} is over the limit of {limit}"] if value and value > limit else []


def request_of(asked: TranslateRequest, routed: Routed, settings: ServeSettings) -> Asked:
    """What a native /translate body asks for, as the pipeline's `Request` (with the aids of the
    pair it is routed to)."""
    beam = asked.beam_size or settings.beam_size
    decoding = dataclasses.replace(
        settings.decoding,
        beam_size=beam,
        max_new_tokens=asked.max_length,
        batch_tokens=max(settings.batch_tokens, beam),
    )
    glossary = Glossary.of(asked.glossary.items()) if asked.glossary else None
    split = asked.split and not text_problems(asked.all_texts(), settings)  # refused unsplit
    request = Asked(
        target=routed.target,
        decoding=decoding,
        split=split,
        language=routed.source,
        align=asked.alignments,
    )
    return with_aids(routed.worker, request, glossary)


async def native_translate(
    asked: TranslateRequest, routed: Routed, settings: ServeSettings
) -> TranslateResponse:
    """The texts of `asked` translated where they are `routed` as the request and the server's
    settings say, answered whole; a problem with the request (a limit, a full queue) is
    `Refused`."""
    texts, worker = asked.all_texts(), routed.worker
    request = request_of(asked, routed, settings)
    beam = request.decoding.beam_size
    problems = over("beam_size", beam, settings.max_beam_size)
    problems += over("max_length", asked.max_length, settings.max_length)
    if asked.alignments and worker.aligner is None:
        problems.append("alignments are not given for a pair translated through a pivot")
    start = time.perf_counter()
    done = await served(worker, texts, request, problems)
    best, aids = done.best, worker.aids
    return TranslateResponse(
        translations=[t.text if t else "" for t in best],
        confidences=[round(t.confidence, 4) if t else 1.0 for t in best],
        alignments=[pharaoh(a) for a in done.alignments] if request.align else None,
        origins=[t.origin if t else "model" for t in best] if aids and aids.memory else None,
        fuzzy_matches=[fuzzy_record(t) for t in best] if aids and aids.fuzzy_threshold else None,
        terms=[terms_record(t) for t in best] if request.aids.glossary else None,
        unsafe=[t.unsafe if t else None for t in best]
        if any(t and t.unsafe for t in best)
        else None,
        beam_size=beam,
        seconds=time.perf_counter() - start,
    )


def stream_translation(
    asked: TranslateRequest, routed: Routed, settings: ServeSettings
) -> JSONResponse | StreamingResponse:
    """The texts of `asked`, sentence by sentence, as server-sent events (the module's
    docstring); a request over the server's limits is refused whole, before anything streams."""
    texts = asked.all_texts()
    problems = text_problems(texts, settings)
    if problems:
        return JSONResponse({"detail": problems}, status_code=422)
    sentences = Sentences.of(texts, routed.source or routed.worker.language, asked.split)
    each = [
        asked.model_copy(update={"text": s, "texts": None, "split": False, "stream": False})
        for s in sentences.flat
    ]
    return StreamingResponse(
        events(sentences, each, routed, settings), media_type="text/event-stream"
    )


async def events(
    sentences: Sentences, each: list[TranslateRequest], routed: Routed, settings: ServeSettings
) -> AsyncIterator[str]:
    """The stream of `stream_translation`: all sentences queued at once, answered in order."""
    start = time.perf_counter()
    tasks = [asyncio.ensure_future(native_translate(a, routed, settings)) for a in each]
    try:
        for (i, j), task in zip(sentences.owners(), tasks, strict=True):
            try:
                answer = await task
            except Refused as error:
                yield event({"text": i, "sentence": j, "error": error.message}, "error")
                return
            before = sentences.texts[i].gaps[j]
            found = {"translation": answer.translations[0], "confidence": answer.confidences[0]}
            yield event({"text": i, "sentence": j, "before": before, **found})
        after = [text.gaps[-1] for text in sentences.texts]
        seconds = round(time.perf_counter() - start, 4)
        yield event({"sentences": len(tasks), "after": after, "seconds": seconds}, "end")
    finally:  # a client that went away: nothing left queued for it
        for task in tasks:
            task.cancel()


def event(data: dict, name: str | None = None) -> str:
    """One server-sent event."""
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"
