import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from helpers import free_port, losses
from vaswani import checkpoint as ckpt
from vaswani import run as run_files
from vaswani import tasks
from vaswani.cli import main
from vaswani.config import TrainConfig
from vaswani.data import PreparedData, TokenBatchSampler
from vaswani.run import RunError
from vaswani.train import loop
from vaswani.train.average import average_checkpoints
from vaswani.train.loop import TrainingError, train
from vaswani.train.setup import resume_config
from vaswani.train.step import adam

VENV_BIN = Path(sys.executable).parent


def config(data: Path, out: Path, **overrides) -> TrainConfig:
    settings = dict(
        data=str(data),
        out=str(out),
        preset="tiny",
        # The paper's schedule does not depend on the budget, so a run stopped by max_steps=k
        # and resumed with max_steps=n equals one of n (test_budget.py covers the others).
        schedule="inverse-sqrt",
        precision="fp32",
        warmup=10,
        batch_tokens=512,
        eval_every=10_000,
        save_every=1,
        log_every=1,
        max_steps=8,
    )
    settings.update(overrides)
    return TrainConfig(**settings)


def weights(run: Path, step: int) -> dict[str, torch.Tensor]:
    return ckpt.read_weights(run / "checkpoints" / ckpt.step_name(step) / ckpt.WEIGHTS)


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def batches_per_epoch(data: Path) -> int:
    split = PreparedData(data).split("train")
    return len(TokenBatchSampler(split.src_lengths, split.tgt_lengths, 512).batches(0))


@pytest.mark.parametrize("where", ["mid-epoch", "epoch boundary", "after warm-up"])
def test_resume_in_process_is_bitwise_identical(numbers_data, tmp_path, where):
    per_epoch = batches_per_epoch(numbers_data)
    k = {"mid-epoch": 3, "epoch boundary": per_epoch, "after warm-up": 10}[where]
    n = k + 4
    # Checkpoints only where each run ends (always saved): that is all the comparison needs.
    few = {"save_every": 10_000}
    train(config(numbers_data, tmp_path / "whole", max_steps=n, **few), progress=False)
    train(config(numbers_data, tmp_path / "split", max_steps=k, **few), progress=False)
    state = json.loads(
        (tmp_path / "split/checkpoints" / ckpt.step_name(k) / ckpt.STATE).read_text()
    )
    if where == "epoch boundary":
        assert state["position"] == [1, 0]
    train(resume_config(tmp_path / "split", max_steps=n), resume=True, progress=False)
    assert_same_weights(weights(tmp_path / "whole", n), weights(tmp_path / "split", n))
    assert losses(tmp_path / "whole") == losses(tmp_path / "split")
    optimizer = [
        ckpt.torch_load(tmp_path / r / "checkpoints" / ckpt.step_name(n) / ckpt.OPTIMIZER)
        for r in ("whole", "split")
    ]
    for a, b in zip(optimizer[0]["state"].values(), optimizer[1]["state"].values(), strict=True):
        assert torch.equal(a["exp_avg"], b["exp_avg"]) and torch.equal(
            a["exp_avg_sq"], b["exp_avg_sq"]
        )


