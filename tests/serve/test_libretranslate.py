"""The LibreTranslate API of `vaswani serve` with two models served by language pair: published
clients (libretranslatepy, deep-translator) and Mastodon's request shape, over real HTTP on
loopback."""

import json
import urllib.parse

import pytest

from helpers import Server
from vaswani.config import DecodeConfig, ServeSettings
from vaswani.decoding.text import TextModel, translate
from vaswani.serve import Access, Served, create_app
from vaswani.translation.engine import load_run

FP32 = ServeSettings(precision="fp32")


@pytest.fixture(scope="module")
def runs(numbers_run):
    # The numbers model twice, as two pairs: each has its own worker and answers for its pair.
    return load_run(numbers_run), load_run(numbers_run)


def start(runs, access=None, settings=FP32) -> Server:
    first, second = runs
    served = [
        Served(first, "en", "de"),
        Served(second, "de", "en"),
    ]
    return Server(create_app(settings=settings, served=served, access=access))


@pytest.fixture(scope="module")
def server(runs):
    server = start(runs)
    yield server
    server.stop()


def expected(run, texts, **search):
    return translate(
        TextModel(run.model, run.src_tokenizer, run.tgt_tokenizer), texts, DecodeConfig(**search)
    )


def test_languages_lists_every_pair_and_health_every_model(server):
    status, languages = server.request("GET", "/languages")
    assert status == 200
    assert languages == [
        {"code": "de", "name": "German", "targets": ["en"]},
        {"code": "en", "name": "English", "targets": ["de"]},
    ]
    status, health = server.request("GET", "/health")
    assert status == 200 and set(health["models"]) == {"en:de", "de:en"}
    assert len(server.app.state.workers) == 2


def test_a_published_client_translates_detects_and_lists(server, runs):
    libretranslatepy = pytest.importorskip("libretranslatepy")
    client = libretranslatepy.LibreTranslateAPI(f"http://127.0.0.1:{server.port}/")
    assert client.translate("271493", "en", "de") == expected(runs[0], ["271493"])[0]
    assert [lang["code"] for lang in client.languages()] == ["de", "en"]
    found = client.detect("Das ist ein kleines Haus, und heute regnet es den ganzen Tag.")
    assert found[0]["language"] == "de" and found[0]["confidence"] > 50


