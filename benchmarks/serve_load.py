"""Load on `vaswani serve` over loopback: throughput, latency and errors, batching on and off.

Starts `vaswani serve` in a child process for each setting, waits for /health, then sends a fixed
number of POST /translate requests (one sentence each, from the run's test split) from a number of
concurrent clients, each with its own keep-alive connection. Reports requests/s, p50/p99 latency
and every non-200 answer. Rows: vaswani's own request with dynamic batching on and off; the
LibreTranslate request ({"q", "source", "target"}) to one model (--model de:en=RUN) and to two
models served by one process (alternating de:en and en:de).

    python benchmarks/serve_load.py --checkpoint runs/ding [--second runs/other] [--requests 2000] [--clients 32]
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(port: int, child: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"the server exited: {child.stderr.read()}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the server did not become healthy")


def load(port: int, body_of, requests: int, clients: int) -> dict:
    """`requests` POST /translate requests, the i-th with body `body_of(i)`, from `clients`
    concurrent keep-alive connections."""
    latencies: list[float] = []
    statuses: Counter = Counter()
    lock = threading.Lock()
    counter = iter(range(requests))

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            body = body_of(i)
            start = time.perf_counter()
            try:
                connection.request("POST", "/translate", body, {"Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                status = response.status
            except OSError as error:
                status = type(error).__name__
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            with lock:
                latencies.append(time.perf_counter() - start)
                statuses[status] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    latencies.sort()
    return {
        "seconds": seconds,
        "rps": requests / seconds,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[int(0.99 * (len(latencies) - 1))] * 1000,
        "statuses": dict(statuses),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument(
        "--second", type=Path, help="the second model of the two-model row (default: the same)"
    )
    args = parser.parse_args()
    data = json.loads((args.checkpoint / "data.json").read_text())
    sentences = (Path(data["path"]) / "test.src.txt").read_text(encoding="utf-8").splitlines()
    print(
        f"{args.requests} requests of one sentence, {args.clients} concurrent clients, "
        f"beam {args.beam_size}, model {args.checkpoint}"
    )
    print("| endpoint | models | dynamic batching | requests/s | p50 ms | p99 ms | answers |")
    print("| --- | --- | --- | ---: | ---: | ---: | --- |")
    second = args.second or args.checkpoint

    def native(i: int) -> str:
        return json.dumps({"text": sentences[i % len(sentences)]})

    def libre(pairs: list[str]):
        def body(i: int) -> str:
            source, target = pairs[i % len(pairs)].split(":")
            q = sentences[i % len(sentences)]
            return json.dumps({"q": q, "source": source, "target": target})

        return body

    rows = [
        ("vaswani /translate", ["--checkpoint", str(args.checkpoint)], True, native),
        ("vaswani /translate", ["--checkpoint", str(args.checkpoint)], False, native),
        (
            "LibreTranslate /translate",
            ["--model", f"de:en={args.checkpoint}"],
            True,
            libre(["de:en"]),
        ),
        (
            "LibreTranslate /translate",
            ["--model", f"de:en={args.checkpoint}", "--model", f"en:de={second}"],
            True,
            libre(["de:en", "en:de"]),
        ),
    ]
    for endpoint, models, batching, body_of in rows:
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "vaswani.cli",
            "serve",
            *models,
            "--port",
            str(port),
            "--beam-size",
            str(args.beam_size),
            "--max-queued-texts",
            str(max(512, args.clients)),
        ]
        if not batching:
            command.append("--no-batching")
        child = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_healthy(port, child)
            result = load(port, body_of, args.requests, args.clients)
        finally:
            child.terminate()
            child.wait(timeout=60)
        answers = ", ".join(f"{k}: {v}" for k, v in sorted(result["statuses"].items(), key=str))
        n_models = models.count("--model") or 1
        print(
            f"| {endpoint} | {n_models} | {'on' if batching else 'off'} | {result['rps']:.1f} | "
            f"{result['p50']:.0f} | {result['p99']:.0f} | {answers} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