def run_cli(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vaswani.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def cli_args(data: Path, out: Path, steps: int) -> list[str]:
    return [
        "train",
        "--data",
        str(data),
        "--out",
        str(out),
        "--preset",
        "tiny",
        "--precision",
        "fp32",
        "--warmup",
        "10",
        "--batch-tokens",
        "512",
        "--eval-every",
        "10000",
        "--save-every",
        "1",
        "--log-every",
        "1",
        "--max-steps",
        str(steps),
    ]


@pytest.mark.slow
def test_killed_training_resumes_in_a_new_process_to_the_same_weights(numbers_data, tmp_path):
    n = 40
    assert (
        main(cli_args(numbers_data, tmp_path / "whole", n)) == 0
    )  # uninterrupted, in this process
    victim = run_cli(*cli_args(numbers_data, tmp_path / "killed", n))
    latest = tmp_path / "killed/checkpoints/latest"
    deadline = time.time() + 120
    while time.time() < deadline and not (
        latest.exists() and latest.read_text().strip() >= ckpt.step_name(12)
    ):
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    resumed_from = ckpt.latest_valid(tmp_path / "killed/checkpoints")
    assert resumed_from is not None and resumed_from.name < ckpt.step_name(n)
    resume = run_cli("train", "--resume", str(tmp_path / "killed"))
    assert resume.wait(timeout=300) == 0, resume.stderr.read()
    assert_same_weights(weights(tmp_path / "whole", n), weights(tmp_path / "killed", n))
    assert losses(tmp_path / "whole") == losses(tmp_path / "killed")


def test_ctrl_c_saves_a_checkpoint_and_exits_130(numbers_data, tmp_path):
    args = cli_args(numbers_data, tmp_path / "run", 100000)
    args[args.index("--save-every") + 1] = "100000"
    child = run_cli(*args)
    metrics = tmp_path / "run/metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (
        metrics.exists() and len(metrics.read_text().splitlines()) >= 3
    ):
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    assert child.wait(timeout=120) == 130
    saved = ckpt.latest_valid(tmp_path / "run/checkpoints")
    assert saved is not None and "stopped by interrupt" in child.stdout.read()


