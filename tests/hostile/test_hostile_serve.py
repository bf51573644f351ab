"""Hostile requests and server settings: 4xx with valid JSON instead of a 500, impossible
settings refused before listening."""

import socket

import pytest

from helpers import Server, cli
from vaswani.run import load_trained
from vaswani.serve import Served, ServeError, ServeSettings, create_app, listen
from vaswani.translation.engine import Engine, load_run

# 3. The server: 4xx with valid JSON, impossible settings refused at start.


@pytest.fixture(scope="module")
def server(numbers_run):
    model, src_tok, tgt_tok, _ = load_trained(numbers_run)
    running = Server(create_app(Engine(model, src_tok, tgt_tok), ServeSettings(precision="fp32")))
    running.run = numbers_run
    yield running
    running.stop()


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": "\\ud800"}',  # a lone surrogate, escaped
        b'{"text": "12\xed\xa0\x80"}',  # the same as raw bytes
        b'{"texts": ["12", "\\udfff"]}',
        b'{"text": "12", "beam_size": 1e400}',
        b'{"text": "12", "beam_size": NaN}',
        b'{"text": "12", "beam_size": "2"}',
        b'{"text": "12", "beam_size": true}',
        b'{"text": "12", "beam_size": 2.5}',
        b'{"text": 12}',
    ],
)
def test_bad_requests_get_422_with_valid_json(server, body):
    status, answer = server.request("POST", "/translate", body)  # parses the answer as JSON
    assert status == 422 and answer["detail"]
    assert server.request("POST", "/translate", {"text": "12"})[0] == 200  # still serving


DEEP = 10_000


@pytest.fixture(scope="module")
def task_servers(server, lm_run, classify_run):
    """A server for each endpoint: translation, generation (a language model), classification,
    and LibreTranslate's API (a model served for a language pair)."""
    fp32 = ServeSettings(precision="fp32")
    started = {"/translate": server}
    for path, run in (("/generate", lm_run), ("/classify", classify_run)):
        model, tokenizer, target, _ = load_trained(run)
        started[path] = Server(create_app(Engine(model, tokenizer, target), fp32))
    pair = load_run(server.run)
    served = [Served(pair, "en", "de")]
    started["libre"] = Server(create_app(settings=fp32, served=served))
    yield started
    for path in ("/generate", "/classify", "libre"):
        started[path].stop()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/translate", b'{"text": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
        ("/translate", b'{"text": "12", "x": ' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}"),
        ("/translate", b"[" * DEEP + b"]" * DEEP),
        ("/translate", b'{"texts": ' + b"[" * 100 + b"]" * 100 + b"}"),  # parses, still too deep
        (
            "/translate",
            b'{"q": ' + b"[" * DEEP + b"]" * DEEP + b', "source": "de", "target": "en"}',
        ),
        ("/translate", b'{"text": "12", "beam_size": 99999999999999999999}'),
        ("/translate", b'{"text": "12", "max_length": 99999999999999999999}'),
        ("/translate", b'{"text": "12", "beam_size": 300}'),
        ("/classify", b'{"text": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
        ("/generate", b'{"prompt": "", "x": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
        ("/generate", b'{"prompt": "", "seed": 99999999999999999999999999999}'),
        ("/generate", b'{"prompt": "", "max_new_tokens": 99999999999999999999}'),
        ("/generate", b'{"prompt": "", "top_k": 99999999999999999999}'),
        ("libre", b'{"q": ' + b"[" * DEEP + b"]" * DEEP + b', "source": "en", "target": "de"}'),
        ("libre", b'{"q": "12", "source": "en", "target": "de", "alternatives": 1e400}'),
        ("libre", b'{"q": "12", "source": "en", "target": "de", "alternatives": -1e400}'),
        (
            "libre",
            b'{"q": "12", "source": "en", "target": "de", "alternatives": 99999999999999999999}',
        ),
        ("libre", b'{"text": "12", "target": "de", "beam_size": 99999999999999999999}'),
        ("libre", b'{"q": "12", "source": ["en"], "target": "de"}'),
        ("libre", b'{"q": "12", "source": {"a": 1}, "target": "de"}'),
        ("libre", b'{"q": "12", "source": "en", "target": ["de"]}'),
        ("libre", b'{"q": "12", "source": "en", "target": "de", "format": ["html"]}'),
    ],
)
def test_deep_bodies_and_huge_numbers_are_refused_not_500(task_servers, path, body):
    server, path = task_servers[path], "/translate" if path == "libre" else path
    status, answer = server.request("POST", path, body)  # parses the answer as JSON
    assert status in (400, 422) and (answer.get("detail") or answer.get("error")), (status, answer)
    body = {"/translate": {"text": "12"}, "/classify": {"text": "a"}}.get(path, {"prompt": ""})
    if server is task_servers["libre"]:
        body = {"q": "12", "source": "en", "target": "de"}
    assert server.request("POST", path, body)[0] == 200  # still serving


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"timeout_s": -1.0}, "timeout_s must be > 0"),
        ({"max_texts": 0}, "max_texts must be >= 1"),
        ({"beam_size": 9}, "over max_beam_size"),
        ({"max_chars": True}, "max_chars must be int"),
    ],
)
def test_impossible_server_settings_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        ServeSettings(**change)


