"""The CUDA paths: the model on the GPU computes what it computes on the CPU, bf16 and fp16 (with
a GradScaler) training steps learn, training resumes from a checkpoint to the same weights,
cached decoding equals uncached, and DDP over NCCL runs with one process.

Marked `gpu`: pytest skips them where no CUDA device is at hand. `benchmarks/gpu_check.py` runs the
same functions without pytest (on a machine with PyTorch alone), on CUDA or, to prove the script,
on the CPU. Each takes the device and a scratch directory; nothing here needs more than PyTorch.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import torch

from vaswani import ModelConfig, Transformer
from vaswani.config import DecodeConfig
from vaswani.decoding.search import decode
from vaswani.loss import LossHead

try:
    import pytest
except ImportError:  # run by benchmarks/gpu_check.py on a machine without pytest
    pytest = None
else:
    pytestmark = [
        pytest.mark.gpu,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
    ]

    @pytest.fixture
    def device() -> str:
        return "cuda"

    @pytest.fixture
    def scratch(tmp_path: Path) -> Path:
        return tmp_path


def small_model(device: str, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    cfg = ModelConfig.from_preset("tiny", dropout=0.0, vocab_size=300, d_model=64, d_ff=256)
    return Transformer(cfg).to(device)


def batch(cfg: ModelConfig, device: str, rows: int = 8, length: int = 12, seed: int = 1):
    """Source, decoder input and target ids: a copy task with some padding."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, cfg.vocab_size, (rows, length), generator=g)
    src[rows // 2 :, -3:] = cfg.pad_id
    src[:, -4] = cfg.eos_id
    tgt = torch.cat([torch.full((rows, 1), cfg.bos_id), src], dim=1)
    return src.to(device), tgt[:, :-1].contiguous().to(device), tgt[:, 1:].contiguous().to(device)


def train_steps(model: Transformer, device: str, precision: str, steps: int, optimizer=None):
    """`steps` updates on one batch under autocast in `precision` (fp16 with a GradScaler);
    the losses and the optimizer."""
    cfg = model.cfg
    src, tgt_in, tgt_out = batch(cfg, device)
    optimizer = optimizer or torch.optim.AdamW(model.parameters(), lr=3e-3)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[precision]
    scaler = torch.amp.GradScaler(device, enabled=precision == "fp16")
    losses = []
    for _ in range(steps):
        with torch.autocast(device, dtype=dtype, enabled=precision != "fp32"):
            head = LossHead(model.output_projection, tgt_out, cfg.pad_id, 0.1)
            loss_sum, tokens = model(src, tgt_in, head=head)
            loss = loss_sum / tokens
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses, optimizer


def test_the_model_computes_on_the_device_what_it_computes_on_the_cpu(device, scratch):
    model = small_model("cpu").eval()
    src, tgt_in, _ = batch(model.cfg, "cpu")
    with torch.no_grad():
        expected = model(src, tgt_in)
        moved = model.to(device)
        found = moved(src.to(device), tgt_in.to(device)).cpu()
        assert (found - expected).abs().max().item() < 1e-4
        with torch.autocast(device, dtype=torch.bfloat16):
            half = moved(src.to(device), tgt_in.to(device)).float().cpu()
    assert torch.isfinite(half).all()
    agree = (half.argmax(-1) == expected.argmax(-1)).float().mean().item()
    assert agree > 0.9, f"bf16 picks the fp32 top token at {agree:.0%} of positions"


def test_bf16_training_steps_learn(device, scratch):
    losses, _ = train_steps(small_model(device), device, "bf16", 30)
    assert all(map(torch.isfinite, map(torch.tensor, losses)))
    assert losses[-1] < 0.7 * losses[0], losses


def test_fp16_training_steps_learn_with_a_grad_scaler(device, scratch):
    losses, _ = train_steps(small_model(device), device, "fp16", 30)
    finite = [x for x in losses if x == x and abs(x) != float("inf")]
    assert len(finite) >= 25 and finite[-1] < 0.7 * finite[0], losses


def test_training_resumes_from_a_checkpoint_to_the_same_weights(device, scratch):
    straight = small_model(device)
    train_steps(straight, device, "fp32", 8)
    first = small_model(device)
    _, optimizer = train_steps(first, device, "fp32", 4)
    path = scratch / "resume.pt"
    torch.save({"model": first.state_dict(), "optimizer": optimizer.state_dict()}, path)
    state = torch.load(path, map_location=device, weights_only=True)
    resumed = small_model(device, seed=7)  # other weights, replaced by the checkpoint's
    resumed.load_state_dict(state["model"])
    optimizer = torch.optim.AdamW(resumed.parameters(), lr=3e-3)
    optimizer.load_state_dict(state["optimizer"])
    train_steps(resumed, device, "fp32", 4, optimizer)
    for (name, a), b in zip(
        straight.state_dict().items(), resumed.state_dict().values(), strict=True
    ):
        assert torch.allclose(a, b, atol=1e-5), name


def test_cached_decoding_equals_uncached(device, scratch):
    model = small_model(device).eval()
    src, _, _ = batch(model.cfg, device)
    for beam in (1, 4):
        dc = DecodeConfig(beam_size=beam, max_new_tokens=12)
        cached = decode(model, src, dc, use_cache=True)
        uncached = decode(model, src, dc, use_cache=False)
        assert [h[0].tokens for h in cached] == [h[0].tokens for h in uncached]


def test_ddp_trains_with_one_process(device, scratch):
    """DDP over NCCL (gloo on the CPU) with a world of one: the wrapped model's step is the
    plain model's."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    backend = "nccl" if device.startswith("cuda") else "gloo"
    dist.init_process_group(backend, rank=0, world_size=1)
    try:
        plain, wrapped = small_model(device), small_model(device)
        ddp = DistributedDataParallel(wrapped, device_ids=[0] if backend == "nccl" else None)
        src, tgt_in, tgt_out = batch(plain.cfg, device)
        for net, model in ((plain, plain), (ddp, wrapped)):
            head = LossHead(model.output_projection, tgt_out, model.cfg.pad_id, 0.1)
            loss_sum, tokens = net(src, tgt_in, head=head)
            (loss_sum / tokens).backward()
        for (name, a), b in zip(plain.named_parameters(), wrapped.parameters(), strict=True):
            assert torch.allclose(a.grad, b.grad, atol=1e-5), name
    finally:
        dist.destroy_process_group()


CHECKS = [
    test_the_model_computes_on_the_device_what_it_computes_on_the_cpu,
    test_bf16_training_steps_learn,
    test_fp16_training_steps_learn_with_a_grad_scaler,
    test_training_resumes_from_a_checkpoint_to_the_same_weights,
    test_cached_decoding_equals_uncached,
    test_ddp_trains_with_one_process,
]
"""What `benchmarks/gpu_check.py` runs, in order."""


def run_checks(device: str) -> list[tuple[str, str, float]]:
    """Each check on `device`: (name, "passed" or the failure in one line, seconds)."""
    import time

    found = []
    for check in CHECKS:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as scratch:
            try:
                check(device, Path(scratch))
                result = "passed"
            except Exception as error:  # a failed check is a line of the report
                result = f"FAILED: {type(error).__name__}: {str(error)[:300]}"
        found.append((check.__name__, result, time.perf_counter() - start))
    return found
