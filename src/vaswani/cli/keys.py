"""API keys with limits of their own, for `vaswani serve --keys-db FILE` (LibreTranslate's
`ltmanage keys`): `add REQ_LIMIT [--char-limit N] [--name NAME]` prints the new key, `list` shows
them with their limits, `remove KEY` takes one away. Each key may make REQ_LIMIT requests a minute
and, with --char-limit, translate N characters a day (UTC), counted in the database for every
server that is given it. The database is a SQLite file, or PostgreSQL by its URI (psycopg)."""

from __future__ import annotations

import argparse

from vaswani.cli.common import CliError, HelpFormatter, positive_int

HELP = "add, list or remove API keys with their own limits (serve --keys-db)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        required=True,
        metavar="FILE|URI",
        help="the keys database: a SQLite file, or PostgreSQL's postgresql://user@host/db",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="make a key and print it", formatter_class=HelpFormatter)
    add.add_argument("req_limit", type=positive_int, metavar="REQ_LIMIT", help="requests a minute")
    add.add_argument(
        "--char-limit", type=positive_int, metavar="N", help="characters a day (default: none)"
    )
    add.add_argument("--name", help="whose key it is, for `list`")
    actions.add_parser("list", help="every key with its limits", formatter_class=HelpFormatter)
    remove = actions.add_parser("remove", help="take a key away", formatter_class=HelpFormatter)
    remove.add_argument("key", metavar="KEY")


def run(args: argparse.Namespace) -> int:
    from vaswani.serve.keys import KeyStore, KeyStoreError

    try:
        store = KeyStore(args.db, create=args.action == "add")
        if args.action == "add":
            print(store.add(args.req_limit, args.char_limit, args.name).key)
        elif args.action == "list":
            for found in store.listed():
                chars = (
                    "no character limit"
                    if found.char_limit is None
                    else (f"{found.char_limit:,} characters a day")
                )
                print(
                    f"{found.key}  {found.req_limit} requests a minute, {chars}  {found.name or ''}"
                )
        elif not store.remove(args.key):
            raise CliError(f"{args.db}: no key {args.key}")
    except KeyStoreError as error:
        raise CliError(str(error)) from None
    return 0
