import os
import shutil
import subprocess
import time

import pytest
import torch

import vaswani.device
import vaswani.translation.precision
from helpers import free_port
from vaswani.config import ModelConfig

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `pytest -n 2` (make test): two workers share the machine's two cores, so each computes on
    # one thread, and so do the processes its tests start; two pools of two threads on two cores
    # would each wait for the other's (the ~10x slowdown vaswani's thread choice exists for).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _fp32_unless_asked(monkeypatch):
    """Tests run fp32 unless they test bf16/fp16 themselves: `--precision auto` never picks bf16
    or int8 in them, even on a CPU that computes bf16 natively (tests/test_device.py fakes the
    hardware)."""
    monkeypatch.setattr(vaswani.device, "bf16_matmul_is_fast", lambda: False)
    # Nor does it measure the precision to decode in (tests/test_precision.py does).
    monkeypatch.setattr(vaswani.translation.precision, "decoding_choice", lambda *_: None)


@pytest.fixture
def tiny() -> ModelConfig:
    """The tiny preset without dropout, so train and eval mode agree."""
    return ModelConfig.from_preset("tiny", dropout=0.0)


@pytest.fixture(scope="session")
def numbers_data(tmp_path_factory):
    """A small prepared numbers-de dataset shared by the tests that train."""
    from vaswani.data import PrepareOptions
    from vaswani.prepare import prepare

    out = tmp_path_factory.mktemp("data") / "numbers"
    prepare(["numbers-de"], out, PrepareOptions(vocab_size=300, numbers_size=3000, progress=False))
    return out


@pytest.fixture(scope="session")
def numbers_run(numbers_data, tmp_path_factory):
    """A run directory of a small model trained on `numbers_data` well enough to translate most
    held-out numbers (chrF ~96 on 50 validation sentences; about 20 s on 2 CPU cores)."""
    from vaswani.config import TrainConfig
    from vaswani.train.loop import train

    out = tmp_path_factory.mktemp("runs") / "numbers"
    tc = TrainConfig(
        data=str(numbers_data),
        out=str(out),
        preset="tiny",
        model={"d_model": 64, "d_ff": 256},
        batch_tokens=1024,
        precision="fp32",
        warmup=80,
        max_steps=400,
        eval_every=400,
        eval_sentences=50,
        save_every=400,
        ema_decay=0.0,  # one model to validate, not two
    )
    train(tc, progress=False)
    return out


@pytest.fixture(scope="session")
def lm_data(tmp_path_factory):
    """The built-in grammar-en corpus, small, prepared for a language model."""
    from vaswani.data import PrepareOptions
    from vaswani.prepare import prepare

    out = tmp_path_factory.mktemp("data") / "grammar"
    # 500 entries: the grammar's words become single tokens, which a tiny model learns quickly.
    prepare([], out, PrepareOptions(task="lm", vocab_size=500, builtin_size=3000, progress=False))
    return out


@pytest.fixture(scope="session")
def lm_run(lm_data, tmp_path_factory):
    """A tiny language model trained on `lm_data` for 300 steps (about 10 s)."""
    from vaswani.config import TrainConfig
    from vaswani.train.loop import train

    out = tmp_path_factory.mktemp("runs") / "grammar"
    tc = TrainConfig(
        data=str(lm_data),
        out=str(out),
        task="lm",
        preset="tiny",
        batch_tokens=1024,
        precision="fp32",
        warmup=100,
        lr_scale=2.0,
        max_steps=300,
        eval_every=50,
        save_every=300,
        ema_decay=0.0,
    )
    train(tc, progress=False)
    return out


@pytest.fixture(scope="session")
def classify_data(tmp_path_factory):
    """The built-in sentiment-en corpus, small, prepared for a classifier."""
    from vaswani.data import PrepareOptions
    from vaswani.prepare import prepare

    out = tmp_path_factory.mktemp("data") / "sentiment"
    opts = PrepareOptions(task="classify", vocab_size=400, builtin_size=4000, progress=False)
    prepare([], out, opts)
    return out


def train_classifier(data, out, pooling: str):
    from vaswani.config import TrainConfig
    from vaswani.train.loop import train

    tc = TrainConfig(
        data=str(data),
        out=str(out),
        task="classify",
        preset="tiny",
        batch_tokens=1024,
        precision="fp32",
        warmup=100,
        lr_scale=0.5,
        max_steps=300,
        eval_every=100,
        save_every=300,
        model={"pooling": pooling},
        ema_decay=0.0,
    )
    return train(tc, progress=False)


@pytest.fixture(scope="session")
def classify_run(classify_data, tmp_path_factory):
    """A tiny classifier (mean pooling) trained on `classify_data` for 300 steps (about 8 s)."""
    out = tmp_path_factory.mktemp("runs") / "sentiment"
    train_classifier(classify_data, out, "mean")
    return out


# A real Redis server for the tests of shared storage: Debian's redis-server, started once per
# session on a free port with nothing saved to disk; its tests skip, saying why, where it is not
# installed (.ci/run installs it) or does not start.


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    binary = shutil.which("redis-server") or shutil.which("/usr/bin/redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian's redis-server; .ci/run installs it)")
    import redis

    port = free_port()
    directory = tmp_path_factory.mktemp("redis")
    settings = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process = subprocess.Popen(
        [binary, *settings, "--dir", str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    uri = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(uri)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                said = process.stdout.read().decode(errors="replace")[-300:]
                pytest.skip(f"redis-server did not start: {said}")
            time.sleep(0.05)
    yield uri
    client.close()
    process.terminate()
    process.wait(10)


@pytest.fixture
def redis_uri(redis_server):
    """The session's Redis, emptied for this test."""
    import redis

    with redis.Redis.from_url(redis_server) as client:
        client.flushdb()
    return redis_server


@pytest.fixture(scope="session")
def postgres_uri():
    """A PostgreSQL server of Debian's postgresql, started for the session in a directory of its
    own (as the postgres user where the tests run as root); skipped, saying why, where it is not
    installed or does not start."""
    import glob
    import os
    import tempfile
    from pathlib import Path

    pytest.importorskip("psycopg")
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = shutil.which("initdb") or (found[-1] if found else None)
    if initdb is None:
        pytest.skip("PostgreSQL is not installed (Debian's postgresql)")
    pg_ctl = str(Path(initdb).with_name("pg_ctl"))
    directory = Path(tempfile.mkdtemp(prefix="vaswani-postgres-"))
    as_user = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        as_user = ["runuser", "-u", "postgres", "--"]
        try:
            shutil.chown(directory, "postgres")
        except LookupError:
            pytest.skip("no postgres user to run PostgreSQL as")
    data, port = directory / "data", free_port()
    options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off"
    steps = [
        [initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
        [pg_ctl, "-D", str(data), "-w", "-l", str(directory / "log"), "-o", options, "start"],
    ]
    for step in steps:
        done = subprocess.run(as_user + step, capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(directory, ignore_errors=True)
            pytest.skip(f"PostgreSQL did not start: {(done.stderr or done.stdout)[-300:]}")
    yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    subprocess.run(as_user + [pg_ctl, "-D", str(data), "-m", "immediate", "stop"], check=False)
    shutil.rmtree(directory, ignore_errors=True)
