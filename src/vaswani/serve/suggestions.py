"""Users' better translations, as LibreTranslate takes them: `POST /suggest` with q (the text), s
(the suggested translation), source and target, stored in a SQLite file (`serve --suggestions
FILE`) that every server process given it shares, and written out as a TMX
(`vaswani suggestions FILE --tmx OUT`) that `vaswani prepare` and `--memory` read."""

from __future__ import annotations

import contextlib
import sqlite3
import time
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

    def write_tmx(self, out: Path, pair: tuple[str, str] | None = None) -> int:
        """Every suggestion (of `pair`, or all) as a TMX 1.4 translation unit, the latest of a
        text last; how many were written."""
        from lxml import etree

        query = "SELECT source, target, text, suggestion FROM suggestions"
        with self.connect() as db:
            rows = db.execute(
                query + (" WHERE source = ? AND target = ?" if pair else "") + " ORDER BY made",
                pair or (),
            ).fetchall()
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
