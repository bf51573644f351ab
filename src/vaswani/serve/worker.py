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
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from vaswani import __version__
from vaswani.config import DecodeConfig, Sampling, ServeSettings
from vaswani.decoding.text import InputTooLong, Segments, Translation, encode_sources
from vaswani.serve.refusals import Refused
from vaswani.translation import pipeline
from vaswani.translation.engine import Engine
from vaswani.translation.glossary import Glossary
from vaswani.translation.pipeline import Finished, Prepared, best_texts
from vaswani.translation.request import Aids, Request
from vaswani.translation.segment import Sentences

SERVING: ContextVar[list[str] | None] = ContextVar("serving", default=None)
"""The names of the models a request was given to, where someone counts them (`serve.metrics`
sets a list for each request; `Worker.submit` adds to it)."""


@dataclass
class Job:
    texts: list[str]
    settings: Any
    """DecodeConfig (translate), Sampling (generate) or a batch size (classify)."""
    tokens: int
    """Token ids of its texts (end-of-sentence counted): what a batch's budget counts."""
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    cancelled: bool = False
    prefix: list[int] | None = None
    """Ids before each of its texts: the target-language token of a multilingual model."""


@dataclass(frozen=True)
class Attending:
    """A job's settings asking for attention (`Engine.attention_records`) rather than
    translations: the translation of each of its texts. Queued as translations are, on the
    model's one thread."""

    translations: tuple[str, ...]


class Worker:
    """A model, the queue of requests waiting for it, and the thread that answers them in
    batches. Its `endpoint` says how texts become answers. A multilingual model has one worker
    for all its pairs (`Targeted` views); a batch may mix target languages."""

    prefix: list[int] | None = None  # a worker asked for no target language
    metrics: Any = None
    """Where its model calls are counted (`serve.metrics.Metrics`), with `serve --metrics`."""
    aids: Aids | None = None
    """The glossary and translation memory of the model served without a language pair."""

    def __init__(self, engine: Engine, settings: ServeSettings, endpoint: Any) -> None:
        self.engine = engine
        """The model with its tokenizers, shortlist, calibration and precision."""
        self.name = engine.path.name if engine.path is not None else "model"
        """What metrics call its model: its run directory's name."""
        self.task = engine.task
        self.endpoint = endpoint
        """The `serve.app.Endpoint` of the task: its route, its model call, its health check."""
        self.settings = settings
        self.language: str | None = engine.source_language
        """The language of the texts it is given, when known: its rules split sentences."""
        self.jobs: queue.Queue[Job | None] = queue.Queue()
        self.queued_texts = 0
        self.lock = threading.Lock()
        self.healthy = False
        self.error: str | None = None
        self.batches = 0
        self.thread = threading.Thread(target=self.work, name="vaswani-worker", daemon=True)

    @property
    def model(self) -> Any:
        return self.engine.model

    @property
    def device(self) -> torch.device:
        return self.engine.device

    @property
    def aligner(self) -> Engine:
        """What word-aligns its translations: its engine."""
        return self.engine

    def run(
        self, texts: list[str], settings: Any, prefixes: list[list[int]] | None = None
    ) -> list[Any]:
        """The model's answer for each text: a translation, a `Generation`, a `Classification`."""
        return self.endpoint.call(self.engine, texts, settings, prefixes)

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
        nothing (`Refused`, not_ready)."""
        if not self.healthy:
            raise Refused("not_ready", "the model is not ready; see /health")
        problems = text_problems(texts, self.settings)
        if problems:
            return problems, 0
        sentences = sentences or Sentences.of(texts, split=False)
        segments = sentences.flat
        try:
            prefixes = None if prefix is None else [prefix] * len(segments)
            asked = Segments(segments, prefixes, sentences.labels("text"))
            encoded = encode_sources(self.engine.src_tokenizer, asked, positions, "error", "text")
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
        """Refuse the request (`Refused`) if it has problems, if it could never fit in the
        queue, if the queue is full now; otherwise queue it for the worker (each text after
        `prefix`) and wait for the answer, at most `timeout_s`."""
        serving = SERVING.get()
        if serving is not None and self.name not in serving:
            serving.append(self.name)
        if problems:
            raise Refused("invalid", "; ".join(problems))
        if len(texts) > self.settings.max_queued_texts:  # can never fit: retrying cannot help
            raise Refused(
                "too_large",
                f"{len(texts)} segments in one request (sentences, with splitting), over "
                f"the {self.settings.max_queued_texts} the server queues; send fewer or shorter texts",
            )
        if not self.admit(len(texts)):
            raise Refused("busy", "too many texts waiting; retry shortly", retry_after=1)
        loop = asyncio.get_running_loop()
        job = Job(texts, settings, tokens, loop.create_future(), loop, prefix=prefix)
        self.jobs.put(job)
        timeout = self.settings.timeout_s
        try:
            return await asyncio.wait_for(job.future, timeout)
        except asyncio.TimeoutError:
            job.cancelled = True
            raise Refused("timed_out", f"not answered within {timeout} s") from None
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
        started = time.perf_counter()
        try:
            out: list[Any] | Exception = self.run(texts, batch[0].settings, prefixes)
        except Exception as error:  # answered to the request, the server keeps serving
            out = error
        self.batches += 1
        if self.metrics is not None:
            tokens = sum(job.tokens for job in batch)
            self.metrics.model_call(self.name, texts, tokens, time.perf_counter() - started)
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
        self.language, self.settings = first.language, first.settings

    aligner = None  # no one model made its translations: nothing to align them by
    aids = None
    prefix = None

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


Route = Worker | Targeted | Pivot
"""What a translation request is routed to: a model's worker, one pair of it, or a pivot chain."""


