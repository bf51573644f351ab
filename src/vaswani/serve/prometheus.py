"""A server's figures for Prometheus (`serve --metrics`: GET /metrics, in Prometheus' text format,
by prometheus-client).

    vaswani_requests_total{route, status, model}
                                               requests answered, by route template, status
                                               and the model(s) they were given to
    vaswani_request_seconds{route}             time to answer, a histogram
    vaswani_rejections_total{cause}            requests refused: key, rate_limit, too_large,
                                               invalid, busy, deadline, error
    vaswani_characters_total{model}            characters of text given to each model
    vaswani_batch_texts{model}                 texts in each model call, a histogram
    vaswani_seconds_per_token{model}           a model call's time per source token, a histogram
    vaswani_queued_texts{model}                texts waiting for each model

Labels are route templates ("/translate", never a path a client made up), status codes, causes and
the model's run directory name: never an API key, a client's address or a text. Each app has a
registry of its own, so two servers in one process (the tests) count apart.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from vaswani.serve.worker import SERVING, Worker

CAUSES = {
    401: "key",
    403: "key",
    413: "too_large",
    422: "invalid",
    400: "invalid",
    429: "rate_limit",
    503: "busy",
    504: "deadline",
    500: "error",
}
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PER_TOKEN = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1)
TEXTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Metrics:
    """The counters of one server, and the routes and hooks that fill and show them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        kept = {"registry": self.registry}
        self.requests = Counter(
            "vaswani_requests", "Requests answered", ["route", "status", "model"], **kept
        )
        self.seconds = Histogram(
            "vaswani_request_seconds", "Time to answer", ["route"], buckets=SECONDS, **kept
        )
        self.rejections = Counter("vaswani_rejections", "Requests refused", ["cause"], **kept)
        self.characters = Counter(
            "vaswani_characters", "Characters given to the model", ["model"], **kept
        )
        self.batch_texts = Histogram(
            "vaswani_batch_texts", "Texts in a model call", ["model"], buckets=TEXTS, **kept
        )
        self.per_token = Histogram(
            "vaswani_seconds_per_token",
            "A model call's seconds per source token",
            ["model"],
            buckets=PER_TOKEN,
            **kept,
        )
        self.queued = Gauge("vaswani_queued_texts", "Texts waiting", ["model"], **kept)

    def watch(self, worker: Worker) -> None:
        """Count `worker`'s model calls and show its queue (`Worker.metrics`)."""
        worker.metrics = self
        self.queued.labels(worker.name).set_function(lambda: worker.queued_texts)

    def model_call(self, model: str, texts: list[str], tokens: int, seconds: float) -> None:
        self.characters.labels(model).inc(sum(len(text) for text in texts))
        self.batch_texts.labels(model).observe(len(texts))
        self.per_token.labels(model).observe(seconds / max(tokens, 1))

    def add_routes(self, app: FastAPI) -> None:
        """GET /metrics, and the middleware that counts every request."""

        @app.get("/metrics", include_in_schema=False)
        async def metrics() -> Response:
            return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

        @app.middleware("http")
        async def count(request: Request, call_next: Any) -> Response:
            started = time.perf_counter()
            models: list[str] = []  # the models its handler gives it to (Worker.submit)
            serving = SERVING.set(models)
            try:
                response = await call_next(request)
            finally:
                SERVING.reset(serving)
            route = request.scope.get("route")
            template = getattr(route, "path", "unrouted")
            model = "+".join(models) or "none"  # a pivot: both, in order
            self.requests.labels(template, str(response.status_code), model).inc()
            self.seconds.labels(template).observe(time.perf_counter() - started)
            cause = CAUSES.get(response.status_code)
            if cause is not None:
                self.rejections.labels(cause).inc()
            return response
