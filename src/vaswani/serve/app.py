"""The FastAPI application: one route per task, the body limit, 422 bodies, and running it
with uvicorn."""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from vaswani import __version__
from vaswani.config import DecodeConfig, Sampling, ServeSettings
from vaswani.decoding.text import Segments
from vaswani.device import pick_precision
from vaswani.errors import VaswaniError
from vaswani.serve.file_api import FileService
from vaswani.serve.libre import Access, Libre, request_fields
from vaswani.serve.native import native_translate, over, stream_translation
from vaswani.serve.pairs import Pairs, Routed, spelling
from vaswani.serve.refusals import Refused
from vaswani.serve.schemas import (
    BodyError,
    ClassificationOut,
    ClassifyResponse,
    GenerateRequest,
    GenerateResponse,
    GenerationOut,
    TextsRequest,
    TranslateRequest,
    TranslateResponse,
    json_body,
)
from vaswani.serve.suggestions import Suggestions
from vaswani.serve.worker import (
    Attending,
    Targeted,
    Worker,
)
from vaswani.tasks import CLASSIFY, LANGUAGE_MODEL, TRANSLATE
from vaswani.translation.engine import Engine
from vaswani.translation.request import Aids
from vaswani.translation.request import Request as Asked


@dataclass
class Served:
    """A model to serve; a translation model may be named by its language pair (`vaswani serve
    --model de:en=RUN`), which the LibreTranslate endpoints need (a multilingual model once per
    pair, its target's token then leading every text)."""

    engine: Engine
    source: str | None = None
    target: str | None = None
    aids: Aids | None = None
    """The pair's glossary and translation memory (`serve --glossary`, `--memory`)."""

    @property
    def prefix(self) -> list[int] | None:
        """A multilingual model's token for `target`, put before each text (with the source's,
        for a model told both)."""
        if self.engine.languages is None or self.target is None:
            return None
        return self.engine.prefixes(self.target, 1, self.source)[0]


@dataclass
class State:
    """What the routes serve: one worker per model, the named language pairs."""

    settings: ServeSettings
    workers: list[Worker]
    pairs: Pairs
    libre: Libre | None

    @property
    def worker(self) -> Worker:
        return self.workers[0]

    def translator(self, source: str | None, target: str | None, texts: list[str]) -> Routed:
        """Where a native /translate request goes: the only model where it names no pair, else
        the pairs' one routing (`Pairs.resolve`; a refusal is 422)."""
        if source is None and target is None and len(self.pairs.workers) <= 1:
            worker = next(iter(self.pairs.workers.values()), self.workers[0])
            return Routed(worker, None, None)
        detect = self.libre.detector.detect if self.libre is not None else None
        return self.pairs.resolve(source, target, texts, detect)


def create_app(
    engine: Engine | None = None,
    settings: ServeSettings | None = None,
    *,
    served: list[Served] | None = None,
    access: Access | None = None,
    pivot: bool = True,
    suggestions: Suggestions | None = None,
) -> FastAPI:
    """The HTTP API over an engine, or over several translation engines named by language pair
    (`served`): GET /health, and POST /translate (with the LibreTranslate API beside it),
    /generate or /classify by the kind of model. `access`: API keys and a rate limit for the
    LibreTranslate endpoints. `pivot`: translate a pair no model serves through a middle
    language when two served pairs chain (de->en, en->fr). `suggestions`: where POST /suggest
    keeps users' translations (none: it answers 403). An engine whose precision nothing
    decided (`load_run`, or built from a model in Python) computes in `settings.precision`."""
    settings = settings or ServeSettings()
    served = served or [Served(engine)]
    by_model: dict[int, Worker] = {}  # one worker (one queue, one thread) per model
    for s in served:
        if id(s.engine.model) not in by_model:
            if not s.engine.decided:
                s.engine.precision = pick_precision(settings.precision, s.engine.device)[0]
            worker = Worker(s.engine, settings, ENDPOINTS[s.engine.task])
            if s.engine.languages is None and s.source is not None:
                worker.language = s.source  # the pair it is named by: its rules split sentences
            if s.source is None:
                worker.aids = s.aids
            by_model[id(s.engine.model)] = worker
    workers = list(by_model.values())
    if len(workers) > 1 and not all(w.task.parallel for w in workers):
        raise ServeError("several models are served by language pair: translation models only")
    pairs = Pairs(
        {
            (s.source, s.target): Targeted(by_model[id(s.engine.model)], s.prefix, s.aids)
            if s.prefix or s.aids
            else by_model[id(s.engine.model)]
            for s in served
            if s.source is not None and s.target is not None
        },
        pivot,
        spelling([s.engine.languages for s in served]),
    )
    libre = Libre(pairs, access or Access(), settings, suggestions) if pairs.workers else None
    state = State(settings, workers, pairs, libre)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for worker in workers:
                await stack.enter_async_context(worker.lifespan(app))
            yield

    app = FastAPI(
        title="vaswani",
        version=__version__,
        description=f"{workers[0].endpoint.description} a Transformer trained by vaswani.",
        lifespan=lifespan,
    )
    app.state.worker, app.state.workers = workers[0], workers
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Refused, refused)
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_body_bytes,
        larger={"/translate_file": settings.max_file_bytes + (1 << 16)},  # + the form's fields
    )
    if settings.metrics:
        from vaswani.serve.prometheus import Metrics

        metrics = Metrics()
        for worker in workers:
            metrics.watch(worker)
        metrics.add_routes(app)
    app.get("/health")(workers[0].health if len(workers) == 1 else health_of(pairs))
    workers[0].endpoint.route(app, state)
    if libre is not None:
        libre.add_routes(app)
        FileService(libre).add_routes(app)
    return app