def test_changed_data_makes_resume_refuse_unless_reset(numbers_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(numbers_data, data)
    train(config(data, tmp_path / "run", max_steps=3), progress=False)
    from vaswani.data import PrepareOptions
    from vaswani.prepare import prepare

    prepare(
        ["numbers-de"],
        data,
        PrepareOptions(vocab_size=300, numbers_size=2500, progress=False),
        force=True,
    )
    with pytest.raises(
        TrainingError, match="changed since this run started.*reset_data_position=True"
    ):
        train(resume_config(tmp_path / "run", max_steps=5), resume=True, progress=False)
    result = train(
        resume_config(tmp_path / "run", max_steps=5),
        resume=True,
        progress=False,
        reset_data_position=True,
    )
    assert result.step == 5


@pytest.mark.slow
@pytest.mark.skipif(not (VENV_BIN / "torchrun").exists(), reason="torchrun not installed")
def test_two_process_ddp_equals_one_process_with_the_same_global_batch(numbers_data, tmp_path):
    common = [
        "--data",
        str(numbers_data),
        "--preset",
        "tiny",
        "--precision",
        "fp32",
        "--warmup",
        "10",
        "--batch-tokens",
        "512",
        "--accumulate",
        "2",
        "--max-steps",
        "6",
        "--eval-every",
        "10000",
        "--log-every",
        "1",
        "--model",
        "dropout=0.0",
    ]
    # The one-process reference in this process (a child would spend ~3 s starting torch).
    assert main(["train", "--out", str(tmp_path / "one"), *common]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ddp = subprocess.run(
        [
            str(VENV_BIN / "torchrun"),
            "--nproc_per_node",
            "2",
            "--master_port",
            str(free_port()),  # pytest -n 2 runs two such tests at once
            "-m",
            "vaswani.cli",
            "train",
            "--out",
            str(tmp_path / "two"),
            *common,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert ddp.returncode == 0, ddp.stderr
    # Adam divides by sqrt(v) + eps (1e-9): the keys' bias, whose true gradient is exactly 0
    # (softmax ignores a constant added to every key), gets +-lr steps from 1e-12 rounding noise.
    one, two = weights(tmp_path / "one", 6), weights(tmp_path / "two", 6)
    d = 32  # d_model of the tiny preset
    for name in one:
        a, b = one[name].clone(), two[name].clone()
        if name.endswith("qkv_proj.bias"):  # [query | key | value]
            a[d : 2 * d] = b[d : 2 * d] = 0
        elif name.endswith("kv_proj.bias"):  # [key | value]
            a[:d] = b[:d] = 0
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4, msg=name)
    for a, b in zip(losses(tmp_path / "one"), losses(tmp_path / "two"), strict=True):
        assert a == pytest.approx(b, rel=1e-5)
    assert len(list((tmp_path / "two").glob("metrics.jsonl"))) == 1  # only rank 0 writes


def test_nan_loss_stops_with_the_step_and_no_poisoned_checkpoint(
    numbers_data, tmp_path, monkeypatch
):
    real = tasks.Translate.training_loss
    calls = {"n": 0}

    def poisoned(self, net, batch, pad_id, smoothing):
        calls["n"] += 1
        loss, n = real(self, net, batch, pad_id, smoothing)
        return (loss * float("nan"), n) if calls["n"] == 4 else (loss, n)

    monkeypatch.setattr(tasks.Translate, "training_loss", poisoned)
    with pytest.raises(TrainingError, match="non-finite loss \\(nan\\).* at step 4"):
        train(config(numbers_data, tmp_path / "stop"), progress=False)
    assert ckpt.latest_valid(tmp_path / "stop/checkpoints").name == ckpt.step_name(3)
    assert any(math.isnan(x) for x in losses(tmp_path / "stop"))  # visible in the log

    calls["n"] = 0
    result = train(config(numbers_data, tmp_path / "skip", nan_policy="skip"), progress=False)
    assert result.step == 8
    state = json.loads((tmp_path / "skip/checkpoints" / ckpt.step_name(8) / ckpt.STATE).read_text())
    assert state["skipped_steps"] == 1
    assert all(torch.isfinite(t).all() for t in weights(tmp_path / "skip", 8).values())


def test_validation_loss_falls_on_numbers_de(numbers_data, tmp_path):
    cfg = config(
        numbers_data,
        tmp_path / "run",
        max_steps=120,
        eval_every=20,
        save_every=1000,
        warmup=40,
        lr_scale=1.0,  # the preset's 2.0 with this short warm-up stalls near loss 3.0
    )
    train(cfg, progress=False)
    records = [
        json.loads(line) for line in (tmp_path / "run/metrics.jsonl").read_text().splitlines()
    ]
    valid = [r["valid_loss"] for r in records if "valid_loss" in r]
    assert len(valid) == 6 and valid[-1] < valid[0] - 0.5
    assert (tmp_path / "run/best" / ckpt.WEIGHTS).exists()
    # best/ is the evaluation with the highest chrF (word BLEU is 0 for one-word targets)
    evaluations = [r for r in records if "valid_chrf" in r]
    best = json.loads((tmp_path / "run/best" / ckpt.STATE).read_text())
    assert best["step"] == max(evaluations, key=lambda r: r["valid_chrf"])["step"] > 20
    assert all(k in records[0] for k in ("loss", "lr", "tokens_per_s", "grad_norm"))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_training_resumes_bitwise(numbers_data, tmp_path, precision):
    n, k = 5, 3
    train(
        config(numbers_data, tmp_path / "whole", max_steps=n, precision=precision), progress=False
    )
    train(
        config(numbers_data, tmp_path / "split", max_steps=k, precision=precision), progress=False
    )
    state = json.loads(
        (tmp_path / "split/checkpoints" / ckpt.step_name(k) / ckpt.STATE).read_text()
    )
    assert ("grad_scaler" in state) == (precision == "fp16")  # the loss scale is saved
    train(resume_config(tmp_path / "split", max_steps=n), resume=True, progress=False)
    assert_same_weights(weights(tmp_path / "whole", n), weights(tmp_path / "split", n))
    assert losses(tmp_path / "whole") == losses(tmp_path / "split")
    environment = json.loads((tmp_path / "split" / run_files.ENVIRONMENT).read_text())
    assert environment["precision"] == precision and environment["device"] == "cpu"


def test_fp16_overflows_are_skipped_by_the_scaler_not_failures(numbers_data, tmp_path, monkeypatch):
    # A loss scale far too high: every step's fp16 gradients overflow.
    monkeypatch.setattr(
        loop, "grad_scaler", lambda device, _: torch.amp.GradScaler(device.type, init_scale=2.0**60)
    )
    run = tmp_path / "run"
    train(
        config(numbers_data, run, max_steps=3, precision="fp16"), progress=False
    )  # nan_policy stop
    state = json.loads((run / "checkpoints" / ckpt.step_name(3) / ckpt.STATE).read_text())
    assert state["overflow_steps"] == 3 and state["skipped_steps"] == 0
    assert state["grad_scaler"]["scale"] == 2.0**57  # halved after each overflow
    assert_same_weights(weights(run, 1), weights(run, 3))  # no update was applied


def test_auto_precision_is_recorded_as_asked_and_as_chosen(numbers_data, tmp_path):
    result = train(
        config(numbers_data, tmp_path / "run", max_steps=1, precision="auto"), progress=False
    )
    assert result.precision == "fp32"  # tests never pick bf16 (conftest.py)
    assert (
        json.loads((tmp_path / "run" / run_files.TRAIN_CONFIG).read_text())["precision"] == "auto"
    )
    environment = json.loads((tmp_path / "run" / run_files.ENVIRONMENT).read_text())
    assert environment["precision"] == "fp32" and environment["precision_reason"].startswith("auto")


def test_training_on_a_cpu_keeps_freed_memory_for_the_next_step(
    numbers_data, tmp_path, monkeypatch
):
    kept = []
    monkeypatch.setattr(loop, "keep_freed_memory", lambda: kept.append(True) or True)
    train(config(numbers_data, tmp_path / "run", max_steps=1), progress=False)
    assert kept == [True]


def test_average_counts_tied_weights_once(numbers_data, tmp_path):
    train(config(numbers_data, tmp_path / "run", max_steps=3), progress=False)
    path, names = average_checkpoints(tmp_path / "run", last=2)
    assert names == [ckpt.step_name(2), ckpt.step_name(3)]
    averaged = ckpt.read_weights(path / ckpt.WEIGHTS)
    a, b = weights(tmp_path / "run", 2), weights(tmp_path / "run", 3)
    assert averaged.keys() == a.keys()
    for name in averaged:
        torch.testing.assert_close(averaged[name], (a[name] + b[name]) / 2)


def test_clear_errors_for_bad_runs(numbers_data, tmp_path):
    with pytest.raises(TrainingError, match="not a training run directory"):
        resume_config(tmp_path)
    train(config(numbers_data, tmp_path / "run", max_steps=1), progress=False)
    with pytest.raises(RunError, match="already holds a training run; continue it with --resume"):
        train(config(numbers_data, tmp_path / "run", max_steps=1), progress=False)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vaswani.cli",
            "train",
            "--data",
            str(tmp_path / "nope"),
            "--out",
            str(tmp_path / "x"),
            "--max-steps",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "not a prepared dataset" in result.stderr


def test_the_fused_adam_updates_as_pytorchs_default_adam_does():
    """`adam` is §5.3's Adam as one fused kernel on a CPU: ten updates of the same gradients leave
    the weights within float32 rounding of PyTorch's default (for-loop) Adam's."""
    torch.manual_seed(0)
    start = [torch.randn(300, 40), torch.randn(40)]
    fused_weights = [w.clone().requires_grad_() for w in start]
    plain_weights = [w.clone().requires_grad_() for w in start]
    fused = adam(fused_weights, torch.device("cpu"))
    plain = torch.optim.Adam(plain_weights, lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    assert fused.defaults["fused"] and not plain.defaults["fused"]
    for step in range(10):
        grads = [torch.randn_like(w) for w in start]
        for optimizer, weights in ((fused, fused_weights), (plain, plain_weights)):
            for group in optimizer.param_groups:
                group["lr"] = 1e-3 * (step + 1)
            for w, g in zip(weights, grads, strict=True):
                w.grad = g.clone()
            optimizer.step()
    for a, b in zip(fused_weights, plain_weights, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        assert not torch.equal(a, start[0] if a.dim() == 2 else start[1])
