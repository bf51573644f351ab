"""An HTTP API over a run's model (--checkpoint), or over several translation models named by
language pair (--model de:en=runs/ding --model en:de=runs/opus-en-de), each with its own batching
worker. Named pairs also get the LibreTranslate API (POST /translate with q, GET /languages, POST
/detect), which Mastodon, Weblate, SearXNG and libretranslatepy speak; --api-keys and
--rate-limit guard it. A multilingual model serves every pair it was trained on (--model RUN_DIR or
--checkpoint RUN_DIR), or the pairs named (--model de:fr=RUN_DIR). A pair no model serves but two
served pairs chain (de->en, en->fr) is translated through the middle language, and the answer
says so ("pivot": "en"); --no-pivot refuses such requests instead. A translation model: POST
/translate with {"text": ...} or {"texts": [...]} and optional beam_size and max_length. A language model: POST /generate with
{"prompt": ...} or {"prompts": [...]} and optional max_new_tokens, temperature, top_k, top_p,
seed. A classifier: POST /classify with {"text": ...} or {"texts": [...]}. GET /health; the OpenAPI
schema at /openapi.json and /docs. Requests arriving together are batched into one model call.
Every limit below is answered with a clear 4xx (413 body, 422 request) or 503 (queue full) or 504
(timeout). Ctrl-C or SIGTERM finishes requests in flight."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vaswani.cli.common import (
    SEARCH_FIELDS,
    CliError,
    add_model_flags,
    add_quantize_flag,
    add_shortlist_flag,
    fuzzy_score,
    load_for_inference,
    port_number,
    positive_int,
)
from vaswani.cli.fields import add_field_flags, settings_from
from vaswani.config import DecodeConfig, ServeSettings
from vaswani.decoding.quantize import weight_bytes
from vaswani.languages import Language, LanguageError, code
from vaswani.run import RunError
from vaswani.tasks import TASKS_BY_NAME, TRANSLATE
from vaswani.translation.engine import Engine
from vaswani.translation.glossary import Glossary, read_glossary
from vaswani.translation.memory import Memory
from vaswani.translation.request import Aids

if TYPE_CHECKING:
    from vaswani.serve import Access, Served
    from vaswani.serve.suggestions import RedisSuggestions, Suggestions

HELP = "serve a trained model over HTTP (POST /translate, /generate or /classify, GET /health)"
LIMITS = (
    "max_body_bytes",
    "max_texts",
    "max_chars",
    "max_file_bytes",
    "max_file_chars",
    "file_ttl_s",
    "max_beam_size",
    "max_length",
    "timeout_s",
    "max_queued_texts",
    "batch_wait_ms",
    "batch_tokens",
    "dynamic_batching",
    "metrics",
)
FLAGS = {"timeout_s": "--timeout", "dynamic_batching": "--batching", "file_ttl_s": "--file-ttl"}
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
        help="a translation model by language pair (ISO 639-1 codes); a multilingual model as "
        "RUN_DIR alone serves all its pairs; repeat for more",
    )
    parser.add_argument(
        "--no-pivot",
        dest="pivot",
        action="store_false",
        help="refuse a pair no model serves instead of chaining two through a middle language",
    )
    parser.add_argument(
        "--api-keys",
        type=Path,
        metavar="FILE",
        help="LibreTranslate API keys, one a line: a request must give one of them",
    )
    parser.add_argument(
        "--keys-db",
        metavar="FILE|URI",
        help="API keys with limits of their own, made with `vaswani keys --db FILE|URI add` (a "
        "SQLite file or postgresql://...); a key's limits replace --rate-limit's, a wrong key "
        "gets 403, and a request without a key gets --rate-limit, as in LibreTranslate",
    )
    parser.add_argument(
        "--require-api-key",
        action="store_true",
        help="refuse (403) a LibreTranslate request that gives no API key",
    )
    parser.add_argument(
        "--suggestions",
        metavar="FILE|URI",
        help="take users' better translations (POST /suggest) into this SQLite file (made "
        "where missing) or Redis database (redis://host:port/db, for replicas on several "
        "machines); `vaswani suggestions FILE|URI --tmx OUT` writes them out",
    )
    parser.add_argument(
        "--shared-storage",
        metavar="URI",
        help="where the state replicas must share lives: memory:// (this process, the "
        "default) or redis://host:port/db (rate-limit windows, --keys-db usage, translated "
        "files; several `vaswani serve` behind one load balancer then act as one)",
    )
    parser.add_argument(
        "--rate-limit",
        type=positive_int,
        metavar="N",
        help="LibreTranslate requests a minute per key (or per client without keys); more get 429",
    )
    for flag, what in (
        ("--glossary", "a glossary (TSV, CSV, TBX; see `translate --help`)"),
        ("--memory", "a translation memory (TMX, TSV, XLIFF, PO)"),
    ):
        parser.add_argument(
            flag,
            action="append",
            type=for_pair,
            default=[],
            metavar="[SRC:TGT=]FILE",
            help=f"{what} for every model, or for the pair named; repeat for more",
        )
    parser.add_argument(
        "--fuzzy-threshold",
        type=fuzzy_score,
        metavar="SCORE",
        help="with --memory: answer each text's most similar memory entry scoring at least "
        "SCORE (0-100) beside the model's translation",
    )
    add_quantize_flag(parser)
    add_shortlist_flag(parser)
    add_field_flags(parser, ServeSettings, ["beam_size"])
    add_field_flags(parser, DecodeConfig, DECODING)


def serve_settings(args: argparse.Namespace) -> ServeSettings:
    """The server's limits and the search settings of a request that gives none."""
    decoding = settings_from(DecodeConfig, args, DECODING)
    return settings_from(ServeSettings, args, (*LIMITS, "beam_size"), FLAGS, decoding=decoding)


