"""The GPU path in one command: the checks of tests/test_gpu.py (CPU parity, bf16 and fp16 +
GradScaler training steps, resume, cached decoding, DDP over NCCL with one process), the base
preset's training step in bf16 with its model FLOPs utilisation (MFU), and decoding speed next to
transformers' generate and CTranslate2 where they are installed; the figures go to --out (JSON)
and to stdout.

It runs from the source tree with PyTorch alone (no pytest, numpy or other dependency of
vaswani's): generate and CTranslate2 are compared only where they import. `--device cpu` runs
the same on the CPU (small sizes) to prove the script where no GPU is at hand.

    PYTHONPATH=src python benchmarks/gpu_check.py --out gpu-check.json [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from vaswani import ModelConfig, Transformer  # noqa: E402
from vaswani.config import DecodeConfig  # noqa: E402
from vaswani.decoding.search import decode  # noqa: E402
from vaswani.device import steady_attention  # noqa: E402
from vaswani.loss import LossHead  # noqa: E402

PEAK_BF16 = {"H100 PCIe": 756e12, "H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12}
"""Dense bf16 tensor-core FLOP/s by device name (vendors' data sheets, without sparsity)."""


def peak_flops(device: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    name = torch.cuda.get_device_name()
    return next((flops for key, flops in PEAK_BF16.items() if key in name), None)


def training_flops(cfg: ModelConfig, src_tokens: int, tgt_tokens: int, src_len: int, tgt_len: int):
    """Matmul FLOPs of one training step (forward and backward, 3 x 2 per multiply-add): 6 x the
    weights each token passes through, and the attention scores and sums (12 x length x width
    per layer and token, for encoder self-, decoder self- and cross-attention)."""
    d, f = cfg.d_model, cfg.d_ff
    enc, dec = cfg.n_encoder_layers, cfg.n_decoder_layers
    attention, feed_forward = 4 * d * d, 2 * d * f
    encoder = enc * (attention + feed_forward)
    decoder = dec * (2 * attention + feed_forward) + d * cfg.target_vocab_size
    weights = 6 * (encoder * src_tokens + decoder * tgt_tokens)
    scores = 12 * d * (enc * src_tokens * src_len + dec * tgt_tokens * (tgt_len + src_len))
    return weights + scores


def train_speed(device: str, rows: int, length: int, steps: int) -> dict:
    """The base preset's (vocabulary 32,000) training step in bf16 with the fused loss: seconds
    per step, tokens per second and MFU."""
    cpu = device == "cpu"
    preset = "tiny" if cpu else "base"
    cfg = ModelConfig.from_preset(preset, vocab_size=32000 if not cpu else 2000)
    model = Transformer(cfg).to(device)
    fused = device.startswith("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
    src = torch.randint(4, cfg.vocab_size, (rows, length), device=device)
    tgt = torch.randint(4, cfg.vocab_size, (rows, length + 1), device=device)

    def step() -> None:
        with torch.autocast(device, dtype=torch.bfloat16):
            head = LossHead(model.output_projection, tgt[:, 1:], cfg.pad_id, 0.1)
            loss_sum, tokens = model(src, tgt[:, :-1], head=head)
        optimizer.zero_grad(set_to_none=True)
        (loss_sum / tokens).backward()
        optimizer.step()

    for _ in range(3):  # warm-up: kernels chosen, memory pools grown
        step()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize(device)
    seconds = (time.perf_counter() - start) / steps
    flops = training_flops(cfg, rows * length, rows * length, length, length)
    peak = peak_flops(device)
    return {
        "preset": preset,
        "parameters": sum(p.numel() for p in model.parameters()),
        "batch": f"{rows} x {length} source and target tokens",
        "seconds_per_step": seconds,
        "tokens_per_second": 2 * rows * length / seconds,
        "achieved_tflops": flops / seconds / 1e12,
        "mfu": None if peak is None else flops / seconds / peak,
    }


def decode_speed(device: str, rows: int, src_len: int, new: int) -> list[dict]:
    """New tokens per second, greedy and beam 4, of vaswani (fp32 and bf16 weights) and, where
    they import, of transformers' generate and CTranslate2 on the same weights."""
    # Marian's layout of the sinusoids, so that transformers' copy computes the same
    cfg = ModelConfig.from_preset(
        "small", norm="post", sinusoid_layout="halves", dropout=0.0, max_len=src_len + new + 8
    )
    model = Transformer(cfg).to(device).eval()
    src = torch.randint(4, cfg.vocab_size, (rows, src_len), device=device)
    src[:, -1] = cfg.eos_id
    others = references(model, device)
    found = []
    for beams in (1, 4):
        dc = DecodeConfig(
            beam_size=beams, max_new_tokens=new, min_new_tokens=new, batch_tokens=1 << 30
        )
        row = {"search": "greedy" if beams == 1 else f"beam {beams}", "new_tokens": new}
        for dtype in (torch.float32, torch.bfloat16):
            model = model.to(dtype)
            row[f"vaswani {str(dtype)[6:]}"] = (
                rows * new / best_time(decode, model, src, dc, device)
            )
        model = model.to(torch.float32)
        for name, run in others.items():
            try:
                row[name] = rows * new / best_time(run, src, beams, new, device)
            except Exception as error:  # a reference that fails is said, not fatal
                row[name] = f"failed: {type(error).__name__}: {str(error)[:120]}"
        found.append(row)
    return found


def references(model: Transformer, device: str) -> dict:
    """generate and CTranslate2 over `model`'s weights, those that import."""
    found: dict = {}
    try:
        from decode_speed import generate_fixed, marian_copy

        hf = marian_copy(model).to(device).eval()
        pad = model.cfg.pad_id
        found["generate fp32"] = lambda src, beams, new: generate_fixed(hf, src, beams, new, pad)
    except Exception as error:
        print(f"generate: not compared ({type(error).__name__}: {error})", file=sys.stderr)
    try:
        import tempfile

        import ctranslate2  # noqa: F401
        from decode_speed import CT2

        where = "cuda" if device.startswith("cuda") else "cpu"
        ct2 = CT2(model.cpu(), Path(tempfile.mkdtemp()), torch.get_num_threads(), where)
        model.to(device)
        found["CTranslate2 fp32"] = lambda src, beams, new: ct2.decode(
            "float32", src.cpu(), beams, new
        )
    except Exception as error:
        print(f"CTranslate2: not compared ({type(error).__name__}: {error})", file=sys.stderr)
    return found


def best_time(fn, *args) -> float:
    """The best of three timed calls of fn(*args[:-1]) after one warm-up; args[-1] the device."""
    *call, device = args
    with torch.no_grad():
        fn(*call)
        times = []
        for _ in range(3):
            synchronize(device)
            start = time.perf_counter()
            fn(*call)
            synchronize(device)
            times.append(time.perf_counter() - start)
    return min(times)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="where the figures go (JSON)")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    args = parser.parse_args()
    device = args.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: run with --device cpu to check the script", file=sys.stderr)
        return 2
    import test_gpu

    if device.startswith("cuda"):
        steady_attention()  # the attention kernels vaswani's own CUDA runs use
    started = time.perf_counter()
    report: dict = {
        "device": torch.cuda.get_device_name()
        if device.startswith("cuda")
        else platform.processor(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
    print(f"{report['device']}: torch {report['torch']}, CUDA {report['cuda']}", flush=True)
    checks = test_gpu.run_checks(device)
    report["checks"] = [{"check": n, "result": r, "seconds": round(s, 2)} for n, r, s in checks]
    for name, result, seconds in checks:
        print(f"  {result:<8} {name} ({seconds:.1f} s)", flush=True)
    cpu = device == "cpu"
    report["training"] = train_speed(
        device, 8 if cpu else 128, 32 if cpu else 128, 2 if cpu else 20
    )
    print(f"training: {json.dumps(report['training'])}", flush=True)
    report["decoding"] = decode_speed(device, 8 if cpu else 32, 24, 16 if cpu else 64)
    for row in report["decoding"]:
        print(f"decoding: {json.dumps(row)}", flush=True)
    report["seconds"] = time.perf_counter() - started
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"figures in {args.out} ({report['seconds']:.0f} s)")
    return 0 if all(r == "passed" for _, r, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
