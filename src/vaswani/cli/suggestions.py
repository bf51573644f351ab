"""What users suggested through `serve --suggestions FILE|URI` (LibreTranslate's POST /suggest): how
many for each language pair, and with --tmx written out as a TMX, which `vaswani prepare` reads to
fine-tune on and `--memory` serves from."""

from __future__ import annotations

import argparse
from pathlib import Path

from vaswani.cli.common import CliError

HELP = "count the suggestions users sent to a server, or write them out as TMX"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "db", metavar="FILE|URI", help="what serve --suggestions was given: a file or redis://..."
    )
    parser.add_argument("--tmx", type=Path, metavar="OUT", help="write them to this TMX file")
    parser.add_argument(
        "--pair", metavar="SRC:TGT", help="only this language pair's (de:en); default: all"
    )


def run(args: argparse.Namespace) -> int:
    from vaswani.serve.shared import is_redis
    from vaswani.serve.suggestions import Suggestions, SuggestionsError, write_tmx

    if not is_redis(args.db) and not Path(args.db).is_file():
        raise CliError(f"{args.db}: no such file (serve --suggestions FILE makes it)")
    pair = None
    if args.pair is not None:
        source, colon, target = args.pair.partition(":")
        if not (colon and source and target):
            raise CliError(f"--pair {args.pair}: give SRC:TGT, such as de:en")
        pair = (source, target)
    try:
        store = Suggestions.open(args.db)
        for (source, target), count in sorted(store.pairs().items()):
            print(f"{source}:{target}  {count:,} suggestions")
        if args.tmx is not None:
            written = write_tmx(store.rows(pair), args.tmx, pair)
            print(f"wrote {written:,} translation units to {args.tmx}")
    except SuggestionsError as error:
        raise CliError(str(error)) from None
    return 0