def language_pair(text: str) -> tuple[str | None, str | None, Path]:
    """SRC:TGT=RUN_DIR, or RUN_DIR alone (a multilingual model: every pair it knows)."""
    if "=" not in text and ":" not in text and text:
        return None, None, Path(text)
    pair, sep, run_dir = text.partition("=")
    source, colon, target = pair.partition(":")
    try:  # a language in any spelling, as the pairs spell it ("DE" de, "pt-BR" pt_br)
        source, target = (code(Language.parse(c).tag) for c in (source, target))
    except LanguageError:
        sep = ""
    if not (sep and colon and run_dir):
        raise argparse.ArgumentTypeError(
            f"expected SRC:TGT=RUN_DIR such as de:en=runs/ding (pt_BR:en for a region), got {text!r}"
        )
    return source, target, Path(run_dir)


def for_pair(text: str) -> tuple[str | None, str | None, Path]:
    """[SRC:TGT=]FILE: a file for one language pair, or for all."""
    pair, sep, path = text.partition("=")
    if sep and ":" in pair:
        return language_pair(text)
    return None, None, Path(text)


def aids_for(args: argparse.Namespace, loaded: Engine, source: Any, target: Any) -> Aids | None:
    """The glossaries and memories the flags give the pair `source`:`target` (or every model's),
    read once per file."""
    source, target = source or loaded.source_language, target or loaded.target_language

    def mine(specs: list) -> list[Path]:
        return [p for s, t, p in specs if s is None or (s, t) == (source, target)]

    glossaries, memories = mine(args.glossary), mine(args.memory)
    if not glossaries and not memories:
        return None
    glossary = None
    for path in glossaries:
        glossary = (glossary or Glossary()).merged(read_glossary(path, source, target))
    memory = Memory.read(memories, source, target) if memories else None
    if memory is not None:
        print(f"translation memory for {source}:{target}: {len(memory):,} entries", file=sys.stderr)
    return Aids(glossary, memory, args.fuzzy_threshold if memory else None)


def what_is_served(args: argparse.Namespace) -> str:
    return str(args.checkpoint or ", ".join(str(run_dir) for _, _, run_dir in args.model))


def check_aid_pairs(args: argparse.Namespace, pairs: set[tuple[str, str]]) -> None:
    """Refuse a glossary or memory for a pair no model serves, and --fuzzy-threshold without a
    memory, before the server listens."""
    for flag, specs in (("--glossary", args.glossary), ("--memory", args.memory)):
        for source, target, path in specs:
            if source is not None and (source, target) not in pairs:
                served = ", ".join(f"{s}:{t}" for s, t in sorted(pairs)) or "none named"
                raise CliError(
                    f"{flag} {source}:{target}={path}: no model serves {source}:{target} "
                    f"(served: {served})"
                )
    if args.fuzzy_threshold is not None and not args.memory:
        raise CliError("--fuzzy-threshold scores matches in a translation memory: give --memory")