def test_deep_translators_client_posts_its_fields_in_the_query_string(server, runs):
    deep_translator = pytest.importorskip("deep_translator")
    client = deep_translator.LibreTranslator(
        source="en", target="de", api_key="unused", custom_url=f"http://127.0.0.1:{server.port}/"
    )
    assert client.translate("271493") == expected(runs[0], ["271493"])[0]
    # Flask's request.values, as LibreTranslate reads it: the query string first, then the form.
    query = urllib.parse.urlencode({"q": "42", "source": "en", "target": "de"})
    form = urllib.parse.urlencode({"q": "7", "target": "en"}).encode()
    status, answer = server.request(
        "POST", f"/translate?{query}", form, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert status == 200, answer
    assert answer["translatedText"] == expected(runs[0], ["42", "7"])


def test_placeholders_and_markup_survive_the_libretranslate_api(server):
    text = 'Copied %s to <a href="https://example.org/x">42</a> at {time}'
    status, answer = server.request(
        "POST", "/translate", {"q": text, "source": "en", "target": "de"}
    )
    assert status == 200, answer
    out = answer["translatedText"]
    for code in ("%s", '<a href="https://example.org/x">', "</a>", "{time}"):
        assert out.count(code) == 1, out


def test_mastodons_request_shape_keeps_the_html(server, runs):
    pytest.importorskip("lingua")
    body = {
        "q": ["<p>271493</p>", '<p class="x">42! <b>1999?</b><br>7</p>'],
        "source": "auto",
        "target": "de",
        "format": "html",
    }
    status, answer = server.request("POST", "/translate", body)
    assert status == 200, answer
    one, two = answer["translatedText"]
    assert len(answer["confidence"]) == 2 and all(0 < c <= 1 for c in answer["confidence"])
    n = dict(
        zip(
            ["271493", "42", "1999", "7"],
            expected(runs[0], ["271493", "42!", "1999?", "7"]),
            strict=True,
        )
    )
    assert one == f"<p>{n['271493']}</p>"
    assert two == f'<p class="x">{n["42"]} <b>{n["1999"]}</b><br>{n["7"]}</p>'
    # Only English reaches German here, so "auto" needs no guess.
    assert answer["detectedLanguage"] == [{"language": "en", "confidence": 100.0}] * 2


def test_auto_source_detects_among_the_languages_that_reach_the_target(runs):
    pytest.importorskip("lingua")
    first, second = runs
    served = [
        Served(first, "en", "fr"),
        Served(second, "de", "fr"),
    ]
    server = Server(create_app(settings=FP32, served=served))
    try:
        german = "Das ist ein kleines Haus, und heute regnet es den ganzen Tag."
        status, answer = server.request(
            "POST", "/translate", {"q": german, "source": "auto", "target": "fr"}
        )
        assert status == 200 and answer["detectedLanguage"]["language"] == "de"
        status, found = server.request("POST", "/detect", {"q": "The weather is lovely today."})
        assert status == 200 and found[0]["language"] == "en"
    finally:
        server.stop()


def test_form_data_alternatives_and_the_native_api_beside_it(server, runs):
    form = urllib.parse.urlencode({"q": "271493", "source": "de", "target": "en"}).encode()
    status, answer = server.request(
        "POST", "/translate", form, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert status == 200 and answer["translatedText"] == expected(runs[1], ["271493"])[0]
    assert 0 < answer["confidence"] <= 1  # an extra field, which LibreTranslate clients ignore
    status, answer = server.request(
        "POST", "/translate", {"q": "271493", "source": "en", "target": "de", "alternatives": 2}
    )
    assert status == 200 and len(answer["alternatives"]) == 2
    assert answer["translatedText"] not in answer["alternatives"]
    status, native = server.request(
        "POST", "/translate", {"texts": ["42"], "source": "en", "target": "de"}
    )
    assert status == 200 and native["translations"] == expected(runs[0], ["42"])
    status, refused = server.request("POST", "/translate", {"texts": ["42"]})
    assert status == 422 and "en:de" in json.dumps(refused)


@pytest.mark.parametrize(
    "body, reason",
    [
        ({"q": "", "target": "de"}, "missing q"),
        ({"q": "42", "source": "en", "target": "fr"}, "not a target language"),
        ({"q": "42", "source": "fr", "target": "de"}, "fr:de is not served"),
        ({"q": "42", "source": "en", "target": "de", "format": "pdf"}, "format must be"),
        ({"q": "<p><b>42</p>", "source": "en", "target": "de", "format": "html"}, "Malformed"),
        ({"q": "<p>42 <i>43", "source": "en", "target": "de", "format": "html"}, "never closed"),
        ({"q": "42", "source": "en", "target": "de", "alternatives": "x"}, "alternatives"),
        ({"q": "42", "source": "en", "target": "de", "alternatives": 9}, "at most"),
        ({"q": "4" * 3000, "source": "en", "target": "de"}, "over the limit"),
        ({"q": [1, 2], "source": "en", "target": "de"}, "list of strings"),
        ({"q": "\ud800", "source": "en", "target": "de"}, "not valid Unicode"),
    ],
)
def test_bad_requests_get_400_with_the_reason(server, body, reason):
    status, answer = server.request("POST", "/translate", body)
    assert status == 400 and reason in answer["error"], answer


def test_api_keys_and_the_rate_limit(runs, tmp_path):
    (tmp_path / "keys").write_text("k1\n\nk2\n")
    server = start(runs, Access.from_file(tmp_path / "keys", per_minute=2))
    try:
        ask = {"q": "42", "source": "en", "target": "de"}
        assert server.request("POST", "/translate", ask)[0] == 403
        status, answer = server.request("POST", "/translate", {**ask, "api_key": "nope"})
        assert status == 403 and answer["error"] == "Invalid API key"
        assert server.request("POST", "/translate", {**ask, "api_key": "k1"})[0] == 200
        assert server.request("POST", "/translate", {**ask, "api_key": "k1"})[0] == 200
        status, answer = server.request("POST", "/translate", {**ask, "api_key": "k1"})
        assert status == 429 and "2 a minute" in answer["error"]
        assert server.request("POST", "/translate", {**ask, "api_key": "k2"})[0] == 200
    finally:
        server.stop()


def test_serve_flags_for_several_models(capsys, numbers_run):
    from helpers import cli

    with pytest.raises(SystemExit):
        cli(capsys, "serve", "--model", "german=runs/x")
    assert "SRC:TGT=RUN_DIR" in capsys.readouterr().err
    code, _, err = cli(
        capsys, "serve", "--checkpoint", str(numbers_run), "--model", f"en:de={numbers_run}"
    )
    assert code == 2 and "--checkpoint RUN_DIR, or one or more --model" in err
    code, _, err = cli(
        capsys, "serve", "--model", f"en:de={numbers_run}", "--model", f"en:de={numbers_run}"
    )
    assert code == 2 and "given twice" in err


def test_deadline_and_model_failure_are_libretranslate_errors(runs):
    import threading

    server = start(runs, settings=ServeSettings(precision="fp32", timeout_s=0.3))
    worker = server.app.state.workers[0]
    run, gate = worker.run, threading.Event()
    try:
        worker.run = lambda texts, dc, prefixes=None: gate.wait(5) and run(texts, dc, prefixes)
        status, answer = server.request(
            "POST", "/translate", {"q": "1", "source": "en", "target": "de"}
        )
        assert status == 504 and "0.3 s" in answer["error"]
        gate.set()

        def broken(texts, dc, prefixes=None):
            raise RuntimeError("out of memory")

        worker.run = broken
        status, answer = server.request(
            "POST", "/translate", {"q": "1", "source": "en", "target": "de"}
        )
        assert status == 500 and "RuntimeError: out of memory" in answer["error"]
    finally:
        worker.run = run
        server.stop()


def test_attention_is_the_engines_computed_on_the_models_queue(server, runs):
    status, answer = server.request(
        "POST", "/attention", {"q": "271493", "source": "en", "target": "de"}
    )
    assert status == 200
    translation = expected(runs[0], ["271493"])[0]
    assert answer == runs[0].attention_records(["271493"], [translation])[0]
    weights = answer["weights"]  # a row per target token, a column per source token
    assert len(weights) == len(answer["target_tokens"]) and translation == answer["translation"]
    assert all(len(row) == len(answer["source_tokens"]) for row in weights)
    assert all(abs(sum(row) - 1) < 0.01 for row in weights)  # each row a distribution
    # a batch of texts of other lengths (padded) gives each the rows it gives alone
    both = runs[0].attention_records(["271493", "42"], [translation, "zweiundvierzig"])
    alone = runs[0].attention_records(["42"], ["zweiundvierzig"])[0]
    assert both[0] == answer and both[1]["target_tokens"] == alone["target_tokens"]
    assert all(
        abs(a - b) < 1e-3
        for rows in zip(both[1]["weights"], alone["weights"], strict=True)
        for a, b in zip(*rows, strict=True)
    )
