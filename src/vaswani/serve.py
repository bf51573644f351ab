"""`vaswani serve`: a trained model over HTTP (FastAPI + uvicorn), calling `vaswani.decode`.

The endpoint follows the model: POST /translate for a translation model, POST /generate for a
language model, POST /classify for a classifier (GET /health says which: "task").

Requests that arrive together are answered together: one worker thread takes the first waiting
request, waits `batch_wait_ms` for more with the same settings, and makes one model call for all
their texts under a token budget (dynamic batching). Every limit answers at once with a 4xx or 503
naming the limit, so a bad or excessive request never reaches the model:

    body over max_body_bytes                     413, before the body is parsed
    malformed JSON, wrong types, unknown fields  422
    too many texts, a text too long, beam size,
    max_length / max_new_tokens out of range,
    a sampling setting out of range              422
    queue full (max_queued_texts)                503 with Retry-After
    not answered within timeout_s                504 (the worker skips it if it has not started)

The server binds 127.0.0.1 unless told otherwise, takes no file paths from clients, and on SIGTERM
stops accepting connections and finishes the requests in flight before exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import queue
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import torch
from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from vaswani import __version__
from vaswani.config import DecodeConfig, ServeSettings
from vaswani.decode import InputTooLong, classify, encode_sources, generate, translate
from vaswani.device import autocast, pick_precision
from vaswani.errors import VaswaniError
from vaswani.model import DecoderOnly, EncoderClassifier

# Request bodies are typed strictly: "2" and true are not beam sizes, NaN and infinity are not
# numbers, and an unknown field is an error rather than ignored.
STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class TextsRequest(BaseModel):
    """One text (`text`) or several (`texts`): what /translate and /classify take."""

    model_config = STRICT
    text: str | None = Field(default=None, description="one text")
    texts: list[str] | None = Field(default=None, description="several texts, answered in order")

    @model_validator(mode="after")
    def one_of_text_or_texts(self) -> TextsRequest:
        if (self.text is None) == (self.texts is None):
            raise ValueError('give exactly one of "text" and "texts"')
        return self

    def all_texts(self) -> list[str]:
        return [self.text] if self.texts is None else self.texts


class TranslateRequest(TextsRequest):
    """One sentence (`text`) or several (`texts`), and optional search settings."""

    beam_size: int | None = Field(default=None, ge=1, description="1 = greedy search")
    max_length: int | None = Field(default=None, ge=1, description="most output tokens")


class TranslateResponse(BaseModel):
    translations: list[str]
    beam_size: int
    seconds: float


class GenerateRequest(BaseModel):
    """One prompt or several, and how to sample their continuations."""

    model_config = STRICT
    prompt: str | None = Field(default=None, description='one prompt ("" starts from nothing)')
    prompts: list[str] | None = Field(default=None, description="several prompts, in order")
    max_new_tokens: int = Field(default=100, ge=1, description="most tokens to generate")
    temperature: float = Field(default=1.0, ge=0.0, description="0 takes the most probable token")
    top_k: int = Field(default=0, ge=0, description="draw from the k most probable; 0 = all")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="nucleus: probability kept")
    seed: int = Field(default=0, description="prompt i is sampled with seed + i")

    @model_validator(mode="after")
    def one_of_prompt_or_prompts(self) -> GenerateRequest:
        if (self.prompt is None) == (self.prompts is None):
            raise ValueError('give exactly one of "prompt" and "prompts"')
        return self


class GenerationOut(BaseModel):
    prompt: str
    text: str
    tokens: int
    finished: bool


class GenerateResponse(BaseModel):
    generations: list[GenerationOut]
    seconds: float


@dataclass(frozen=True)
class Sampling:
    """The settings of a generate request: requests with equal ones share a model call."""

    max_new_tokens: int
    temperature: float
    top_k: int
    top_p: float
    seed: int


class ClassificationOut(BaseModel):
    label: str
    probability: float
    probabilities: dict[str, float]


class ClassifyResponse(BaseModel):
    labels: list[ClassificationOut | None] = Field(description="null for a blank text")
    seconds: float


@dataclass
class Job:
    texts: list[str]
    settings: Any
    """DecodeConfig (translate), Sampling (generate) or None (classify)."""
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    cancelled: bool = False


def task_of_model(model: Any) -> str:
    if isinstance(model, DecoderOnly):
        return "lm"
    if isinstance(model, EncoderClassifier):
        return "classify"
    return "translate"


class Worker:
    """The model and the worker thread that batches requests for it."""

    def __init__(self, model: Any, src_tok: Any, tgt_tok: Any, settings: ServeSettings) -> None:
        self.model, self.src_tok, self.tgt_tok = model, src_tok, tgt_tok
        self.task = task_of_model(model)
        self.settings = settings
        self.precision, _ = pick_precision(settings.precision, self.device)
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

    def run(self, texts: list[str], settings: Any) -> list[Any]:
        """The model's answer for each text: a translation, a `Generation`, a `Classification`."""
        with torch.no_grad(), autocast(self.device, self.precision):
            if self.task == "lm":
                s = settings
                return generate(self.model, self.src_tok, texts, s.max_new_tokens, s.temperature,
                                s.top_k, s.top_p, s.seed)  # fmt: skip
            if self.task == "classify":
                budget = self.settings.batch_tokens
                return classify(self.model, self.src_tok, self.tgt_tok.labels, texts, budget)
            return translate(self.model, self.src_tok, self.tgt_tok, texts, settings)

    def start(self) -> None:
        """Check the model with one request, then start the worker; on failure the server stays
        up to say so (/health 503 with the error), answering nothing."""
        check = {
            "translate": DecodeConfig(beam_size=1, max_new_tokens=4),
            "lm": Sampling(4, 1.0, 0, 1.0, 0),
            "classify": None,
        }[self.task]
        try:
            self.run(["health check"], check)
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
                if job.settings == first.settings:
                    batch.append(job)
                    tokens += self.cost(job)
                else:
                    held.append(job)
            self.answer(batch)

    def cost(self, job: Job) -> int:
        # Characters stand in for tokens here (a token is one or more characters).
        if isinstance(job.settings, DecodeConfig):
            return sum(len(t) + 1 for t in job.texts) * job.settings.beam_size
        if isinstance(job.settings, Sampling):
            return sum(len(t) + 1 + job.settings.max_new_tokens for t in job.texts)
        return sum(len(t) + 2 for t in job.texts)

    def answer(self, batch: list[Job]) -> None:
        batch = [job for job in batch if not job.cancelled]
        if not batch:
            return
        texts = [text for job in batch for text in job.texts]
        try:
            out: list[Any] | Exception = self.run(texts, batch[0].settings)
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
    """The HTTP API over a loaded model and its tokenizers (for a classifier, its `LabelSet`):
    POST /translate, /generate or /classify by the kind of model, and GET /health."""
    settings = settings or ServeSettings()
    worker = Worker(model.eval(), src_tok, tgt_tok, settings)
    max_len = model.cfg.max_len

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.get_running_loop().run_in_executor(None, worker.start)
        yield
        worker.stop()

    what = {"translate": "Translate with", "lm": "Generate text with", "classify": "Classify with"}
    app = FastAPI(
        title="vaswani",
        version=__version__,
        description=f"{what[worker.task]} a Transformer trained by vaswani.",
        lifespan=lifespan,
    )
    app.state.worker = worker
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)

    @app.get("/health")
    async def health() -> JSONResponse:
        """200 when the model is loaded and a test request passed; 503 otherwise."""
        body = {
            "status": "ok" if worker.healthy else "starting",
            "task": worker.task,
            "version": __version__,
            "device": str(worker.device),
            "queued_texts": worker.queued_texts,
        }
        if worker.error is not None:
            body.update(status="failed", error=worker.error)
        return JSONResponse(body, status_code=200 if worker.healthy else 503)

    def text_problems(texts: list[str]) -> list[str]:
        """What is wrong with a request's texts: how many, how long (the limits of every task).
        First of all, a model that is not ready answers nothing (503)."""
        if not worker.healthy:
            raise HTTPException(status_code=503, detail="the model is not ready; see /health")
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
            problems.append(
                f"text {long[0] + 1} is over the limit of {settings.max_chars} characters"
            )
        return problems

    async def submit(texts: list[str], job_settings: Any, problems: list[str]) -> list[Any]:
        """Refuse the request (422) if it has problems, or the queue is full (503); otherwise
        queue it for the worker and wait for the answer, at most `timeout_s` (504)."""
        if problems:
            raise HTTPException(status_code=422, detail="; ".join(problems))
        if not worker.admit(len(texts)):
            raise HTTPException(
                status_code=503,
                detail="too many texts waiting; retry shortly",
                headers={"Retry-After": "1"},
            )
        loop = asyncio.get_running_loop()
        job = Job(texts, job_settings, loop.create_future(), loop)
        worker.jobs.put(job)
        try:
            return await asyncio.wait_for(job.future, settings.timeout_s)
        except asyncio.TimeoutError:
            job.cancelled = True
            raise HTTPException(
                status_code=504, detail=f"not answered within {settings.timeout_s} s"
            ) from None
        finally:
            worker.release(len(texts))

    def position_problems(texts: list[str], limit: int) -> list[str]:
        """The position limit, after tokenizing: refused here, not in a shared batch."""
        try:
            encode_sources(src_tok, texts, limit, "error", what="text")
        except InputTooLong as error:
            return [str(error).split("; ")[0]]
        return []

    if worker.task == "translate":

        @app.post("/translate", response_model=TranslateResponse)
        async def translate_endpoint(request: TranslateRequest) -> TranslateResponse:
            """Translate `text` or `texts`; the answer keeps their order."""
            texts = request.all_texts()
            beam = request.beam_size or settings.beam_size
            problems = text_problems(texts)
            if beam > settings.max_beam_size:
                problems.append(f"beam_size {beam} is over the limit of {settings.max_beam_size}")
            if request.max_length is not None and request.max_length > settings.max_length:
                problems.append(
                    f"max_length {request.max_length} is over the limit of {settings.max_length}"
                )
            problems = problems or position_problems(texts, max_len)
            dc = dataclasses.replace(
                settings.decoding,
                beam_size=beam,
                max_new_tokens=request.max_length,
                batch_tokens=max(settings.batch_tokens, beam),
            )
            start = time.perf_counter()
            translations = await submit(texts, dc, problems)
            return TranslateResponse(
                translations=translations, beam_size=beam, seconds=time.perf_counter() - start
            )

    if worker.task == "lm":

        @app.post("/generate", response_model=GenerateResponse)
        async def generate_endpoint(request: GenerateRequest) -> GenerateResponse:
            """Continue `prompt` or each of `prompts` by sampling; the answer keeps their order."""
            prompts = [request.prompt] if request.prompts is None else request.prompts
            problems = text_problems(prompts)
            if request.max_new_tokens > settings.max_length:
                problems.append(
                    f"max_new_tokens {request.max_new_tokens} is over the limit of "
                    f"{settings.max_length}"
                )
            # The start token, the prompt, and room for one new token.
            problems = problems or position_problems(prompts, max_len - 1)
            sampling = Sampling(request.max_new_tokens, request.temperature, request.top_k,
                                request.top_p, request.seed)  # fmt: skip
            start = time.perf_counter()
            found = await submit(prompts, sampling, problems)
            return GenerateResponse(
                generations=[GenerationOut(**vars(g)) for g in found],
                seconds=time.perf_counter() - start,
            )

    if worker.task == "classify":

        @app.post("/classify", response_model=ClassifyResponse)
        async def classify_endpoint(request: TextsRequest) -> ClassifyResponse:
            """The most probable label of `text` or of each of `texts`, with every label's
            probability; null for a blank text."""
            texts = request.all_texts()
            # The classifier puts a start token before each text.
            problems = text_problems(texts) or position_problems(texts, max_len - 1)
            start = time.perf_counter()
            found = await submit(texts, None, problems)
            return ClassifyResponse(
                labels=[None if c is None else ClassificationOut(**vars(c)) for c in found],
                seconds=time.perf_counter() - start,
            )

    return app


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def is_unicode(text: str) -> bool:
    """False for a str holding a lone surrogate ("\\ud800" in JSON, or the bytes ED A0 80, which
    Python's JSON reader lets through): such text cannot be tokenized or written back as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def validation_error(request: Any, error: RequestValidationError) -> JSONResponse:
    """422 naming each bad field. The offending input is not echoed back: it may be a number JSON
    cannot hold (1e400 parses as infinity) or text that is not valid Unicode."""
    detail = [
        {"loc": [str(part) for part in e.get("loc", ())], "msg": str(e.get("msg", "")),
         "type": str(e.get("type", ""))}
        for e in error.errors()
    ]  # fmt: skip
    return JSONResponse(status_code=422, content={"detail": detail})


class ServeError(VaswaniError):
    """The server cannot start: the address is taken, or not one this machine has."""


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, or a one-line ServeError (before anything says "serving")."""
    if not 0 <= port <= 65535:
        raise ServeError(f"--port {port}: a port is a number in 0 .. 65535")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as error:
        raise ServeError(f"--host {host}: not an address to listen on ({error})") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise ServeError(
            f"cannot listen on {host}:{port}: {error.strerror} (another server there? use --port)"
        ) from None
    return sock


def serve(
    app: FastAPI,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    sock: socket.socket | None = None,
) -> None:
    """Run the app with uvicorn until SIGINT/SIGTERM; requests in flight are finished first.
    `sock`: an already bound socket (`listen`), so that a taken port fails before start-up."""
    sock = sock or listen(host, port)
    import uvicorn

    # uvicorn catches SIGINT/SIGTERM, stops accepting, finishes the requests in flight, then
    # raises the signal again for the handler that was there before it. Make that handler a
    # no-op, so a requested stop ends with status 0 instead of "killed by SIGTERM". The handlers
    # the process had are put back on return, so nothing else in it is changed.
    previous = {sig: signal.signal(sig, lambda signum, frame: None) for sig in STOP_SIGNALS}
    try:
        config = uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=60)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