def run(args: argparse.Namespace) -> int:
    from vaswani.serve import create_app, listen, serve  # the web stack only here

    if (args.checkpoint is None) == (not args.model):
        raise CliError("give --checkpoint RUN_DIR, or one or more --model SRC:TGT=RUN_DIR")
    settings = serve_settings(args)
    access = access_of(args)
    served: list[Served] = []
    loaded_runs: dict[Path, Engine] = {}  # a run named twice: loaded once
    asked = args.precision
    for source, target, run_dir in args.model or [(None, None, args.checkpoint)]:
        key = Path(run_dir).resolve()
        if key not in loaded_runs:
            args.precision = asked  # each model's placement as asked (auto: for its device)
            tasks = TASKS_BY_NAME.values() if args.checkpoint is not None else (TRANSLATE,)
            loaded_runs[key] = load_for_inference(args, *tasks, run_dir=run_dir)
            size = weight_bytes(loaded_runs[key].model) / 2**20
            print(f"loaded {run_dir}: {size:.1f} MiB of weights", file=sys.stderr)
        loaded = loaded_runs[key]
        pair_aids = functools.partial(aids_for, args, loaded)
        served += served_pairs(loaded, source, target, run_dir, bool(args.model), pair_aids)
    pairs = [(s.source, s.target) for s in served if s.source is not None]
    check_aid_pairs(args, set(pairs))
    if len(set(pairs)) < len(pairs):
        raise CliError(
            "a language pair is given twice (a multilingual model serves all its "
            "pairs); name each once with --model"
        )
    if not pairs:
        print(
            f"LibreTranslate API: off: {what_is_served(args)} names no languages (its data was "
            "prepared without --src-lang/--tgt-lang); serve it as --model SRC:TGT=RUN_DIR to "
            "offer /translate, /languages and files",
            file=sys.stderr,
        )
    else:
        names = [f"{s}:{t}" for s, t in pairs]
        shown = ", ".join(names[:12]) + (
            f" and {len(names) - 12:,} more" if len(names) > 12 else ""
        )
        print(f"pairs: {shown}{'' if args.pivot else ' (no pivoting)'}", file=sys.stderr)
    print(f"memory: {resident_mib():.0f} MiB resident", file=sys.stderr)
    sock = listen(args.host, args.port)  # a taken port is an error before "serving on"
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {args.host}: reachable from other machines", file=sys.stderr)
    print(f"serving {what_is_served(args)} on http://{args.host}:{args.port} (docs at /docs)")
    app = create_app(
        settings=settings,
        served=served,
        access=access,
        pivot=args.pivot,
        suggestions=suggestions_of(args),
    )
    serve(app, args.host, args.port, sock=sock)
    print("server stopped")
    return 0


def access_of(args: argparse.Namespace) -> Access:
    """The keys, limits and shared storage that guard the LibreTranslate endpoints."""
    from vaswani.serve import Access
    from vaswani.serve.keys import KeyStore, KeyStoreError
    from vaswani.serve.shared import SharedStorageError, open_storage, shown_uri

    access = Access.from_file(args.api_keys, args.rate_limit, args.require_api_key)
    try:
        if args.keys_db is not None:
            access.store = KeyStore(args.keys_db)
        if args.shared_storage is not None:
            access.storage = open_storage(args.shared_storage)
            print(f"shared storage: {shown_uri(args.shared_storage)}", file=sys.stderr)
    except (KeyStoreError, SharedStorageError) as error:
        raise CliError(str(error)) from None
    return access


def suggestions_of(args: argparse.Namespace) -> Suggestions | RedisSuggestions | None:
    """Where POST /suggest keeps what it is sent (--suggestions), or None."""
    if args.suggestions is None:
        return None
    from vaswani.serve.suggestions import Suggestions, SuggestionsError

    try:
        return Suggestions.open(args.suggestions)
    except SuggestionsError as error:
        raise CliError(str(error)) from None


def served_pairs(
    loaded: Engine,
    source: str | None,
    target: str | None,
    run_dir: Path,
    named: bool,
    aids: Callable[[str | None, str | None], Aids | None] = lambda s, t: None,
) -> list[Served]:
    """What one --model (or --checkpoint) serves: a multilingual model each of its pairs (or the
    one named, its target's token leading every text); any other model itself, by its name.
    `aids(source, target)`: the glossary and memory of a pair."""
    from vaswani.serve import Served

    languages = loaded.languages
    if languages is None:
        if named and source is None:
            raise CliError(
                f"--model {run_dir}: a model of one language pair is named by it: "
                f"--model SRC:TGT={run_dir}"
            )
        if source is None and loaded.source_language and loaded.target_language:
            source, target = loaded.source_language, loaded.target_language  # as its data says
        return [Served(loaded, source, target, aids(source, target))]
    asked = languages.pairs if source is None else [(source, target)]
    try:  # a language it does not know: said here
        loaded.prefixes([t for _, t in asked], len(asked), [s for s, _ in asked])
    except RunError as error:
        raise CliError(f"--model {source}:{target}={run_dir}: {error}") from None
    return [Served(loaded, s, t, aids(s, t)) for s, t in asked]


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
