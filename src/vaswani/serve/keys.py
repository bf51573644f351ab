"""API keys with limits of their own, in a database (`vaswani keys`, `serve --keys-db FILE`), as
LibreTranslate's `ltmanage keys` keeps them: each key with its requests a minute and, optionally,
its characters a day.

The database is SQLite (Python's own `sqlite3`), one file, or PostgreSQL where it is named by a
postgresql:// URI (psycopg; for replicas on several machines). The usage counts live in it too, so
every server process given the same file (replicas on one machine) counts each key once; replicas
sharing Redis (`serve --shared-storage redis://`) count it there instead. Writes are
short transactions; SQLite's lock orders them, and a busy database is waited on for up to 10 s.
Requests are counted in one-minute windows and characters in UTC days, the windows' rows
deleted when they are over.
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from vaswani.errors import VaswaniError
from vaswani.safe_io import sqlite_transaction
from vaswani.serve.shared import Window, shown_uri

# The same SQL for both databases ("window" quoted: PostgreSQL reserves the word).
SCHEMA = (
    """CREATE TABLE IF NOT EXISTS api_keys (
    key TEXT PRIMARY KEY,
    name TEXT,
    req_limit BIGINT NOT NULL,
    char_limit BIGINT,
    created DOUBLE PRECISION NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS key_usage (
    key TEXT NOT NULL,
    "window" TEXT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (key, "window")
)""",
)
POSTGRES = ("postgres://", "postgresql://")


class KeyStoreError(VaswaniError):
    """A keys database that cannot be opened or used; the message names it."""


@dataclass(frozen=True)
class ApiKey:
    key: str
    name: str | None
    req_limit: int
    """Requests a minute."""
    char_limit: int | None
    """Characters a day (UTC); None: no limit."""


class KeyStore:
    """The keys database `where`: a SQLite file (created when `create`, else it must exist) or
    a postgresql:// URI (its tables created where missing)."""

    def __init__(self, where: str | Path, create: bool = False) -> None:
        self.where = str(where)
        self.postgres = self.where.startswith(POSTGRES)
        if not self.postgres and not create and not Path(where).is_file():
            raise KeyStoreError(
                f"{where}: no keys database; make one with `vaswani keys --db {where} add N`"
            )
        try:
            with self.connect() as db:
                for statement in SCHEMA:
                    db.execute(statement)
        except sqlite3.DatabaseError as error:  # (PostgreSQL's come as KeyStoreError)
            raise KeyStoreError(f"{where}: not a keys database ({error})") from None

    def connect(self) -> contextlib.AbstractContextManager[Any]:
        """One transaction; SQLite's takes the write lock first (usage is read, then written),
        PostgreSQL's locks the key's row when it is looked up."""
        if self.postgres:
            return postgres_transaction(self.where)
        return sqlite_transaction(Path(self.where), immediate=True)

    def add(self, req_limit: int, char_limit: int | None = None, name: str | None = None) -> ApiKey:
        """A new key (random, 128 bits), stored with its limits."""
        if req_limit < 1 or (char_limit is not None and char_limit < 1):
            raise KeyStoreError("limits are counts of 1 or more")
        found = ApiKey(secrets.token_hex(16), name, req_limit, char_limit)
        with self.connect() as db:
            db.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?)",
                (found.key, name, req_limit, char_limit, time.time()),
            )
        return found

    def listed(self) -> list[ApiKey]:
        with self.connect() as db:
            rows = db.execute(
                "SELECT key, name, req_limit, char_limit FROM api_keys ORDER BY created"
            ).fetchall()
        return [ApiKey(*row) for row in rows]

    def remove(self, key: str) -> bool:
        """Whether there was such a key (its usage goes with it)."""
        with self.connect() as db:
            gone = db.execute("DELETE FROM api_keys WHERE key = ?", (key,)).rowcount
            db.execute("DELETE FROM key_usage WHERE key = ?", (key,))
        return gone > 0

    def spend(
        self,
        asked: str,
        chars: int,
        now: float | None = None,
        counter: Counter | None = None,
        requests: int = 1,
    ) -> tuple[ApiKey | None, str | None]:
        """Count `requests` request(s) of `chars` characters against the key `asked`: the key
        (None: no such key, nothing counted) and why the request is refused (over its requests a
        minute or characters a day, nothing counted), or None. Counted in this database, in one
        transaction with the lookup, or in `counter` (the shared storage of replicas)."""
        now = time.time() if now is None else now
        with self.connect() as db:
            key = looked_up(db, asked)
            if key is None:
                return None, None
            windows = usage_windows(key, requests, chars, now)
            over = counted_here(db, key.key, windows) if counter is None else None
        if counter is not None:
            over = counter.count(windows)
        if over is None:
            return key, None
        if over is windows[0]:
            return key, f"Too many requests: the limit of this key is {key.req_limit} a minute"
        return key, f"Too many characters: the limit of this key is {key.char_limit:,} a day"


