"""What a new batch shape costs a training step on CUDA, with and without cuDNN's attention.

Bucketed batches of sentences come in a new (rows, length) shape nearly every step. cuDNN's
kernel for `scaled_dot_product_attention` builds a graph for each new shape, which
`vaswani.device.steady_attention` (called by every CUDA placement) leaves out. This times 40 mini
training steps (bf16 autocast, the fused loss) of one shape and of 40 random shapes, and greedy
plus beam-4 decoding of 64 sentences, with cuDNN's attention on and off.

    PYTHONPATH=src python benchmarks/gpu_shapes.py [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "src")]

from vaswani import ModelConfig, Transformer  # noqa: E402
from vaswani.config import DecodeConfig  # noqa: E402
from vaswani.decoding.search import decode  # noqa: E402
from vaswani.loss import LossHead  # noqa: E402


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def arm(device: str, cudnn: bool, shapes: list[tuple[int, int]], label: str) -> dict:
    """Train steps of `shapes` (rows, length) and decode once, cuDNN's attention on or off."""
    torch.backends.cuda.enable_cudnn_sdp(cudnn)
    torch.manual_seed(0)
    cfg = ModelConfig.from_preset("mini", vocab_size=6000)
    model = Transformer(cfg).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    times = []
    for rows, length in shapes:
        src = torch.randint(4, cfg.vocab_size, (rows, length), device=device)
        tgt = torch.randint(4, cfg.vocab_size, (rows, length + 1), device=device)
        start = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16):
            head = LossHead(model.output_projection, tgt[:, 1:], cfg.pad_id, 0.1)
            loss_sum, tokens = model(src, tgt[:, :-1], head=head)
        optimizer.zero_grad()
        (loss_sum / tokens).backward()
        optimizer.step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    model.eval()
    src = torch.randint(4, cfg.vocab_size, (64, 20), device=device)
    start = time.perf_counter()
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
        for beam in (1, 4):
            decode(model, src, DecodeConfig(beam_size=beam, max_new_tokens=40))
    synchronize(device)
    later = times[1:]
    return {
        "arm": label,
        "cudnn_sdp": cudnn,
        "first_ms": round(times[0] * 1e3, 1),
        "median_ms": round(sorted(later)[len(later) // 2] * 1e3, 1),
        "mean_ms_after_first": round(sum(later) / len(later) * 1e3, 1),
        "decode_s": round(time.perf_counter() - start, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    device = parser.parse_args().device
    rng = random.Random(0)
    varied = [(rng.randint(40, 300), rng.randint(4, 40)) for _ in range(40)]
    for cudnn in (True, False):
        for shapes, label in (([(128, 20)] * 40, "one shape"), (varied, "40 shapes")):
            print(json.dumps(arm(device, cudnn, shapes, label)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