def test_serve_flags_out_of_range_are_one_line(numbers_run, capsys):
    with pytest.raises(SystemExit) as stop:  # argparse's own check
        cli(capsys, "serve", "--checkpoint", str(numbers_run), "--port", "70000")
    assert stop.value.code == 2 and "--port" in capsys.readouterr().err
    for flag, value in (("--timeout", "-1"), ("--beam-size", "9"), ("--alpha", "-1")):
        code, out, err = cli(capsys, "serve", "--checkpoint", str(numbers_run), flag, value)
        assert code == 2 and err.startswith(f"error: {flag}: invalid ") and "serving" not in out


def test_a_port_in_use_is_an_error_before_serving(numbers_run, capsys):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ServeError, match=f"cannot listen on 127.0.0.1:{port}"):
            listen("127.0.0.1", port)
        code, out, err = cli(capsys, "serve", "--checkpoint", str(numbers_run), "--port", str(port))
        assert code == 2 and "serving" not in out and "cannot listen" in err
        assert "LibreTranslate API: off" in err  # numbers-de names no languages: said why
    finally:
        taken.close()


@pytest.mark.parametrize("source", [["en"], {"a": 1}, 12])
def test_attention_with_a_source_of_the_wrong_type_is_400(task_servers, source):
    server = task_servers["libre"]
    status, answer = server.request(
        "POST", "/attention", {"q": "12", "source": source, "target": "de"}
    )
    assert status == 400 and "source must be a string" in answer["error"], answer
    assert (
        server.request("POST", "/attention", {"q": "12", "source": "en", "target": "de"})[0] == 200
    )


# 5. Round 4's server: numbers Python refuses to parse, requests that can never fit, flags.


def test_a_beam_size_of_5000_digits_is_a_400_on_both_apis(task_servers):
    digits = b"9" * 5000
    for path, body in (
        ("/translate", b'{"text": "12", "beam_size": ' + digits + b"}"),
        ("libre", b'{"q": "12", "source": "en", "target": "de", "alternatives": ' + digits + b"}"),
    ):
        server = task_servers[path]
        status, answer = server.request("POST", "/translate", body)
        assert status in (400, 422) and "not JSON" in str(answer), (path, status, answer)


def test_a_request_that_can_never_fit_the_queue_is_413_not_503(numbers_run):
    model, src_tok, tgt_tok, _ = load_trained(numbers_run)
    settings = ServeSettings(precision="fp32", max_queued_texts=4)
    server = Server(create_app(Engine(model, src_tok, tgt_tok), settings))
    try:
        texts = ["12. 13. 14.", "15. 16. 17."]  # six sentences, split
        status, answer = server.request("POST", "/translate", {"texts": texts, "split": True})
        assert status == 413 and "over the 4 the server queues" in answer["detail"], answer
        assert server.request("POST", "/translate", {"texts": ["12", "13"]})[0] == 200
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-file-bytes", "0"], "max_file_bytes must be >= 1"),
        (["--max-file-bytes", "-1"], "max_file_bytes must be >= 1"),
        (["--max-file-chars", "-5"], "max_file_chars must be >= 1"),
        (["--file-ttl", "-1"], "file_ttl_s must be > 0"),
        (["--fuzzy-threshold", "80"], "give --memory"),
    ],
)
def test_serve_flags_are_checked_before_listening(numbers_run, capsys, args, message):
    code, out, err = cli(capsys, "serve", "--checkpoint", str(numbers_run), *args)
    assert code == 2 and message in err and "serving" not in out, err


def test_a_glossary_for_a_pair_no_model_serves_is_refused(numbers_run, tmp_path, capsys):
    glossary = tmp_path / "g.tsv"
    glossary.write_text("zwölf\ttwelve\n")
    model = f"en:de={numbers_run}"
    args = ("serve", "--model", model, "--glossary", f"de:fr={glossary}")
    code, out, err = cli(capsys, *args)
    assert code == 2 and "no model serves de:fr (served: en:de)" in err and "serving" not in out


def test_serve_help_shows_no_default_for_a_switch(capsys):
    with pytest.raises(SystemExit):
        cli(capsys, "serve", "--help")
    shown = capsys.readouterr().out
    assert "--no-pivot" in shown and "(default: True)" not in shown and "(default: [])" not in shown


@pytest.mark.parametrize("page", ["<p>a <![foo[ x ]]> b</p>", "<p>a <![ x", "<p>" + "<b>" * 200])
def test_html_the_parser_refuses_is_a_400_from_libretranslate(task_servers, page):
    body = {"q": page, "source": "en", "target": "de", "format": "html"}
    status, answer = task_servers["libre"].request("POST", "/translate", body)
    assert status == 400 and "HTML" in answer["error"], answer
