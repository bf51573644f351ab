"""`vaswani serve`: real HTTP on loopback, uvicorn started in the test: answers, batching, limits, shutdown."""

import http.client
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import Server, free_port, request, wait_healthy
from vaswani.cli import build_parser
from vaswani.config import DecodeConfig
from vaswani.decoding.text import TextModel, translate
from vaswani.run import load_trained
from vaswani.serve import ServeSettings, create_app
from vaswani.translation.engine import Engine

FP32 = {"precision": "fp32"}


@pytest.fixture(scope="module")
def loaded(numbers_run):
    return load_trained(numbers_run)


@pytest.fixture
def serving(loaded):
    servers = []

    def start(**settings):
        model, src_tok, tgt_tok, _ = loaded
        server = Server(create_app(Engine(model, src_tok, tgt_tok), ServeSettings(**settings)))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def test_translations_equal_the_python_api_and_keep_order(serving, loaded):
    server = serving(**FP32)
    texts = ["271493", "", "500181", "42"]
    status, body = server.request("POST", "/translate", {"texts": texts})
    assert status == 200
    model, src_tok, tgt_tok, _ = loaded
    assert body["translations"] == translate(
        TextModel(model, src_tok, tgt_tok), texts, DecodeConfig()
    )
    status, one = server.request("POST", "/translate", {"text": "42", "beam_size": 1})
    assert status == 200 and one["beam_size"] == 1
    assert one["translations"] == translate(
        TextModel(model, src_tok, tgt_tok), ["42"], DecodeConfig(beam_size=1)
    )


def test_concurrent_requests_are_all_answered_and_batched_together(serving, loaded):
    server = serving(batch_wait_ms=100, **FP32)
    model, src_tok, tgt_tok, _ = loaded
    numbers = [str(n) for n in range(1000, 1000 + 24 * 37, 37)]

    def ask(number):
        return server.request("POST", "/translate", {"texts": [number, ""]})

    with ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(ask, numbers))
    assert all(status == 200 for status, _ in answers)
    expected = translate(TextModel(model, src_tok, tgt_tok), numbers, DecodeConfig())
    assert [body["translations"] for _, body in answers] == [[e, ""] for e in expected]
    assert server.app.state.worker.batches < len(numbers)  # several requests per model call


def test_health_and_openapi(serving):
    server = serving()
    status, body = server.request("GET", "/health")
    assert status == 200 and body["status"] == "ok" and body["device"] == "cpu"
    status, schema = server.request("GET", "/openapi.json")
    assert status == 200 and "/translate" in schema["paths"]


def test_health_is_503_when_the_test_translation_fails(loaded):
    model, src_tok, tgt_tok, _ = loaded

    class Broken:
        def encode_batch(self, texts):
            raise RuntimeError("tokenizer broken")

    server = Server(create_app(Engine(model, Broken(), tgt_tok), ServeSettings()))
    try:
        status, body = server.request("GET", "/health")
        assert status == 503 and "tokenizer broken" in body["error"]
        status, _ = server.request("POST", "/translate", {"text": "1"})
        assert status == 503
    finally:
        server.stop()


@pytest.mark.parametrize(
    "body, status, message",
    [
        (b'{"text": "1"', 422, "the body is not JSON"),
        ({"text": 5}, 422, "string"),
        ({"text": "1", "path": "/etc/passwd"}, 422, "Extra inputs are not permitted"),
        ({}, 422, 'exactly one of "text" and "texts"'),
        ({"texts": []}, 422, '"texts" is empty'),
        ({"texts": ["1"] * 9}, 422, "9 texts, over the limit of 8"),
        ({"text": "1" * 151}, 422, "text 1 is over the limit of 150 characters"),
        ({"text": "1", "beam_size": 5}, 422, "beam_size 5 is over the limit of 4"),
        ({"text": "1", "beam_size": 0}, 422, "greater than or equal to 1"),
        ({"text": "1", "max_length": 65}, 422, "max_length 65 is over the limit of 64"),
        ({"texts": ["1", "9" * 130]}, 422, "text 2 has 131 tokens"),
        ({"text": "1" * 300}, 413, "over the limit of 256 bytes"),
    ],
)
def test_each_limit_gets_its_status_and_the_next_request_works(serving, body, status, message):
    settings = dict(max_body_bytes=256, max_texts=8, max_chars=150, max_beam_size=4, max_length=64)
    server = serving(**settings)
    got, answer = server.request("POST", "/translate", body)
    assert got == status and message in str(answer), answer
    assert server.request("POST", "/translate", {"text": "12"})[0] == 200


