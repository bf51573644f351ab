"""What the replicas of one service must agree on, kept where all of them see it
(`serve --shared-storage URI`, as LibreTranslate's `--shared-storage`):

- the rate limit's windows: a token bucket per key or client, refilled continuously;
- the usage of the keys of `--keys-db` (requests a minute, characters a day), where Redis holds
  it; in memory:// it stays in the keys database, which the processes given one file share;
- the translated files waiting for `/download_file`, with their expiry.

`memory://` (the default) keeps them in this process, as one process needs. `redis://host:port/db`
keeps them in Redis, so that two or more `vaswani serve` processes behind a load balancer act as
one: a file uploaded through one downloads through another, and N replicas allow the limit once,
not N times. Each change in Redis is one atomic command or script, timed by Redis' own clock, and
every entry expires (buckets after two minutes idle, usage after its window, files after
--file-ttl), so Redis' memory stays bounded by the traffic of the last day.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import urllib.parse
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vaswani.errors import VaswaniError

PREFIX = "vaswani:"
IDLE_BUCKET_S = 120


class SharedStorageError(VaswaniError):
    """A --shared-storage URI that cannot be used; the message says what to give."""


@dataclass(frozen=True)
class Window:
    """A count kept for a while: `amount` is added unless it would pass `limit` (None: no
    limit); the count is forgotten `ttl_s` seconds after its last change."""

    name: str
    amount: int
    limit: int | None
    ttl_s: int


class MemoryStorage:
    """This process's own state: buckets in a dictionary, files in a temporary directory."""

    uri = "memory://"
    counts_usage = False  # the keys database counts its keys' usage

    def __init__(self) -> None:
        self.buckets: dict[str, tuple[float, float]] = {}
        self.directory = Path(tempfile.mkdtemp(prefix="vaswani-files-"))
        weakref.finalize(self, shutil.rmtree, self.directory, True)
        self.files: dict[str, tuple[Path, str, float]] = {}  # name -> path, filename, expiry
        self.lock = threading.Lock()

    def take(self, who: str, per_minute: int) -> bool:
        """Take one token of `who`'s bucket (`per_minute` tokens, refilled continuously);
        False when it is empty."""
        now = time.monotonic()
        with self.lock:
            tokens, then = self.buckets.get(who, (float(per_minute), now))
            tokens = min(per_minute, tokens + (now - then) * per_minute / 60.0)
            taken = tokens >= 1.0
            self.buckets[who] = (tokens - 1.0 if taken else tokens, now)
            if len(self.buckets) > 100_000:  # forget the full, idle buckets of past clients
                idle = now - IDLE_BUCKET_S
                self.buckets = {k: v for k, v in self.buckets.items() if v[1] > idle}
        return taken

    def put_file(self, name: str, filename: str, data: bytes, ttl_s: float) -> None:
        path = self.directory / uuid.uuid4().hex
        path.write_bytes(data)
        with self.lock:
            self.files[name] = (path, filename, time.monotonic() + ttl_s)
        self.expire()

    def get_file(self, name: str) -> tuple[str, bytes] | None:
        """The file's name and bytes, or None when there is none (or it expired)."""
        self.expire()
        with self.lock:
            entry = self.files.get(name)
        return None if entry is None else (entry[1], entry[0].read_bytes())

    def expire(self) -> None:
        now = time.monotonic()
        with self.lock:
            old = [name for name, (_, _, until) in self.files.items() if until < now]
            for name in old:
                self.files.pop(name)[0].unlink(missing_ok=True)

    def close(self) -> None:
        pass


# A token bucket in one hash (tokens, time of the last change), by Redis' clock.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local rate = tonumber(ARGV[1])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or rate
local at = tonumber(state[2]) or now
tokens = math.min(rate, tokens + math.max(0, now - at) * rate / 60)
local taken = 0
if tokens >= 1 then
    tokens = tokens - 1
    taken = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return taken
"""

# Windows checked first and counted only if none would pass its limit: KEYS the windows, ARGV
# amount, limit (-1: none) and ttl for each. The 1-based index of the first over, or 0.
_COUNT = """
for i, key in ipairs(KEYS) do
    local limit = tonumber(ARGV[3 * i - 1])
    local used = tonumber(redis.call('GET', key) or '0')
    if limit >= 0 and used + tonumber(ARGV[3 * i - 2]) > limit then
        return i
    end
end
for i, key in ipairs(KEYS) do
    redis.call('INCRBY', key, ARGV[3 * i - 2])
    redis.call('EXPIRE', key, ARGV[3 * i])
end
return 0
"""


class RedisStorage:
    """The state in a Redis database, shared by every server given the same URI."""

    counts_usage = True

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.client = redis_client(uri)
        self._take = self.client.register_script(_TAKE)
        self._count = self.client.register_script(_COUNT)

    def take(self, who: str, per_minute: int) -> bool:
        return bool(self._take(keys=[f"{PREFIX}bucket:{who}"], args=[per_minute, IDLE_BUCKET_S]))

    def count(self, windows: list[Window]) -> Window | None:
        """Add every window's amount, or none of them: the first window its amount would take
        over its limit (nothing counted), or None."""
        args: list[Any] = []
        for window in windows:
            args += [window.amount, -1 if window.limit is None else window.limit, window.ttl_s]
        over = self._count(keys=[f"{PREFIX}usage:{w.name}" for w in windows], args=args)
        return windows[over - 1] if over else None

    def put_file(self, name: str, filename: str, data: bytes, ttl_s: float) -> None:
        key = f"{PREFIX}file:{name}"
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={"filename": filename, "data": data})
            pipe.pexpire(key, max(1, round(ttl_s * 1000)))
            pipe.execute()

    def get_file(self, name: str) -> tuple[str, bytes] | None:
        filename, data = self.client.hmget(f"{PREFIX}file:{name}", ["filename", "data"])
        return None if data is None else (filename.decode("utf-8"), data)

    def close(self) -> None:
        self.client.close()


def is_redis(where: str) -> bool:
    """Whether `where` names a Redis database (else a file, or memory://)."""
    return where.startswith(("redis://", "rediss://", "unix://"))


def redis_client(uri: str, flag: str = "--shared-storage") -> Any:
    """A client of the Redis database at `uri`, which answered a PING; `flag` names where the
    URI was given, in the error."""
    import redis

    try:
        client = redis.Redis.from_url(uri, socket_timeout=10, socket_connect_timeout=5)
        client.ping()
    except (redis.RedisError, ValueError) as error:
        raise SharedStorageError(f"{flag} {shown_uri(uri)}: {error}") from None
    return client


def shown_uri(uri: str) -> str:
    """`uri` without its password, to print."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urllib.parse.urlunsplit(parts._replace(netloc=user + host))


def open_storage(uri: str | None) -> MemoryStorage | RedisStorage:
    """The storage a --shared-storage URI names (None: memory://)."""
    if uri is None or uri == "memory://":
        return MemoryStorage()
    if is_redis(uri):
        return RedisStorage(uri)
    raise SharedStorageError(
        f"--shared-storage {uri}: give memory:// (this process) or redis://host:port/db"
    )
