"""An HTTP API over a run's model. A translation model: POST /translate with {"text": ...} or
{"texts": [...]} and optional beam_size and max_length. A language model: POST /generate with
{"prompt": ...} or {"prompts": [...]} and optional max_new_tokens, temperature, top_k, top_p,
seed. A classifier: POST /classify with {"text": ...} or {"texts": [...]}. GET /health; the OpenAPI
schema at /openapi.json and /docs. Requests arriving together are batched into one model call.
Every limit below is answered with a clear 4xx (413 body, 422 request) or 503 (queue full) or 504
(timeout). Ctrl-C or SIGTERM finishes requests in flight."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from vaswani.cli.common import (
    SEARCH_FIELDS,
    add_model_flags,
    add_quantize_flag,
    load_for_inference,
    port_number,
)
from vaswani.cli.fields import add_field_flags, settings_from
from vaswani.config import TASKS, DecodeConfig, ServeSettings

HELP = "serve a trained model over HTTP (POST /translate, /generate or /classify, GET /health)"
LIMITS = ("max_body_bytes", "max_texts", "max_chars", "max_beam_size", "max_length", "timeout_s",
          "max_queued_texts", "batch_wait_ms", "batch_tokens", "dynamic_batching")  # fmt: skip
FLAGS = {"timeout_s": "--timeout", "dynamic_batching": "--batching"}
# The search settings of a request that gives none; beam_size is ServeSettings'.
DECODING = tuple(name for name in SEARCH_FIELDS if name != "beam_size")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind; 0.0.0.0 exposes it to the network"
    )
    parser.add_argument("--port", type=port_number, default=8000, help="1 .. 65535")
    add_field_flags(parser, ServeSettings, LIMITS, flags=FLAGS)
    add_model_flags(parser)
    add_quantize_flag(parser)
    add_field_flags(parser, ServeSettings, ["beam_size"])
    add_field_flags(parser, DecodeConfig, DECODING)


def serve_settings(args: argparse.Namespace) -> ServeSettings:
    """The server's limits and the search settings of a request that gives none."""
    decoding = settings_from(DecodeConfig, args, DECODING)
    return settings_from(ServeSettings, args, (*LIMITS, "beam_size"), FLAGS, decoding=decoding)


def run(args: argparse.Namespace) -> int:
    from vaswani.serve import create_app, listen, serve  # the web stack, for this command only

    settings = serve_settings(args)
    loaded, placement = load_for_inference(args, *TASKS)
    settings = dataclasses.replace(settings, precision=placement.precision)
    sock = listen(args.host, args.port)  # a taken port is an error before "serving on"
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {args.host}: reachable from other machines", file=sys.stderr)
    print(f"serving {args.checkpoint} on http://{args.host}:{args.port} (docs at /docs)")
    app = create_app(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer, settings)
    serve(app, args.host, args.port, sock=sock)
    print("server stopped")
    return 0
