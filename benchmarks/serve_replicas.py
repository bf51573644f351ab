"""What sharing state costs `vaswani serve`, and whether replicas sharing Redis hold up for long.

Load (the default): LibreTranslate /translate requests (one test sentence each, a database key
counted on each, a per-client rate limit checked on each) from concurrent keep-alive clients,
through the round-robin balancer of tests/round_robin.py, to one process with 2 threads and to two
replicas with 1 thread each (the same 2 cores), with memory:// and with redis://. Reports
requests/s, p50/p99 latency and every answer's status.

Soak (--soak MINUTES): two replicas on redis:// behind the balancer, each of --soak-keys keys
sending requests a little over its rate limit (--soak-pace), a file uploaded every few seconds and
downloaded before and after its expiry (--file-ttl). Reports the answers by status (no 500 allowed), files that were
lost (missing before their expiry), and Redis' memory over time (bounded by the expiry).

    python benchmarks/serve_replicas.py --checkpoint runs/ding [--requests 600] [--clients 16]
    python benchmarks/serve_replicas.py --checkpoint runs/ding --soak 10
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from serve_load import free_port, load, wait_healthy  # noqa: E402

from round_robin import RoundRobin  # noqa: E402
from vaswani.serve.keys import KeyStore  # noqa: E402


@contextlib.contextmanager
def redis_server():
    """Debian's redis-server on a free port, nothing saved; its URI."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    with tempfile.TemporaryDirectory() as directory:
        flags = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", directory]
        child = subprocess.Popen([binary, *flags], stdout=subprocess.DEVNULL)
        uri = f"redis://127.0.0.1:{port}/0"
        for _ in range(200):
            with contextlib.suppress(redis.ConnectionError):
                redis.Redis.from_url(uri).ping()
                break
            time.sleep(0.05)
        try:
            yield uri
        finally:
            child.terminate()
            child.wait(10)


