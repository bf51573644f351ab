"""`vaswani serve`: a translation model over HTTP (FastAPI + uvicorn), calling `vaswani.decode`.

Requests that arrive together are translated together: one worker thread takes the first waiting
request, waits `batch_wait_ms` for more with the same search settings, and makes one model call for
all their sentences under a token budget (dynamic batching). Every limit answers at once with a 4xx
or 503 naming the limit, so a bad or excessive request never reaches the model:

    body over max_body_bytes                     413, before the body is parsed
    malformed JSON, wrong types, unknown fields  422
    too many texts, a text too long, beam size
    or max_length out of range                   422
    queue full (max_queued_texts)                503 with Retry-After
    not answered within timeout_s                504 (the worker skips it if it has not started)

The server binds 127.0.0.1 unless told otherwise, takes no file paths from clients, and on SIGTERM
stops accepting connections and finishes the requests in flight before exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import torch
from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from vaswani import __version__
from vaswani.config import DecodeConfig
from vaswani.decode import InputTooLong, encode_sources, translate
from vaswani.train.distributed import autocast


@dataclass(frozen=True)
class ServeSettings:
    """Limits and batching of the server; every one is a `vaswani serve` flag."""

    max_body_bytes: int = 1 << 20
    max_texts: int = 64
    """Sentences per request."""
    max_chars: int = 2000
    """Characters per sentence (the model's position limit also applies, after tokenizing)."""
    max_beam_size: int = 8
    beam_size: int = 4
    """Used when a request gives none (the paper's 4)."""
    max_length: int = 256
    """Largest `max_length` (output tokens) a request may ask for."""
    timeout_s: float = 30.0
    max_queued_texts: int = 512
    """Sentences waiting or being translated; beyond this a request gets 503 at once."""
    batch_wait_ms: float = 5.0
    """How long the worker waits for more requests to batch with the first one."""
    batch_tokens: int = 8192
    """Token budget of one model call (source tokens x beam size)."""
    dynamic_batching: bool = True
    """False: one request per model call (for comparison)."""
    precision: str = "bf16"


class TranslateRequest(BaseModel):
    """One sentence (`text`) or several (`texts`), and optional search settings."""

    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(default=None, description="one sentence")
    texts: list[str] | None = Field(
        default=None, description="several sentences, answered in order"
    )
    beam_size: int | None = Field(default=None, ge=1, description="1 = greedy search")
    max_length: int | None = Field(default=None, ge=1, description="most output tokens")

    @model_validator(mode="after")
    def one_of_text_or_texts(self) -> TranslateRequest:
        if (self.text is None) == (self.texts is None):
            raise ValueError('give exactly one of "text" and "texts"')
        return self


class TranslateResponse(BaseModel):
    translations: list[str]
    beam_size: int
    seconds: float


@dataclass
class Job:
    texts: list[str]
    decode: DecodeConfig
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    cancelled: bool = False


class Translator:
    """The model and the worker thread that batches requests for it."""

    def __init__(self, model: Any, src_tok: Any, tgt_tok: Any, settings: ServeSettings) -> None:
        self.model, self.src_tok, self.tgt_tok = model, src_tok, tgt_tok
        self.settings = settings
        self.jobs: queue.Queue[Job | None] = queue.Queue()
        self.queued_texts = 0
        self.lock = threading.Lock()
        self.healthy = False
        self.error: str | None = None
        self.batches = 0
        self.thread = threading.Thread(target=self.work, name="vaswani-translate", daemon=True)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def run(self, texts: list[str], dc: DecodeConfig) -> list[str]:
        with torch.no_grad(), autocast(self.device, self.settings.precision):
            return translate(self.model, self.src_tok, self.tgt_tok, texts, dc)

    def start(self) -> None:
        """Check the model with one translation, then start the worker; on failure the server
        stays up to say so (/health 503 with the error), translating nothing."""
        try:
            self.run(["health check"], DecodeConfig(beam_size=1, max_new_tokens=4))
        except Exception as error:
            self.error = f"{type(error).__name__}: {error}"
            return
        self.healthy = True
        self.thread.start()

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
                if job.decode == first.decode:
                    batch.append(job)
                    tokens += self.cost(job)
                else:
                    held.append(job)
            self.translate(batch)

    def cost(self, job: Job) -> int:
        # Characters stand in for tokens here (a token is one or more characters).
        return sum(len(t) + 1 for t in job.texts) * job.decode.beam_size

    def translate(self, batch: list[Job]) -> None:
        batch = [job for job in batch if not job.cancelled]
        if not batch:
            return
        texts = [text for job in batch for text in job.texts]
        try:
            out: list[str] | Exception = self.run(texts, batch[0].decode)
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


def settle(future: asyncio.Future, result: Any) -> None:
    if future.done():  # timed out meanwhile
        return
    if isinstance(result, Exception):
        future.set_exception(result)
    else:
        future.set_result(result)


class BodyLimit:
    """ASGI middleware: 413 for a body over the limit, before anything parses it."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self.refuse(send)
            return
        # Without a Content-Length (chunked), read up to the limit here and replay the body.
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.max_bytes:
                await self.refuse(send)
                return
        body = b"".join(chunks)

        async def replay() -> dict:
            nonlocal body
            message, body = {"type": "http.request", "body": body, "more_body": False}, b""
            return message

        await self.app(scope, replay, send)

    async def refuse(self, send: Any) -> None:
        response = JSONResponse(
            {"detail": f"request body over the limit of {self.max_bytes} bytes"}, status_code=413
        )
        await response(scope={"type": "http"}, receive=None, send=send)


def create_app(
    model: Any, src_tok: Any, tgt_tok: Any, settings: ServeSettings | None = None
) -> FastAPI:
    """The HTTP API over a loaded model and its tokenizers."""
    settings = settings or ServeSettings()
    translator = Translator(model.eval(), src_tok, tgt_tok, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.get_running_loop().run_in_executor(None, translator.start)
        yield
        translator.stop()

    app = FastAPI(
        title="vaswani",
        version=__version__,
        description="Translate with a Transformer trained by vaswani.",
        lifespan=lifespan,
    )
    app.state.translator = translator
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)

    @app.get("/health")
    async def health() -> JSONResponse:
        """200 when the model is loaded and a test translation passed; 503 otherwise."""
        body = {
            "status": "ok" if translator.healthy else "starting",
            "version": __version__,
            "device": str(translator.device),
            "queued_texts": translator.queued_texts,
        }
        if translator.error is not None:
            body.update(status="failed", error=translator.error)
        return JSONResponse(body, status_code=200 if translator.healthy else 503)

    @app.post("/translate", response_model=TranslateResponse)
    async def translate(request: TranslateRequest) -> TranslateResponse:
        """Translate `text` or `texts`; the answer keeps their order."""
        if not translator.healthy:
            raise HTTPException(status_code=503, detail="the model is not ready; see /health")
        texts = [request.text] if request.texts is None else request.texts
        beam = request.beam_size or settings.beam_size
        problems = []
        if not texts:
            problems.append('"texts" is empty')
        if len(texts) > settings.max_texts:
            problems.append(f"{len(texts)} texts, over the limit of {settings.max_texts}")
        long = [i for i, text in enumerate(texts) if len(text) > settings.max_chars]
        if long:
            problems.append(
                f"text {long[0] + 1} is over the limit of {settings.max_chars} characters"
            )
        if beam > settings.max_beam_size:
            problems.append(f"beam_size {beam} is over the limit of {settings.max_beam_size}")
        if request.max_length is not None and request.max_length > settings.max_length:
            problems.append(
                f"max_length {request.max_length} is over the limit of {settings.max_length}"
            )
        if not problems:
            try:  # the position limit, after tokenizing: refused here, not in a shared batch
                encode_sources(src_tok, texts, model.cfg.max_len, "error", what="text")
            except InputTooLong as error:
                problems.append(str(error).split("; ")[0])
        if problems:
            raise HTTPException(status_code=422, detail="; ".join(problems))
        if not translator.admit(len(texts)):
            raise HTTPException(
                status_code=503,
                detail="too many sentences waiting; retry shortly",
                headers={"Retry-After": "1"},
            )
        loop = asyncio.get_running_loop()
        dc = DecodeConfig(
            beam_size=beam,
            max_new_tokens=request.max_length,
            max_tokens=max(settings.batch_tokens, beam),
        )
        job = Job(texts, dc, loop.create_future(), loop)
        start = time.perf_counter()
        translator.jobs.put(job)
        try:
            translations = await asyncio.wait_for(job.future, settings.timeout_s)
        except asyncio.TimeoutError:
            job.cancelled = True
            raise HTTPException(
                status_code=504, detail=f"not translated within {settings.timeout_s} s"
            ) from None
        finally:
            translator.release(len(texts))
        return TranslateResponse(
            translations=translations, beam_size=beam, seconds=time.perf_counter() - start
        )

    return app


def serve(app: FastAPI, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Run the app with uvicorn until SIGINT/SIGTERM; requests in flight are finished first."""
    import signal

    import uvicorn

    # uvicorn catches SIGINT/SIGTERM, stops accepting, finishes the requests in flight, then
    # raises the signal again for the handler that was there before it. Make that handler a
    # no-op, so a requested stop ends with status 0 instead of "killed by SIGTERM".
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda signum, frame: None)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=60)
