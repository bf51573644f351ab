"""Users' better translations, as LibreTranslate takes them: `POST /suggest` with q (the text), s
(the suggested translation), source and target, stored in a SQLite file (`serve --suggestions
FILE`) that every server process given it shares, or in Redis (`--suggestions redis://host/db`,
for replicas on several machines), and written out as a TMX (`vaswani suggestions FILE|URI --tmx
OUT`) that `vaswani prepare` and `--memory` read."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections import Counter
from pathlib import Path

from vaswani.errors import VaswaniError
from vaswani.safe_io import sqlite_transaction

SCHEMA = """
CREATE TABLE IF NOT EXISTS suggestions (
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    text TEXT NOT NULL,
    suggestion TEXT NOT NULL,
    made REAL NOT NULL
);
"""


class SuggestionsError(VaswaniError):
    """A suggestions file that cannot be opened or written out."""


class Suggestions:
    """The suggestions database at `path` (created where it is missing)."""

    @staticmethod
    def open(where: str | Path) -> Suggestions | RedisSuggestions:
        """A SQLite file, or a Redis database by its URI."""
        from vaswani.serve.shared import is_redis

        if is_redis(str(where)):
            return RedisSuggestions(str(where))
        return Suggestions(Path(where))

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            with self.connect() as db:
                db.executescript(SCHEMA)
        except sqlite3.DatabaseError as error:
            raise SuggestionsError(f"{path}: not a suggestions database ({error})") from None

    def connect(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return sqlite_transaction(self.path)

    def add(self, source: str, target: str, text: str, suggestion: str) -> None:
        with self.connect() as db:
            db.execute(
                "INSERT INTO suggestions VALUES (?, ?, ?, ?, ?)",
                (source, target, text, suggestion, time.time()),
            )

    def pairs(self) -> dict[tuple[str, str], int]:
        """How many suggestions each language pair has."""
        with self.connect() as db:
            rows = db.execute(
                "SELECT source, target, COUNT(*) FROM suggestions GROUP BY source, target"
            ).fetchall()
        return {(s, t): n for s, t, n in rows}

    def rows(self, pair: tuple[str, str] | None = None) -> list[tuple[str, str, str, str]]:
        """(source, target, text, suggestion) of every suggestion (of `pair`), oldest first."""
        query = "SELECT source, target, text, suggestion FROM suggestions"
        with self.connect() as db:
            return db.execute(
                query + (" WHERE source = ? AND target = ?" if pair else "") + " ORDER BY made",
                pair or (),
            ).fetchall()


class RedisSuggestions:
    """The suggestions in a Redis list, each one JSON, in the order they came."""

    KEY = "vaswani:suggestions"

    def __init__(self, uri: str) -> None:
        from vaswani.serve.shared import SharedStorageError, redis_client

        try:
            self.client = redis_client(uri, "--suggestions")
        except SharedStorageError as error:
            raise SuggestionsError(str(error)) from None

    def add(self, source: str, target: str, text: str, suggestion: str) -> None:
        self.client.rpush(self.KEY, json.dumps([source, target, text, suggestion]))

    def rows(self, pair: tuple[str, str] | None = None) -> list[tuple[str, str, str, str]]:
        found = [tuple(json.loads(value)) for value in self.client.lrange(self.KEY, 0, -1)]
        return [row for row in found if pair is None or row[:2] == pair]

    def pairs(self) -> dict[tuple[str, str], int]:
        return dict(Counter(row[:2] for row in self.rows()))


def write_tmx(
    rows: list[tuple[str, str, str, str]], out: Path, pair: tuple[str, str] | None = None
) -> int:
    """Suggestions' rows (of `pair`) as TMX 1.4 translation units, the latest of a text last;
    how many were written."""
    from lxml import etree

    lang = "{http://www.w3.org/XML/1998/namespace}lang"
    root = etree.Element("tmx", version="1.4")
    etree.SubElement(
        root,
        "header",
        creationtool="vaswani",
        creationtoolversion="1",
        segtype="sentence",
        datatype="plaintext",
        adminlang="en",
        srclang=pair[0] if pair else "*all*",
        **{"o-tmf": "vaswani"},
    )
    body = etree.SubElement(root, "body")
    for source, target, text, suggestion in rows:
        unit = etree.SubElement(body, "tu")
        for code, words in ((source, text), (target, suggestion)):
            variant = etree.SubElement(unit, "tuv", {lang: code})
            etree.SubElement(variant, "seg").text = words
    tree = etree.ElementTree(root)
    tree.write(str(out), xml_declaration=True, encoding="UTF-8", pretty_print=True)
    return len(rows)
