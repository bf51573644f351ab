"""API keys with limits of their own in a database: `vaswani keys` and `serve --keys-db`."""

import subprocess
import sys
import time

import pytest
from test_file_api import upload

from helpers import Server
from vaswani.cli import main
from vaswani.serve import Served, ServeSettings, create_app, keys
from vaswani.serve.keys import KeyStore, KeyStoreError
from vaswani.serve.libre import Access
from vaswani.serve.refusals import Refused
from vaswani.translation.engine import load_run


def test_the_command_adds_lists_and_removes_keys(tmp_path, capsys):
    db = tmp_path / "keys.db"
    assert (
        main(["keys", "--db", str(db), "add", "60", "--char-limit", "5000", "--name", "ann"]) == 0
    )
    key = capsys.readouterr().out.strip()
    assert len(key) == 32 and int(key, 16) >= 0
    assert main(["keys", "--db", str(db), "list"]) == 0
    listed = capsys.readouterr().out
    assert key in listed and "60 requests a minute, 5,000 characters a day" in listed
    assert "ann" in listed
    assert main(["keys", "--db", str(db), "remove", key]) == 0
    assert main(["keys", "--db", str(db), "remove", key]) == 2
    assert f"no key {key}" in capsys.readouterr().err
    assert main(["keys", "--db", str(tmp_path / "none.db"), "list"]) == 2
    assert "no keys database" in capsys.readouterr().err


def test_a_keys_limits_per_minute_and_per_day(tmp_path):
    store = KeyStore(tmp_path / "keys.db", create=True)
    key = store.add(2, char_limit=30)
    start = 1_800_000_000.0  # a minute's start
    assert store.spend(key.key, 10, start) == (key, None)
    assert store.spend(key.key, 10, start + 1) == (key, None)
    assert "2 a minute" in store.spend(key.key, 1, start + 2)[1]
    assert store.spend(key.key, 5, start + 61) == (key, None)  # a new minute
    assert "30 a day" in store.spend(key.key, 6, start + 62)[1]  # 25 + 6 characters today
    assert store.spend(key.key, 30, start + 86_400) == (key, None)  # a new day
    assert store.spend("made-up", 1, start) == (None, None)  # no such key: nothing counted
    with pytest.raises(KeyStoreError, match="not a keys database"):
        (tmp_path / "text.db").write_text("not sqlite at all, long enough to be read" * 10)
        KeyStore(tmp_path / "text.db")


def test_servers_sharing_the_database_count_each_key_once(tmp_path, monkeypatch):
    """Two stores (as two server processes would open it) and a process of its own, all at one
    moment: on the real clock a minute that turned during the test (the process takes seconds
    to start) began a new count, and the last requests were let through."""
    now = time.time()
    monkeypatch.setattr(keys.time, "time", lambda: now)
    path = tmp_path / "keys.db"
    key = KeyStore(path, create=True).add(3).key
    first, second = Access(store=KeyStore(path)), Access(store=KeyStore(path))
    first.check(key, "a")
    second.check(key, "b")
    spend = (
        "import sys; from vaswani.serve.keys import KeyStore; s = KeyStore(sys.argv[1]); "
        "print(s.spend(sys.argv[2], 0, now=float(sys.argv[3]))[1])"
    )
    done = subprocess.run(
        [sys.executable, "-c", spend, str(path), key, repr(now)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "None"
    for access in (first, second):
        with pytest.raises(Refused) as refused:
            access.check(key, "c")
        assert refused.value.status == 429


def test_served_keys_get_libretranslates_answers(numbers_run, tmp_path):
    store = KeyStore(tmp_path / "keys.db", create=True)
    fast, wordy, filer = store.add(2), store.add(100, char_limit=12), store.add(100, char_limit=6)
    access = Access(None, per_minute=1, store=store)  # --rate-limit 1: a key's own replace it
    app = create_app(
        settings=ServeSettings(precision="fp32"),
        served=[Served(load_run(numbers_run), "en", "de")],
        access=access,
    )
    server = Server(app)
    try:
        asked = {"q": "four two", "source": "en", "target": "de"}
        assert server.request("POST", "/translate", {**asked, "api_key": fast.key})[0] == 200
        assert server.request("POST", "/translate", {**asked, "api_key": fast.key})[0] == 200
        status, body = server.request("POST", "/translate", {**asked, "api_key": fast.key})
        assert status == 429 and "a minute" in body["error"]
        assert server.request("POST", "/translate", {**asked, "api_key": wordy.key})[0] == 200
        status, body = server.request("POST", "/translate", {**asked, "api_key": wordy.key})
        assert status == 429 and "12 a day" in body["error"]  # 8 + 8 characters
        status, body = server.request("POST", "/translate", {**asked, "api_key": "made-up"})
        assert status == 403 and body["error"] == "Invalid API key"
        # no key: LibreTranslate's policy, the server's --rate-limit (1 a minute) per client
        assert server.request("POST", "/translate", asked)[0] == 200
        status, body = server.request("POST", "/translate", asked)
        assert status == 429 and "1 a minute" in body["error"]
        access.required = True  # --require-api-key
        status, body = server.request("POST", "/translate", asked)
        assert status == 403 and body["error"] == "An API key is required"
        # a file's characters count too: 3 of the 6 a day, then 4 more are refused
        assert upload(server, "a.txt", b"1\n2\n3", api_key=filer.key)[0] == 200
        status, body = upload(server, "b.txt", b"4\n5\n6\n7", api_key=filer.key)
        assert status == 429 and "6 a day" in body["error"]
    finally:
        server.stop()


def test_keys_in_postgresql_have_the_same_limits_and_commands(postgres_uri, capsys):
    """`--db postgresql://...`: the commands, the limits, and two stores (two servers) counting
    each key once, in a real PostgreSQL."""
    assert main(["keys", "--db", postgres_uri, "add", "2", "--char-limit", "30"]) == 0
    key = capsys.readouterr().out.strip()
    assert main(["keys", "--db", postgres_uri, "list"]) == 0
    assert f"{key}  2 requests a minute, 30 characters a day" in capsys.readouterr().out
    first, second = KeyStore(postgres_uri), KeyStore(postgres_uri)
    start = 1_800_000_000.0
    assert first.spend(key, 10, start)[1] is None
    assert second.spend(key, 10, start + 1)[1] is None
    assert "2 a minute" in first.spend(key, 1, start + 2)[1]
    assert second.spend(key, 10, start + 60)[1] is None  # the next minute: 30 characters used
    assert "30 a day" in first.spend(key, 1, start + 61)[1]
    assert first.spend("no-such-key", 1) == (None, None)
    assert main(["keys", "--db", postgres_uri, "remove", key]) == 0
    assert first.spend(key, 1) == (None, None)
    wrong = postgres_uri.replace("@", ":secret@").rsplit("/", 1)[0] + "/nowhere"
    assert main(["keys", "--db", wrong, "list"]) == 2
    said = capsys.readouterr().err
    assert "nowhere" in said and "secret" not in said and len(said.strip().splitlines()) == 1
