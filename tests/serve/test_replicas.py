"""Two `vaswani serve --shared-storage redis://` processes behind a round-robin load balancer act
as one server: a file uploaded through one downloads through the other, a key's rate limit and a
database key's character limit hold across both, and when one is killed mid-request the other
answers it and everything after it, nothing lost."""

import signal
import subprocess
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_file_api import download, upload

from helpers import free_port, request, wait_healthy
from round_robin import RoundRobin
from vaswani.serve.keys import KeyStore

pytestmark = pytest.mark.slow


def start_replica(run, port: int, redis_uri: str, tmp_path) -> subprocess.Popen:
    (tmp_path / "keys.txt").write_text("file-key\n")
    flags = ["--model", f"en:de={run}", "--port", str(port), "--precision", "fp32"]
    flags += ["--shared-storage", redis_uri, "--rate-limit", "4"]
    flags += ["--api-keys", str(tmp_path / "keys.txt"), "--keys-db", str(tmp_path / "keys.db")]
    flags += [
        "--max-file-chars",
        "200000",
        "--max-queued-texts",
        "5000",
        "--batch-tokens",
        "100000",
    ]
    return subprocess.Popen(
        [sys.executable, "-m", "vaswani.cli", "serve", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def translate(port: int, key: str, text: str) -> tuple[int, dict]:
    fields = {"q": text, "source": "en", "target": "de", "api_key": key}
    return request(port, "POST", "/translate", fields)


class Proxy:
    """The load balancer's port, for the helpers of test_file_api."""

    def __init__(self, port: int) -> None:
        self.port = port

    def request(self, method, path, body=None, headers=None):
        return request(self.port, method, path, body, headers)


def test_two_replicas_behind_a_load_balancer_act_as_one(numbers_run, redis_uri, tmp_path):
    store = KeyStore(tmp_path / "keys.db", create=True)
    wordy, filer = store.add(100, char_limit=12).key, store.add(100).key
    ports = [free_port(), free_port()]
    replicas = [start_replica(numbers_run, port, redis_uri, tmp_path) for port in ports]
    balancer = None
    try:
        for port, child in zip(ports, replicas, strict=True):
            wait_healthy(port, child)
        balancer = RoundRobin(ports)
        front = Proxy(balancer.port)

        # --rate-limit 4 a minute for the file's key: four answers from the two, then 429
        answers = [translate(balancer.port, "file-key", "12")[0] for _ in range(5)]
        assert answers == [200, 200, 200, 200, 429]
        assert set(balancer.served) == set(ports)
        assert translate(ports[1], "file-key", "12")[0] == 429  # asked directly: the same

        # the database key's 12 characters a day: 8 through one, then 5 refused by both
        assert translate(ports[0], wordy, "12345678")[0] == 200
        for port in ports:
            status, answer = translate(port, wordy, "12345")
            assert status == 429 and "characters" in answer["error"]

        # a file uploaded through one replica downloads through the other
        status, answer = upload(front, "numbers.txt", b"12\n42\n", api_key=filer)
        assert status == 200, answer
        path = urllib.parse.urlsplit(answer["translatedFileUrl"]).path
        files = [download(Proxy(port), path) for port in ports]
        assert files[0] == files[1] and files[0][0] == 200

        # one replica killed mid-request: the other answers it, and what was stored stays
        lines = "\n".join(str(n) for n in range(100000, 101500)).encode()
        with ThreadPoolExecutor(1) as pool:
            long = pool.submit(upload, front, "long.txt", lines, api_key=filer)
            deadline = time.time() + 30
            while not any(balancer.in_flight.values()):
                assert time.time() < deadline
                time.sleep(0.01)
            busy = next(port for port, n in balancer.in_flight.items() if n)
            time.sleep(0.3)
            replicas[ports.index(busy)].send_signal(signal.SIGKILL)
            status, answer = long.result(timeout=120)
        assert status == 200, answer
        assert balancer.passed_over >= 1
        assert download(front, path) == files[0]
        assert translate(balancer.port, wordy, "12345")[0] == 429  # the limits are still Redis'
        assert upload(front, "more.txt", b"7\n", api_key="file-key")[0] == 429
    finally:
        if balancer is not None:
            balancer.stop()
        for child in replicas:
            child.kill()
            child.wait(10)
