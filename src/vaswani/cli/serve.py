"""An HTTP API over a run's model (--checkpoint), or over several translation models named by
language pair (--model de:en=runs/ding --model en:de=runs/opus-en-de), each with its own batching
worker. Named pairs also get the LibreTranslate API (POST /translate with q, GET /languages, POST
/detect), which Mastodon, Weblate, SearXNG and libretranslatepy speak; --api-keys and
--rate-limit guard it. A translation model: POST /translate with {"text": ...} or
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
from pathlib import Path

from vaswani.cli.common import (
    SEARCH_FIELDS,
    CliError,
    add_model_flags,
    add_quantize_flag,
    add_shortlist_flag,
    load_for_inference,
    port_number,
    positive_int,
)
from vaswani.cli.fields import add_field_flags, settings_from
from vaswani.config import TASKS, DecodeConfig, ServeSettings
from vaswani.quantize import weight_bytes

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
    add_model_flags(parser, required=False)
    parser.add_argument(
        "--model",
        action="append",
        type=language_pair,
        default=[],
        metavar="SRC:TGT=RUN_DIR",
        help="a translation model by language pair (ISO 639-1 codes); repeat for more",
    )
    parser.add_argument(
        "--api-keys", type=Path, metavar="FILE", help="LibreTranslate API keys, one a line"
    )
    parser.add_argument(
        "--rate-limit",
        type=positive_int,
        metavar="N",
        help="LibreTranslate requests a minute per key (or per client without keys); more get 429",
    )
    add_quantize_flag(parser)
    add_shortlist_flag(parser)
    add_field_flags(parser, ServeSettings, ["beam_size"])
    add_field_flags(parser, DecodeConfig, DECODING)


def serve_settings(args: argparse.Namespace) -> ServeSettings:
    """The server's limits and the search settings of a request that gives none."""
    decoding = settings_from(DecodeConfig, args, DECODING)
    return settings_from(ServeSettings, args, (*LIMITS, "beam_size"), FLAGS, decoding=decoding)


def language_pair(text: str) -> tuple[str, str, Path]:
    pair, sep, run_dir = text.partition("=")
    source, colon, target = pair.partition(":")
    codes = (source, target)
    if not (sep and colon and run_dir and all(c.isalpha() and c.islower() for c in codes)):
        raise argparse.ArgumentTypeError(
            f"expected SRC:TGT=RUN_DIR such as de:en=runs/ding, got {text!r}"
        )
    return source, target, Path(run_dir)


def run(args: argparse.Namespace) -> int:
    from vaswani.serve import Access, Served, create_app, listen, serve  # the web stack only here

    if (args.checkpoint is None) == (not args.model):
        raise CliError("give --checkpoint RUN_DIR, or one or more --model SRC:TGT=RUN_DIR")
    pairs = [(s, t) for s, t, _ in args.model]
    if len(set(pairs)) < len(pairs):
        raise CliError("a language pair is given twice with --model")
    settings = serve_settings(args)
    access = Access.from_file(args.api_keys, args.rate_limit)
    served, asked = [], args.precision
    for source, target, run_dir in args.model or [(None, None, args.checkpoint)]:
        args.precision = asked  # each model's placement is chosen as asked (auto: for its device)
        tasks = TASKS if source is None else ("translate",)
        loaded, placement = load_for_inference(args, *tasks, run_dir=run_dir)
        served.append(Served(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer, source,
                             target, loaded.shortlist))  # fmt: skip
        size = weight_bytes(loaded.model) / 2**20
        print(f"loaded {run_dir}{'' if source is None else f' as {source}:{target}'}: "
              f"{size:.1f} MiB of weights", file=sys.stderr)  # fmt: skip
    print(f"memory: {resident_mib():.0f} MiB resident", file=sys.stderr)
    settings = dataclasses.replace(settings, precision=placement.precision)
    sock = listen(args.host, args.port)  # a taken port is an error before "serving on"
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {args.host}: reachable from other machines", file=sys.stderr)
    what = args.checkpoint or ", ".join(f"{s}:{t}" for s, t in pairs)
    print(f"serving {what} on http://{args.host}:{args.port} (docs at /docs)")
    serve(create_app(settings=settings, served=served, access=access), args.host, args.port,
          sock=sock)  # fmt: skip
    print("server stopped")
    return 0


def resident_mib() -> float:
    """This process's resident memory (Linux; 0 where /proc is absent)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
