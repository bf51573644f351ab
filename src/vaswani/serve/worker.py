"""The model's side of the server: requests checked against the limits, queued as jobs, and
answered in batches by one worker thread (dynamic batching)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import queue
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import torch
from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse

from vaswani import __version__
from vaswani.config import DecodeConfig, ServeSettings
from vaswani.decoding.shortlist import Shortlist
from vaswani.decoding.text import InputTooLong, Translation, best_texts, encode_sources
from vaswani.device import autocast, pick_precision
from vaswani.documents.align import align_texts
from vaswani.documents.glossary import Glossary, enforce
from vaswani.documents.segment import Sentences
from vaswani.documents.translate import Aids
from vaswani.serve.schemas import Sampling
from vaswani.tasks import task_of_model


@dataclass
class Job:
    texts: list[str]
    settings: Any
    """DecodeConfig (translate), Sampling (generate) or None (classify)."""
    tokens: int
    """Token ids of its texts (end-of-sentence counted): what a batch's budget counts."""
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    cancelled: bool = False
    prefix: list[int] | None = None
    """Ids before each of its texts: the target-language token of a multilingual model."""


class Worker:
    """A model, the queue of requests waiting for it, and the thread that answers them in
    batches. Its `endpoint` says how texts become answers. A multilingual model has one worker
    for all its pairs (`Targeted` views); a batch may mix target languages."""

    prefix: list[int] | None = None  # a worker asked for no target language
    aids: Aids | None = None
    """The glossary and translation memory of the model served without a language pair."""

    def __init__(
        self,
        model: Any,
        src_tok: Any,
        tgt_tok: Any,
        settings: ServeSettings,
        endpoint: Any,
        shortlist: Shortlist | None = None,
        language: str | None = None,
        confidence: Any = None,
    ) -> None:
        self.model, self.src_tok, self.tgt_tok = model, src_tok, tgt_tok
        self.confidence = confidence
        """How translations are assessed (the run's `Calibration`); None: by the mean
        probability per token that search gives."""
        self.language = language
        """The language of the texts it is given, when known: its rules split sentences."""
        self.shortlist = shortlist
        """A translation model's `vaswani.decoding.shortlist.Shortlist`, or None: the whole vocabulary."""
        self.task = task_of_model(model)
        self.endpoint = endpoint
        """The `serve.app.Endpoint` of the task: its route, its model call, its health check."""
        self.settings = settings
        self.precision, _ = pick_precision(settings.precision, self.device)
        self.jobs: queue.Queue[Job | None] = queue.Queue()
        self.queued_texts = 0
        self.lock = threading.Lock()
        self.healthy = False
        self.error: str | None = None
        self.batches = 0
        self.thread = threading.Thread(target=self.work, name="vaswani-worker", daemon=True)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def run(
        self, texts: list[str], settings: Any, prefixes: list[list[int]] | None = None
    ) -> list[Any]:
        """The model's answer for each text: a translation, a `Generation`, a `Classification`."""
        with torch.no_grad(), autocast(self.device, self.precision):
            return self.endpoint.call(self, texts, settings, prefixes)

    def align(
        self, sentences: Sentences, segments: list[Any], prefix: list[int] | None = None
    ) -> list[Any]:
        """The word alignment of each text of `sentences` with its joined best translation, from
        its segments' (`segments`, as the translation endpoint answered them), each text
        after `prefix`; called from a thread of its own, beside the worker's."""
        prefixes = None if prefix is None else [prefix] * len(sentences.texts)
        with torch.no_grad(), autocast(self.device, self.precision):
            return align_texts(
                self.model, self.src_tok, self.tgt_tok, sentences, segments, prefixes
            )

    def start(self) -> None:
        """Check the model with one request, then start the worker; on failure the server stays
        up to say so (/health 503 with the error), answering nothing."""
        try:
            self.run(["health check"], self.endpoint.check)
        except Exception as error:
            self.error = f"{type(error).__name__}: {error}"
            return
        self.healthy = True
        self.thread.start()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:  # noqa: ARG002
        await asyncio.get_running_loop().run_in_executor(None, self.start)
        yield
        self.stop()

    def health(self) -> JSONResponse:
        """200 when the model is loaded and a test request passed; 503 otherwise."""
        return JSONResponse(self.health_record(), status_code=200 if self.healthy else 503)

    def health_record(self) -> dict[str, Any]:
        body = {
            "status": "ok" if self.healthy else "starting",
            "task": self.task.name,
            "version": __version__,
            "device": str(self.device),
            "queued_texts": self.queued_texts,
        }
        if self.error is not None:
            body.update(status="failed", error=self.error)
        return body

    def problems(
        self,
        texts: list[str],
        positions: int,
        prefix: list[int] | None = None,
        *,
        sentences: Sentences | None = None,
    ) -> tuple[list[str], int]:
        """What is wrong with a request's texts (how many, how long, not Unicode, a segment
        over the model's `positions` once tokenized, after `prefix`), and the tokens of their
        segments (`sentences`, by default each text whole). A model that is not ready answers
        nothing (503)."""
        if not self.healthy:
            raise HTTPException(status_code=503, detail="the model is not ready; see /health")
        problems = text_problems(texts, self.settings)
        if problems:
            return problems, 0
        sentences = sentences or Sentences.of(texts, split=False)
        segments = sentences.flat
        try:
            prefixes = None if prefix is None else [prefix] * len(segments)
            encoded = encode_sources(
                self.src_tok,
                segments,
                positions,
                "error",
                "text",
                prefixes,
                sentences.labels("text"),
            )
        except InputTooLong as error:  # refused here, not in a shared batch
            return [str(error).split("; ")[0]], 0
        return [], sum(len(ids) + 1 for ids in encoded.values()) + len(segments) - len(encoded)

    async def submit(
        self,
        texts: list[str],
        settings: Any,
        problems: list[str],
        tokens: int,
        prefix: list[int] | None = None,
    ) -> list[Any]:
        """Refuse the request (422) if it has problems, 413 if it could never fit in the queue,
        503 if the queue is full now; otherwise
        queue it for the worker (each text after `prefix`) and wait for the answer, at most
        `timeout_s` (504)."""
        if problems:
            raise HTTPException(status_code=422, detail="; ".join(problems))
        if len(texts) > self.settings.max_queued_texts:  # can never fit: retrying cannot help
            raise HTTPException(
                status_code=413,
                detail=f"{len(texts)} segments in one request (sentences, with splitting), over "
                f"the {self.settings.max_queued_texts} the server queues; send fewer or shorter texts",
            )
        if not self.admit(len(texts)):
            raise HTTPException(
                status_code=503,
                detail="too many texts waiting; retry shortly",
                headers={"Retry-After": "1"},
            )
        loop = asyncio.get_running_loop()
        job = Job(texts, settings, tokens, loop.create_future(), loop, prefix=prefix)
        self.jobs.put(job)
        timeout = self.settings.timeout_s
        try:
            return await asyncio.wait_for(job.future, timeout)
        except asyncio.TimeoutError:
            job.cancelled = True
            raise HTTPException(
                status_code=504, detail=f"not answered within {timeout} s"
            ) from None
        finally:
            self.release(len(texts))

    def stop(self) -> None:
        if self.thread.is_alive():
            self.jobs.put(None)
            self.thread.join(timeout=60)

    def admit(self, n: int) -> bool:
        with self.lock:
            if self.queued_texts + n > self.settings.max_queued_texts:
                return False
            self.queued_texts += n
            return True

    def release(self, n: int) -> None:
        with self.lock:
            self.queued_texts -= n

    def work(self) -> None:
        """Take a job, gather others with the same settings for a moment, translate them as one."""
        held: list[Job] = []
        while True:
            first = held.pop(0) if held else self.jobs.get()
            if first is None:
                return
            batch, tokens = [first], self.cost(first)
            deadline = time.perf_counter() + self.settings.batch_wait_ms / 1000
            while self.settings.dynamic_batching and tokens < self.settings.batch_tokens:
                try:
                    job = self.jobs.get(timeout=max(0.0, deadline - time.perf_counter()))
                except queue.Empty:
                    break
                if job is None:
                    self.jobs.put(None)  # stop after this batch
                    break
                if job.settings == first.settings:
                    batch.append(job)
                    tokens += self.cost(job)
                else:
                    held.append(job)
            self.answer(batch)

    def cost(self, job: Job) -> int:
        """A job's share of a model call's `batch_tokens`: its token ids, times the beam (a
        translation), plus the tokens to generate (a language model)."""
        if isinstance(job.settings, DecodeConfig):
            return job.tokens * job.settings.beam_size
        if isinstance(job.settings, Sampling):
            return job.tokens + job.settings.max_new_tokens * len(job.texts)
        return job.tokens

    def answer(self, batch: list[Job]) -> None:
        batch = [job for job in batch if not job.cancelled]
        if not batch:
            return
        texts = [text for job in batch for text in job.texts]
        prefixes = None
        if any(job.prefix is not None for job in batch):
            prefixes = [job.prefix or [] for job in batch for _ in job.texts]
        try:
            out: list[Any] | Exception = self.run(texts, batch[0].settings, prefixes)
        except Exception as error:  # answered to the request, the server keeps serving
            out = error
        self.batches += 1
        start = 0
        for job in batch:
            if isinstance(out, Exception):
                result: Any = out
            else:
                result = out[start : start + len(job.texts)]
                start += len(job.texts)
            job.loop.call_soon_threadsafe(settle, job.future, result)


