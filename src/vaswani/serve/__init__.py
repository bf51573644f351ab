"""`vaswani serve`: a trained model over HTTP (FastAPI + uvicorn), calling `vaswani.decoding.text`.

The endpoint follows the model: POST /translate for a translation model, POST /generate for a
language model, POST /classify for a classifier (GET /health says which: "task").

Requests that arrive together are answered together: one worker thread takes the first waiting
request, waits `batch_wait_ms` for more with the same settings, and makes one model call for all
their texts under a budget of `batch_tokens` token ids (times the beam size for translation,
plus the tokens to generate for a language model). Every limit answers at once with a 4xx or 503
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

The package: `schemas` (request and response bodies), `worker` (limits, queue, batches, the
model call), `app` (`create_app`, one route per task in `ENDPOINTS`, `serve`).
"""

from __future__ import annotations

from vaswani.config import ServeSettings
from vaswani.serve.app import ENDPOINTS, Served, ServeError, create_app, listen, serve
from vaswani.serve.libre import Access
from vaswani.serve.worker import Worker

__all__ = [
    "ENDPOINTS",
    "Access",
    "ServeError",
    "ServeSettings",
    "Served",
    "Worker",
    "create_app",
    "listen",
    "serve",
]
