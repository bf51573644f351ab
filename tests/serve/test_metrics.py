"""serve --metrics: GET /metrics in Prometheus' text format, read back with prometheus-client's
own parser."""

import http.client

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers import Server
from vaswani.serve import Served, ServeSettings, create_app
from vaswani.serve.libre import Access
from vaswani.translation.engine import load_run


@pytest.fixture(scope="module")
def loaded(numbers_run):
    return load_run(numbers_run)


def scrape(server: Server) -> tuple[str, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("GET", "/metrics")
    response = connection.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type").startswith("text/plain")
    text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            samples[key] = sample.value
    return text, samples


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_requests_rejections_and_model_calls_are_counted(loaded):
    settings = ServeSettings(precision="fp32", metrics=True, max_texts=4)
    access = Access({"secret-key-1"}, per_minute=3)
    app = create_app(settings=settings, served=[Served(loaded, "en", "de")], access=access)
    server = Server(app)
    try:
        asked = {"q": "four two", "source": "en", "target": "de", "api_key": "secret-key-1"}
        for _ in range(3):
            assert server.request("POST", "/translate", asked)[0] == 200
        over = {"q": "one", "source": "en", "target": "de", "api_key": "secret-key-1"}
        assert server.request("POST", "/translate", over)[0] == 429
        wrong = {"q": "one", "source": "en", "target": "de", "api_key": "wrong"}
        assert server.request("POST", "/translate", wrong)[0] == 403
        status, _ = server.request("POST", "/translate", {"texts": ["one"] * 9})
        assert status == 422
        text, samples = scrape(server)
    finally:
        server.stop()
    model = loaded.path.name
    answered = {"route": "/translate", "status": "200", "model": model}
    assert value(samples, "vaswani_requests_total", **answered) == 3
    refused = {"route": "/translate", "status": "429", "model": "none"}  # before any model
    assert value(samples, "vaswani_requests_total", **refused) == 1
    assert value(samples, "vaswani_rejections_total", cause="rate_limit") == 1
    assert value(samples, "vaswani_rejections_total", cause="key") == 1
    assert value(samples, "vaswani_rejections_total", cause="invalid") == 1
    # the health check's test request and the three translations: "four two" is 8 characters
    assert value(samples, "vaswani_characters_total", model=model) >= 3 * 8
    assert value(samples, "vaswani_batch_texts_count", model=model) >= 3
    assert value(samples, "vaswani_seconds_per_token_count", model=model) >= 3
    assert value(samples, "vaswani_queued_texts", model=model) == 0
    assert value(samples, "vaswani_request_seconds_count", route="/translate") == 6
    # nothing a client sent: no key, no text
    assert "secret-key-1" not in text and "four two" not in text and "wrong" not in text


def test_metrics_are_off_unless_asked(loaded):
    app = create_app(settings=ServeSettings(precision="fp32"), served=[Served(loaded, "en", "de")])
    server = Server(app)
    try:
        assert server.request("GET", "/metrics")[0] == 404
    finally:
        server.stop()