async def refused(request: Request, error: Refused) -> JSONResponse:  # noqa: ARG001
    """A refusal of vaswani's own endpoints, answered as `Refused` says (`{"detail": ...}`)."""
    return error.answer()


def health_of(pairs: Pairs) -> Callable[[], JSONResponse]:
    async def health() -> JSONResponse:
        """200 when every model is loaded and passed a test request; 503 otherwise."""
        models = {f"{s}:{t}": w.health_record() for (s, t), w in pairs.workers.items()}
        ok = all(w.healthy for w in pairs.workers.values())
        body = {"status": "ok" if ok else "starting", "version": __version__, "models": models}
        return JSONResponse(body, status_code=200 if ok else 503)

    return health


TRANSLATE_BODY = {  # for /docs: the route reads its body itself, to take either API
    "requestBody": {
        "content": {
            "application/json": {
                "schema": {
                    "anyOf": [
                        TranslateRequest.model_json_schema(),
                        {
                            "type": "object",
                            "title": "LibreTranslate request",
                            "description": "q (a "
                            "text or a list), source (a code or auto), target, format (text or html), "
                            "alternatives, api_key; also as form data",
                        },
                    ]
                }
            },
        },
        "required": True,
    }
}


def translate_route(app: FastAPI, state: State) -> None:
    settings = state.settings

    @app.post("/translate", response_model=TranslateResponse, openapi_extra=TRANSLATE_BODY)
    async def translate_endpoint(request: Request) -> Any:
        """vaswani's request ({"text"} or {"texts"}, optional beam_size, max_length, source,
        target), or LibreTranslate's ({"q", "source", "target", "format", "alternatives",
        "api_key"}, JSON or form data); the answer keeps the order of the texts."""
        body = await request.body()
        is_json = request.headers.get("content-type", "").startswith("application/json")
        try:
            data = json_body(body) if is_json else None
        except BodyError as error:
            return validation_response(
                [{"loc": ["body"], "msg": str(error), "type": "json_invalid"}]
            )
        if not is_json or (isinstance(data, dict) and "q" in data):
            if state.libre is None:
                return JSONResponse(
                    {
                        "error": "LibreTranslate requests need models named by "
                        "language pair: vaswani serve --model SRC:TGT=RUN"
                    },
                    status_code=400,
                )
            fields = data if is_json else await request_fields(request, body)
            return await state.libre.translate(request, fields)
        try:
            asked = TranslateRequest.model_validate(data)
        except ValidationError as error:
            return validation_response(error.errors())
        routed = state.translator(asked.source, asked.target, asked.all_texts())
        if asked.stream:  # server-sent events, a sentence at a time
            return stream_translation(asked, routed, settings)
        answer = await native_translate(asked, routed, settings)
        answer.pivot = routed.middle
        return answer