class Targeted:
    """A translation worker asked for one language pair: what it is given to translate is led
    by `prefix` (a multilingual model's token of the target language), and translated with the
    pair's `aids`. Otherwise the worker."""

    def __init__(self, worker: Worker, prefix: list[int] | None, aids: Aids | None = None) -> None:
        self.worker, self.prefix, self.aids = worker, prefix, aids

    def __getattr__(self, name: str) -> Any:
        return getattr(self.worker, name)

    def align(self, sentences: Sentences, segments: list[Any]) -> list[Any]:
        return self.worker.align(sentences, segments, self.prefix)

    def problems(
        self, texts: list[str], positions: int, *, sentences: Sentences | None = None
    ) -> tuple[list[str], int]:
        return self.worker.problems(texts, positions, self.prefix, sentences=sentences)

    async def submit(
        self, texts: list[str], settings: Any, problems: list[str], tokens: int
    ) -> list[Any]:
        return await self.worker.submit(texts, settings, problems, tokens, self.prefix)


class Pivot:
    """Translation through a middle language: `first` (source -> middle) then `second` (middle ->
    target), for a pair no model serves directly. The middle translation is the first's best;
    alternatives, when asked, are the second's."""

    def __init__(self, first: Any, second: Any, middle: str) -> None:
        self.first, self.second, self.middle = first, second, middle
        self.model = first.model  # the position limit that checks the request's texts

    def problems(
        self, texts: list[str], positions: int, *, sentences: Sentences | None = None
    ) -> tuple[list[str], int]:
        return self.first.problems(texts, positions, sentences=sentences)

    async def submit(
        self, texts: list[str], settings: DecodeConfig, problems: list[str], tokens: int
    ) -> list[Any]:
        one = dataclasses.replace(settings, n_best=1)
        middle = best_texts(await self.first.submit(texts, one, problems, tokens))
        problems, tokens = self.second.problems(middle, self.second.model.cfg.max_len)
        return await self.second.submit(middle, settings, problems, tokens)


