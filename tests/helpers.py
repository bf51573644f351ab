"""Shared helpers for tests (importable because tests/ is on sys.path through its conftest.py)."""

import http.client
import json
import socket
import threading
import time
from pathlib import Path

import torch
import uvicorn

from vaswani.config import ModelConfig
from vaswani.decoding.text import Translation


def random_ids(cfg: ModelConfig, batch: int, length: int, vocab: int | None = None) -> torch.Tensor:
    """Token ids that are never one of the special ids (pad, bos, eos)."""
    low = max(cfg.pad_id, cfg.bos_id, cfg.eos_id) + 1
    return torch.randint(low, vocab or cfg.vocab_size, (batch, length))


class Server:
    """uvicorn serving `app` on a free loopback port, in a thread of this process."""

    def __init__(self, app) -> None:
        self.app = app
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=10)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]})
        self.thread.start()
        deadline = time.time() + 60
        while not self.server.started:
            assert time.time() < deadline, "server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def request(self, method: str, path: str, body=None, headers=None) -> tuple[int, dict]:
        return request(self.port, method, path, body, headers)


def request(port, method, path, body=None, headers=None, timeout=60) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **(headers or {})}
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, json.loads(data) if data else {}


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(port: int, child) -> None:
    """Wait for the server process `child` listening on `port` to answer /health with 200 (its
    stderr said if it exits first)."""
    deadline = time.time() + 120
    while True:
        assert time.time() < deadline and child.poll() is None, child.stderr.read()
        try:
            if request(port, "GET", "/health", timeout=5)[0] == 200:
                return
        except OSError:
            time.sleep(0.1)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """Run `vaswani ARGS` in this process: exit code, stdout, stderr."""
    from vaswani.cli import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def translate_cli(capsys, run, *args: str) -> tuple[int, str, str]:
    """`vaswani translate --checkpoint RUN ARGS` in this process: exit code, stdout, stderr."""
    return cli(capsys, "translate", "--checkpoint", str(run), *args)


def losses(run: Path) -> list[float]:
    """The training loss of every logged step of a run."""
    records = map(json.loads, (Path(run) / "metrics.jsonl").read_text().splitlines())
    return [r["loss"] for r in records if "loss" in r]


def train_sentencepiece(
    lines: list[str], path: Path, vocab_size: int = 60, model_type: str = "unigram"
) -> list[str]:
    """A SentencePiece model trained on `lines` (repeated 20 times), written to `path`: its pieces,
    by id."""
    import io

    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines * 20),
        model_writer=model,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=1.0,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    path.write_bytes(model.getvalue())
    processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


# The size of the small BART-family models (Marian, M2M-100, NLLB, mBART) that the import tests
# build with transformers: seconds to train, the real configs' options otherwise.
TOY_BART = {
    "d_model": 32,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "max_position_embeddings": 64,
}


class Mirror:
    """A stand-in model that reverses each segment's words and upper-cases them, and aligns
    each translated word with the source word it came from: every placement is then known."""

    source_language = target_language = None
    extra = ""

    def prefixes(self, targets, count, sources=None):
        return None

    def segments(self, segments, request=None, progress=None):
        return [
            [Translation(" ".join(reversed(text.split())).upper() + self.extra, 0.0, -1.0, 2)]
            for text in segments.texts
        ]

    def align(self, sources, translations, settings=None):
        found = []
        for source, translation in zip(sources.texts, translations, strict=True):
            n, m = len(source.split()), len(translation.split())  # code taken out of it: fewer
            found.append([(i, n - 1 - i) for i in range(n) if n - 1 - i < m])
        return found