def prepared_for(worker: Route, texts: list[str], request: Request) -> Prepared:
    """A request's texts as `worker` translates them (the pipeline's first phase): split as the
    request says, led by the worker's prefix, with the request's aids."""
    split = pipeline.sentences_of(texts, request, worker.language)
    prefix = worker.prefix
    return pipeline.prepare(split, request.aids, None if prefix is None else [prefix] * len(texts))


def with_aids(worker: Route, request: Request, glossary: Glossary | None = None) -> Request:
    """`request` with the aids of `worker` (its pair's glossary and translation memory) and a
    request's own `glossary`, whose terms win."""
    aids = worker.aids or Aids()
    merged = (aids.glossary or Glossary()).merged(glossary)
    return dataclasses.replace(request, aids=dataclasses.replace(aids, glossary=merged or None))


async def translated(
    worker: Route,
    prepared: Prepared,
    request: Request,
    checked: tuple[list[str], int] | None = None,
    step: int = 1,
) -> Finished:
    """The segments of `prepared` the memory does not hold, queued for `worker`, then the
    pipeline's second phase (fuzzy matches, glossary, word alignment, joining) in a thread beside
    the worker's. `checked`: the request's problems and tokens (`Worker.problems`), queued as one
    job; None: queued `step` segments a job, each checked on its own."""
    pivot = ["glossaries are not applied to a pair translated through a pivot"]
    pivot = pivot if request.aids.glossary and worker.aligner is None else []
    flat, todo = prepared.sentences.flat, prepared.todo
    if checked is not None:
        jobs = [(todo, checked)]
    else:
        jobs = [(todo[start : start + step], None) for start in range(0, len(todo), step)]
    answered: list[list[Translation]] = []
    for indices, checks in jobs:
        chunk = [flat[i] for i in indices]
        problems, tokens = checks or worker.problems(chunk, worker.model.cfg.max_len)
        if chunk or problems or pivot:
            answered += await worker.submit(chunk, request.decoding, problems + pivot, tokens)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(
        None, pipeline.finish, prepared, answered, request, worker.aligner
    )


async def served(
    worker: Route,
    texts: list[str],
    request: Request,
    refused: list[str] | None = None,
    step: int | None = None,
) -> Finished:
    """The one path of texts through the server, whatever the endpoint: the pipeline's first
    phase (`prepared_for`), the segments queued for `worker`, then its second phase
    (`translated`). The request is checked whole and queued as one job, refused (422) with the
    endpoint's own problems with it (`refused`); with `step` (a document's many texts), queued
    `step` segments a job, each checked on its own."""
    prepared = prepared_for(worker, texts, request)
    if step is not None:
        return await translated(worker, prepared, request, step=step)
    positions = worker.model.cfg.max_len
    problems, tokens = worker.problems(texts, positions, sentences=prepared.sentences)
    return await translated(worker, prepared, request, (problems + (refused or []), tokens))


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