def unsplit(worker: Any, sentences: Sentences) -> Sentences:
    """`sentences` with the texts that `worker`'s translation memory holds whole made one
    segment (`Memory.unsplit`): what `submit_aided` is then given."""
    aids = getattr(worker, "aids", None)
    return aids.memory.unsplit(sentences) if aids and aids.memory else sentences


async def submit_aided(
    worker: Any,
    sentences: Sentences,
    settings: DecodeConfig,
    problems: list[str],
    tokens: int,
    glossary: Glossary | None = None,
) -> list[list[Translation]]:
    """The n-best translations of each segment of `sentences.flat`, with the aids of `worker`
    (its pair's glossary and translation memory, `worker.aids`) and a request's own `glossary`
    (its terms win): segments the memory holds are answered from it and not queued; terms are
    put in by the word alignment, computed in a thread beside the worker's."""
    aids = getattr(worker, "aids", None) or Aids()
    glossary = (aids.glossary or Glossary()).merged(glossary)
    if glossary and not hasattr(worker, "align"):
        problems = [*problems, "glossaries are not applied to a pair translated through a pivot"]
    flat = sentences.flat
    known = aids.memory.exact(flat) if aids.memory else {}
    rest = [i for i in range(len(flat)) if i not in known]
    found: list[list[Translation]] = [known.get(i, []) for i in range(len(flat))]
    if rest or problems:
        answered = await worker.submit([flat[i] for i in rest], settings, problems, tokens)
        for i, mine in zip(rest, answered, strict=True):
            found[i] = mine
    if aids.memory and aids.fuzzy_threshold is not None:
        aids.memory.mark_fuzzy(flat, found, aids.fuzzy_threshold)
    if glossary:

        def aligned(indices: list[int]) -> list[Any]:
            chosen = Sentences.of([flat[i] for i in indices], split=False)
            return worker.align(chosen, [found[i] for i in indices])

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, enforce, glossary, flat, found, aligned)
    return found


async def alignments_of(worker: Any, sentences: Sentences, found: list) -> list | None:
    """The word alignment of each text of `sentences` with its translation (`found`, as the
    worker answered it), computed in a thread beside the worker's; None for a `Pivot`, whose
    translation no one model made."""
    if not hasattr(worker, "align"):
        return None
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, worker.align, sentences, found)


def settle(future: asyncio.Future, result: Any) -> None:
    if future.done():  # timed out meanwhile
        return
    if isinstance(result, Exception):
        future.set_exception(result)
    else:
        future.set_result(result)


def text_problems(texts: list[str], settings: ServeSettings) -> list[str]:
    """What is wrong with a request's texts before tokenizing: how many, how long, valid
    Unicode (the limits of every task)."""
    problems = []
    if not texts:
        problems.append('"texts" is empty')
    broken = [i for i, text in enumerate(texts) if not is_unicode(text)]
    if broken:
        problems.append(f"text {broken[0] + 1} is not valid Unicode (a lone surrogate)")
    if len(texts) > settings.max_texts:
        problems.append(f"{len(texts)} texts, over the limit of {settings.max_texts}")
    long = [i for i, text in enumerate(texts) if len(text) > settings.max_chars]
    if long:
        problems.append(f"text {long[0] + 1} is over the limit of {settings.max_chars} characters")
    return problems


def is_unicode(text: str) -> bool:
    """False for a str holding a lone surrogate ("\\ud800" in JSON, or the bytes ED A0 80, which
    Python's JSON reader lets through): such text cannot be tokenized or written back as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
