"""`serve --shared-storage`: the rate limit's buckets, keys' usage, translated files and
suggestions in memory:// or in a real Redis, where servers that share it act as one."""

import time
import urllib.parse

import pytest
import redis
from test_file_api import download, upload

from helpers import Server, cli
from vaswani.serve import Served, ServeSettings, create_app
from vaswani.serve.keys import KeyStore
from vaswani.serve.libre import Access
from vaswani.serve.refusals import Refused
from vaswani.serve.shared import (
    MemoryStorage,
    RedisStorage,
    SharedStorageError,
    Window,
    open_storage,
    shown_uri,
)
from vaswani.serve.suggestions import Suggestions
from vaswani.translation.engine import load_run


@pytest.fixture(params=["memory", "redis"])
def storage(request):
    if request.param == "memory":
        return MemoryStorage()
    return open_storage(request.getfixturevalue("redis_uri"))


def test_a_bucket_gives_its_limit_then_refuses_and_refills(storage):
    assert [storage.take("client:a", 3) for _ in range(4)] == [True, True, True, False]
    assert storage.take("client:b", 3)  # each client its own bucket
    time.sleep(0.5)  # 3 a minute: a token takes 20 s, so none is back yet
    assert not storage.take("client:a", 3)
    assert [storage.take("client:c", 600) for _ in range(600)].count(True) >= 600
    time.sleep(0.25)  # 600 a minute: 10 a second
    assert storage.take("client:c", 600)


def test_files_are_kept_until_they_expire(storage):
    storage.put_file("n1.txt", "a é.txt", b"\x00bytes\xff", ttl_s=0.4)
    assert storage.get_file("n1.txt") == ("a é.txt", b"\x00bytes\xff")
    assert storage.get_file("other") is None
    time.sleep(0.6)
    assert storage.get_file("n1.txt") is None


def test_redis_counts_windows_all_or_none_and_forgets_them(redis_uri):
    storage = open_storage(redis_uri)
    minute, day = Window("k:m1", 1, 2, 120), Window("k:d1", 40, 100, 172800)
    assert storage.count([minute, day]) is None
    assert storage.count([minute, day]) is None
    assert storage.count([minute, day]) == minute  # the third request in the minute
    assert storage.count([Window("k:m2", 1, 2, 120), day]) == day  # 80 + 40 > 100
    client = redis.Redis.from_url(redis_uri)
    assert client.get("vaswani:usage:k:d1") == b"80"  # nothing counted when refused
    assert 0 < client.ttl("vaswani:usage:k:m1") <= 120
    assert storage.count([Window("k:m3", 1, None, 1)]) is None  # no limit
    storage.take("client:x", 5)
    assert 0 < client.ttl("vaswani:bucket:client:x") <= 120  # idle buckets go too


def test_a_storage_that_cannot_be_used_is_one_clear_error(redis_server):
    with pytest.raises(SharedStorageError, match="give memory:// .* or redis://"):
        open_storage("postgres://db/x")
    port = int(redis_server.rsplit(":", 1)[1].split("/")[0])
    closed = f"redis://:secret@127.0.0.1:{port + 1 if port < 65535 else port - 1}/0"
    with pytest.raises(SharedStorageError) as error:
        open_storage(closed)
    assert "secret" not in str(error.value) and ":***@127.0.0.1" in str(error.value)
    assert shown_uri("redis://ann:pw@host:6379/2") == "redis://ann:***@host:6379/2"
    assert isinstance(open_storage(None), MemoryStorage)


def test_replicas_sharing_redis_allow_a_keys_limits_once(redis_uri, tmp_path):
    """Two servers' access checks, each with its own client of one Redis: a database key's
    limits (2 requests a minute, 30 characters a day) and, without keys, the per-client rate
    limit hold across both."""
    store = KeyStore(tmp_path / "keys.db", create=True)
    key = store.add(2, char_limit=30).key
    one, two = (Access(None, 2, store, RedisStorage(redis_uri)) for _ in range(2))
    one.check(key, "1.2.3.4", 10)
    two.check(key, "1.2.3.4", 10)
    for replica in (one, two):
        with pytest.raises(Refused, match="2 a minute") as refused:
            replica.check(key, "1.2.3.4", 1)
        assert refused.value.status == 429
    client = redis.Redis.from_url(redis_uri)
    client.delete(*client.keys("vaswani:usage:*:m*"))  # the next minute
    with pytest.raises(Refused, match="30 a day"):
        two.check(key, "1.2.3.4", 11)
    assert store.spend(key, 0)[1] is None  # the database's own counts were not used
    one, two = (Access(None, 2, None, RedisStorage(redis_uri)) for _ in range(2))
    one.check(None, "5.6.7.8")  # no keys: the per-client limit, 2 a minute across both
    two.check(None, "5.6.7.8")
    with pytest.raises(Refused, match="limit is 2 a minute"):
        one.check(None, "5.6.7.8")
    two.check(None, "9.9.9.9")


def test_a_file_uploaded_to_one_server_downloads_from_another(numbers_run, redis_uri):
    loaded = load_run(numbers_run)
    servers = [
        Server(
            create_app(
                settings=ServeSettings(precision="fp32"),
                served=[Served(loaded, "en", "de")],
                access=Access(storage=RedisStorage(redis_uri)),
            )
        )
        for _ in range(2)
    ]
    try:
        status, answer = upload(servers[0], "numbers.txt", b"12\n42\n")
        assert status == 200, answer
        path = urllib.parse.urlsplit(answer["translatedFileUrl"]).path
        found = [download(server, path) for server in servers]  # from the other server too
        assert found[1] == found[0] and found[0][0] == 200
        assert len(found[0][1].decode().splitlines()) == 2
        status, _ = download(servers[1], "/download_file/" + "0" * 32 + ".numbers.txt")
        assert status == 404
    finally:
        for server in servers:
            server.stop()


def test_suggestions_in_redis_are_written_out_as_tmx(redis_uri, tmp_path, capsys):
    store = Suggestions.open(redis_uri)
    store.add("en", "de", "twelve", "zwölf")
    Suggestions.open(redis_uri).add("en", "fr", "twelve", "douze")  # another replica
    assert store.pairs() == {("en", "de"): 1, ("en", "fr"): 1}
    out = tmp_path / "s.tmx"
    code, said, _ = cli(capsys, "suggestions", redis_uri, "--tmx", str(out), "--pair", "en:de")
    assert code == 0 and "en:fr  1 suggestions" in said
    assert "zwölf" in out.read_text() and "douze" not in out.read_text()
