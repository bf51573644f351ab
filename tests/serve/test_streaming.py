"""/translate with "stream": true: server-sent events, one a sentence, in order, then an end
event; put back together, the same translation as the answer whole."""

import http.client
import json

import pytest

from helpers import Server
from vaswani.serve import Served, ServeSettings, create_app
from vaswani.translation.engine import load_run

TEXTS = ["twenty one. forty two. seven.", "", "  three hundred.  "]


@pytest.fixture(scope="module")
def server(numbers_run):
    app = create_app(
        settings=ServeSettings(precision="fp32"), served=[Served(load_run(numbers_run))]
    )
    server = Server(app)
    yield server
    server.stop()


def events(server: Server, body: dict) -> tuple[int, str, list[tuple[str, dict]]]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.request("POST", "/translate", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    kind = response.getheader("Content-Type", "")
    found, body = [], response.read().decode()
    if not kind.startswith("text/event-stream"):
        return response.status, kind, [("json", json.loads(body))]
    for block in body.split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        found.append((lines.get("event", "message"), json.loads(lines["data"])))
    return response.status, kind, found


def test_a_sentence_an_event_in_order_then_the_end(server):
    status, kind, found = events(server, {"texts": TEXTS, "stream": True, "beam_size": 1})
    assert status == 200 and kind.startswith("text/event-stream")
    *sentences, (last, end) = found
    assert last == "end" and end["sentences"] == len(sentences) == 4
    assert [(e["text"], e["sentence"]) for _, e in sentences] == [(0, 0), (0, 1), (0, 2), (2, 0)]
    # put back together as a client does: the same as the answer whole
    rebuilt = ["" for _ in TEXTS]
    for _, e in sentences:
        rebuilt[e["text"]] += e["before"] + e["translation"]
    rebuilt = [text + after for text, after in zip(rebuilt, end["after"], strict=True)]
    status, whole = server.request("POST", "/translate", {"texts": TEXTS, "beam_size": 1})
    assert status == 200 and rebuilt == whole["translations"]
    assert all(0 <= e["confidence"] <= 1 for _, e in sentences)


def test_a_request_over_the_limits_is_refused_before_streaming(server):
    status, kind, found = events(server, {"texts": ["one"] * 100, "stream": True})
    assert status == 422 and kind.startswith("application/json")
    assert "over the limit" in str(found[0][1]["detail"])