def generate_route(app: FastAPI, state: State) -> None:
    worker = state.worker
    settings = worker.settings
    # The start token, the prompt, and room for one new token.
    positions = worker.model.cfg.max_len - 1

    @app.post("/generate", response_model=GenerateResponse)
    async def generate_endpoint(request: GenerateRequest) -> GenerateResponse:
        """Continue `prompt` or each of `prompts` by sampling; the answer keeps their order."""
        prompts = [request.prompt] if request.prompts is None else request.prompts
        problems, tokens = worker.problems(prompts, positions)
        problems += over("max_new_tokens", request.max_new_tokens, settings.max_length)
        sampling = Sampling(
            request.max_new_tokens, request.temperature, request.top_k, request.top_p, request.seed
        )
        start = time.perf_counter()
        found = await worker.submit(prompts, sampling, problems, tokens)
        return GenerateResponse(
            generations=[GenerationOut(**vars(g)) for g in found],
            seconds=time.perf_counter() - start,
        )


def classify_route(app: FastAPI, state: State) -> None:
    worker = state.worker
    positions = worker.model.cfg.max_len - 1  # the classifier puts a start token before a text

    @app.post("/classify", response_model=ClassifyResponse)
    async def classify_endpoint(request: TextsRequest) -> ClassifyResponse:
        """The most probable label of `text` or of each of `texts`, with every label's
        probability; null for a blank text."""
        texts = request.all_texts()
        problems, tokens = worker.problems(texts, positions)
        start = time.perf_counter()
        found = await worker.submit(texts, worker.settings.batch_tokens, problems, tokens)
        return ClassifyResponse(
            labels=[None if c is None else ClassificationOut(**vars(c)) for c in found],
            seconds=time.perf_counter() - start,
        )


@dataclass(frozen=True)
class Endpoint:
    """What serving one kind of model takes: its route, its model call, a start-up check."""

    description: str
    route: Callable[[FastAPI, State], None]
    call: Callable[[Engine, list[str], Any, list[list[int]] | None], list[Any]]
    """The answers of an engine to a batch of texts with their (equal) settings (a
    `DecodeConfig`, a `Sampling`, a classifier's batch size) and each text's prefix ids (a
    multilingual model's target-language token), if any."""
    check: Any
    """Settings of the request the model must answer before the server says it is healthy."""


ENDPOINTS = {  # by task
    TRANSLATE: Endpoint(
        "Translate with",
        translate_route,
        lambda engine, texts, settings, prefixes: (
            engine.attention_records(texts, list(settings.translations), prefixes)
            if isinstance(settings, Attending)
            else engine.segments(Segments(texts, prefixes), Asked(decoding=settings))
        ),
        DecodeConfig(beam_size=1, max_new_tokens=4),
    ),
    LANGUAGE_MODEL: Endpoint(
        "Generate text with",
        generate_route,
        lambda engine, texts, sampling, _: engine.generate(texts, sampling),
        Sampling(max_new_tokens=4),
    ),
    CLASSIFY: Endpoint(
        "Classify with",
        classify_route,
        lambda engine, texts, batch_tokens, _: engine.classify(texts, batch_tokens),
        8192,
    ),
}


class BodyLimit:
    """ASGI middleware: 413 for a body over the limit, before anything parses it."""

    def __init__(self, app: Any, max_bytes: int, larger: dict[str, int] | None = None) -> None:
        self.app, self.max_bytes, self.larger = app, max_bytes, larger or {}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.larger.get(scope.get("path", ""), self.max_bytes)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await self.refuse(send, limit)
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
            if size > limit:
                await self.refuse(send, limit)
                return
        body: bytes | None = b"".join(chunks)

        async def replay() -> dict:
            """The body once; then what the client does next (a response that streams, such
            as a file, waits on this for the client's disconnect)."""
            nonlocal body
            if body is None:
                return await receive()
            message, body = {"type": "http.request", "body": body, "more_body": False}, None
            return message

        await self.app(scope, replay, send)

    async def refuse(self, send: Any, limit: int) -> None:
        response = JSONResponse(
            {"detail": f"request body over the limit of {limit} bytes"}, status_code=413
        )
        await response(scope={"type": "http"}, receive=None, send=send)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def validation_error(request: Any, error: RequestValidationError) -> JSONResponse:
    return validation_response(error.errors())


def validation_response(errors: list) -> JSONResponse:
    """422 naming each bad field. The offending input is not echoed back: it may be a number JSON
    cannot hold (1e400 parses as infinity) or text that is not valid Unicode."""
    detail = [
        {
            "loc": [str(part) for part in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in errors
    ]
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