@contextlib.contextmanager
def replicas(args, count: int, storage: str, extra: list[str]):
    """`count` servers of the checkpoint (2 // count threads each) behind a balancer."""
    ports = [free_port() for _ in range(count)]
    env = dict(os.environ, OMP_NUM_THREADS=str(max(1, 2 // count)))
    children = []
    for port in ports:
        command = [sys.executable, "-m", "vaswani.cli", "serve", "--model"]
        command += [f"{args.source}:{args.target}={args.checkpoint}", "--port", str(port)]
        command += ["--beam-size", str(args.beam_size), "--shared-storage", storage, *extra]
        children.append(
            subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
            )
        )
    balancer = None
    try:
        for port, child in zip(ports, children, strict=True):
            wait_healthy(port, child)
        balancer = RoundRobin(ports)
        yield balancer
    finally:
        if balancer is not None:
            balancer.stop()
        for child in children:
            child.terminate()
            child.wait(60)


def load_table(args, sentences: list[str], uri: str, work: Path) -> None:
    store = KeyStore(work / "keys.db", create=True)
    key = store.add(10**6, char_limit=10**12).key
    extra = ["--keys-db", str(work / "keys.db"), "--max-queued-texts", "4096"]

    def body(i: int) -> str:
        q = sentences[i % len(sentences)]
        return json.dumps({"q": q, "source": args.source, "target": args.target, "api_key": key})

    print(
        f"{args.requests} LibreTranslate requests of one sentence, {args.clients} clients, "
        f"beam {args.beam_size}, {args.checkpoint}; every row through the balancer"
    )
    print("| servers | storage | requests/s | p50 ms | p99 ms | answers |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for count in (1, 2):
        for storage in ("memory://", uri):
            with replicas(args, count, storage, extra) as balancer:
                load(balancer.port, body, args.clients, args.clients)  # warm-up
                found = load(balancer.port, body, args.requests, args.clients)
            threads = "2 threads" if count == 1 else "2 replicas x 1 thread"
            answers = ", ".join(f"{k}: {v}" for k, v in sorted(found["statuses"].items(), key=str))
            print(
                f"| {threads} | {storage.split(':')[0]} | {found['rps']:.1f} | "
                f"{found['p50']:.0f} | {found['p99']:.0f} | {answers} |",
                flush=True,
            )


def soak(args, sentences: list[str], uri: str, work: Path) -> None:
    import http.client

    import redis

    keys = [f"soak-key-{i}" for i in range(args.soak_keys)]
    (work / "keys.txt").write_text("\n".join([*keys, "soak-files"]) + "\n")
    extra = ["--api-keys", str(work / "keys.txt"), "--rate-limit", str(args.soak_rate)]
    extra += ["--file-ttl", str(args.file_ttl)]
    statuses: Counter = Counter()
    files = {"kept": 0, "lost": 0, "expired as due": 0, "kept past expiry": 0}
    memory: list[tuple[float, int, int]] = []
    lock = threading.Lock()
    end = time.monotonic() + args.soak * 60
    client = redis.Redis.from_url(uri)

    def call(port: int, method: str, path: str, body: bytes, headers: dict) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            connection.request(method, path, body, headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def sender(key: str, port: int) -> None:
        gap, i = 60.0 / (args.soak_rate * args.soak_pace), 0
        while time.monotonic() < end:
            fields = {"q": sentences[i % len(sentences)], "source": args.source}
            fields.update(target=args.target, api_key=key)
            status, _ = call(port, "POST", "/translate", json.dumps(fields).encode(), JSON)
            with lock:
                statuses[status] += 1
            i += 1
            time.sleep(gap)

    def uploader(port: int) -> None:
        boundary = "vaswani-soak"
        waiting: list[tuple[float, str, bytes]] = []
        while time.monotonic() < end:
            text = "\n".join(sentences[len(waiting) % len(sentences) :][:5]).encode()
            parts = [
                f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
                for k, v in (
                    ("source", args.source),
                    ("target", args.target),
                    ("api_key", "soak-files"),
                )
            ]
            parts.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                'filename="soak.txt"\r\n\r\n'
            )
            body = "".join(parts).encode() + text + f"\r\n--{boundary}--\r\n".encode()
            form = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
            status, answer = call(port, "POST", "/translate_file", body, form)
            with lock:
                statuses[f"file {status}"] += 1
            if status == 200:
                url = json.loads(answer)["translatedFileUrl"]
                path = urllib.parse.urlsplit(url).path
                got = call(port, "GET", path, b"", {})
                waiting.append((time.monotonic(), path, got[1]))
            now = time.monotonic()
            for made, path, data in [w for w in waiting if now - w[0] > args.file_ttl + 2]:
                status, _ = call(port, "GET", path, b"", {})
                files["expired as due" if status == 404 else "kept past expiry"] += 1
                waiting.remove((made, path, data))
            for _made, path, data in [w for w in waiting if now - w[0] < args.file_ttl - 5]:
                status, again = call(port, "GET", path, b"", {})
                files["kept" if status == 200 and again == data else "lost"] += 1
            time.sleep(3)

    def watcher() -> None:
        start = time.monotonic()
        while time.monotonic() < end:
            info = client.info("memory")
            memory.append((time.monotonic() - start, info["used_memory"], client.dbsize()))
            time.sleep(15)

    with replicas(args, 2, uri, extra) as balancer:
        port = balancer.port
        threads = [threading.Thread(target=sender, args=(key, port)) for key in keys]
        threads += [
            threading.Thread(target=uploader, args=(port,)),
            threading.Thread(target=watcher),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    print(
        f"soak: {args.soak} minutes, 2 replicas on redis://, {len(keys)} keys limited to "
        f"{args.soak_rate} requests a minute each and sending {args.soak_pace}x that, "
        f"files kept {args.file_ttl} s"
    )
    print(f"answers: {dict(sorted(statuses.items(), key=str))}")
    print(f"files: {files}")
    for seconds, used, count in memory:
        print(f"  {seconds:5.0f} s: Redis used_memory {used / 2**20:.2f} MiB, {count} keys")


JSON = {"Content-Type": "application/json"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--source", default="de")
    parser.add_argument("--target", default="en")
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--soak", type=float, metavar="MINUTES", help="run the soak instead")
    parser.add_argument("--soak-keys", type=int, default=4)
    parser.add_argument("--soak-rate", type=int, default=60, help="each key's requests a minute")
    parser.add_argument(
        "--soak-pace", type=float, default=1.25, help="each key sends this many times its limit"
    )
    parser.add_argument("--file-ttl", type=int, default=60)
    args = parser.parse_args()
    data = json.loads((args.checkpoint / "data.json").read_text())
    sentences = (Path(data["path"]) / "test.src.txt").read_text(encoding="utf-8").splitlines()
    with redis_server() as uri, tempfile.TemporaryDirectory() as work:
        (soak if args.soak else load_table)(args, sentences, uri, Path(work))


if __name__ == "__main__":
    main()