class Counter(Protocol):
    def count(self, windows: list[Window]) -> Window | None: ...


def usage_windows(key: ApiKey, requests: int, chars: int, now: float) -> list[Window]:
    """The requests counted in the key's minute and their characters in its UTC day."""
    minute = f"{key.key}:m{int(now // 60)}"
    day = f"{key.key}:d" + time.strftime("%Y-%m-%d", time.gmtime(now))
    return [
        Window(minute, requests, key.req_limit, 120),
        Window(day, chars, key.char_limit, 2 * 86400),
    ]


def counted_here(db: Any, key: str, windows: list[Window]) -> Window | None:
    """`windows` counted in the key_usage table (the key's older windows deleted): the first
    window over its limit (nothing counted), or None."""
    names = [w.name for w in windows]
    marks = ", ".join("?" * len(names))
    db.execute(f'DELETE FROM key_usage WHERE key = ? AND "window" NOT IN ({marks})', (key, *names))
    used = dict(
        db.execute(
            f'SELECT "window", count FROM key_usage WHERE key = ? AND "window" IN ({marks})',
            (key, *names),
        ).fetchall()
    )
    for window in windows:
        if window.limit is not None and used.get(window.name, 0) + window.amount > window.limit:
            return window
    for window in windows:
        db.execute(
            'INSERT INTO key_usage VALUES (?, ?, ?) ON CONFLICT (key, "window") '
            "DO UPDATE SET count = key_usage.count + excluded.count",
            (key, window.name, window.amount),
        )
    return None


def looked_up(db: Any, key: str) -> ApiKey | None:
    """The key, locked until the transaction ends where the database locks rows."""
    locked = " FOR UPDATE" if isinstance(db, Postgres) else ""
    row = db.execute(
        "SELECT key, name, req_limit, char_limit FROM api_keys WHERE key = ?" + locked, (key,)
    ).fetchone()
    return ApiKey(*row) if row else None


class Postgres:
    """A PostgreSQL connection that takes SQLite's `?` placeholders; its errors are
    KeyStoreErrors naming the database."""

    def __init__(self, connection: Any, uri: str) -> None:
        self.connection, self.uri = connection, uri

    def execute(self, sql: str, parameters: tuple = ()) -> Any:
        import psycopg

        try:
            return self.connection.execute(sql.replace("?", "%s"), parameters)
        except psycopg.Error as error:
            raise KeyStoreError(f"{shown_uri(self.uri)}: {str(error).strip()}") from None


@contextlib.contextmanager
def postgres_transaction(uri: str) -> Iterator[Postgres]:
    """One transaction on the PostgreSQL database at `uri`, committed or rolled back."""
    try:
        import psycopg
    except ImportError:
        raise KeyStoreError(
            f"{shown_uri(uri)}: PostgreSQL needs psycopg (pip install 'vaswani[postgres]')"
        ) from None
    try:
        connection = psycopg.connect(uri, connect_timeout=10)
    except psycopg.Error as error:
        raise KeyStoreError(f"{shown_uri(uri)}: {str(error).strip()}") from None
    with connection:  # commits, or rolls back on an exception; then closes
        yield Postgres(connection, uri)