def test_a_chunked_body_over_the_limit_is_refused(serving):
    server = serving(max_body_bytes=256)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    chunks = iter([b'{"text": "', b"1" * 200, b"1" * 200, b'"}'])
    connection.request("POST", "/translate", body=chunks, encode_chunked=True)
    response = connection.getresponse()
    assert response.status == 413 and b"over the limit" in response.read()


def held_model(server, finished: threading.Event | None = None) -> threading.Event:
    """Make each model call wait until the returned event is set (at most 60 s); `finished` is
    set when a held call has returned."""
    translator = server.app.state.worker
    run = translator.run
    gate = threading.Event()

    def held(texts, dc, prefixes=None):
        gate.wait(timeout=60)
        try:
            return run(texts, dc, prefixes)
        finally:
            if finished is not None:
                finished.set()

    translator.run = held
    return gate


def test_a_burst_over_the_queue_gets_503_at_once_and_the_rest_are_served(serving):
    # Two requests of two texts fill the queue (4 texts) and are held inside the model call; the
    # six others must be refused while the model is still busy, not after it: no clock involved.
    server = serving(max_queued_texts=4, batch_wait_ms=0)
    gate = held_model(server)

    def ask(_):
        return server.request("POST", "/translate", {"texts": ["1", "2"]})[0]

    with ThreadPoolExecutor(8) as pool:
        answers = [pool.submit(ask, i) for i in range(8)]
        deadline = time.monotonic() + 30
        while sum(a.done() for a in answers) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        answered_while_busy = [a.result() for a in answers if a.done()]
        gate.set()
        statuses = [a.result() for a in answers]
    assert answered_while_busy == [503] * 6, statuses
    assert sorted(statuses) == [200] * 2 + [503] * 6
    assert server.request("POST", "/translate", {"text": "7"})[0] == 200


def test_a_request_past_its_deadline_gets_504_and_the_worker_is_freed(serving):
    server = serving(timeout_s=0.3)
    finished = threading.Event()
    gate = held_model(server, finished)  # the model answers only when the test says so
    status, body = server.request("POST", "/translate", {"text": "1"})
    assert status == 504 and "0.3 s" in body["detail"]
    gate.set()
    assert finished.wait(timeout=60)  # the batch that timed out finishes; nothing is stuck behind
    assert server.request("POST", "/translate", {"text": "1"})[0] == 200


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_memory_stays_flat_over_repeated_bursts(serving):
    server = serving(batch_wait_ms=2)

    def burst():
        with ThreadPoolExecutor(16) as pool:
            statuses = list(
                pool.map(
                    lambda i: server.request("POST", "/translate", {"texts": [str(i)] * 8})[0],
                    range(200, 296),
                )
            )
        assert set(statuses) == {200}

    burst()
    before = rss_mb()
    for _ in range(3):
        burst()
    assert rss_mb() - before < 50


def test_the_server_binds_loopback_by_default():
    args = build_parser().parse_args(["serve", "--checkpoint", "run"])
    assert args.host == "127.0.0.1"


@pytest.mark.slow
def test_sigterm_finishes_requests_in_flight_and_exits_0(numbers_run):
    port = free_port()
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vaswani.cli",
            "serve",
            "--checkpoint",
            str(numbers_run),
            "--port",
            str(port),
            "--precision",
            "fp32",
            "--max-texts",
            "3000",
            "--max-queued-texts",
            "3000",
            "--batch-tokens",
            "100000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_healthy(port, child)
        deadline = time.time() + 120
        texts = [str(n) for n in range(100000, 103000)]  # a few seconds of work
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(
                request, port, "POST", "/translate", {"texts": texts, "beam_size": 8}
            )
            # SIGTERM once the server has admitted the request (its texts are counted as queued),
            # so it is still being translated then: it must be answered before the server exits.
            while request(port, "GET", "/health", timeout=5)[1]["queued_texts"] == 0:
                assert time.time() < deadline and not answer.done()
                time.sleep(0.01)
            child.send_signal(signal.SIGTERM)
            status, body = answer.result(timeout=120)
        assert status == 200 and len(body["translations"]) == 3000
        assert child.wait(timeout=60) == 0
        with pytest.raises(OSError):
            request(port, "GET", "/health", timeout=5)
    finally:
        child.kill()
