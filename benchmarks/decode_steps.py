"""Where a decoding step's time goes: PyTorch's profiler over `vaswani.decoding.search.decode`,
its operations summed into what they do, per step.

The same batch as `decode_speed.py` (32 sources of 24 tokens, 64 new tokens forced, randomly
initialised weights), for the small preset and OPUS-MT's shape, greedy and beam 4, in fp32. The
profiler's own cost makes every figure larger than an unprofiled step (the first column, timed
apart); the shares are what to read. "between operations" is the step's wall time that no operation
accounts for: Python, and PyTorch's dispatch.

    python benchmarks/decode_steps.py [--onednn] [--threads 2]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import torch
from decode_speed import opus_mt_shape  # this folder: run as python benchmarks/decode_steps.py

from vaswani import ModelConfig, Transformer, kernels
from vaswani.config import DecodeConfig
from vaswani.decoding.search import decode

GROUPS = {
    "matrix products (layers and output)": ("addmm", "mm", "linear_pointwise", "bmm"),
    "attention": ("scaled_dot_product_attention", "scaled_dot_product_flash_attention_for_cpu"),
    "normaliser and top-k": ("logsumexp", "amax", "exp", "sub", "sum", "topk", "max", "sort"),
    "cache and beam moves": ("copy", "index_select", "gather", "cat", "index", "where", "fill"),
    "layer norm, activation, residual": (
        "native_layer_norm",
        "relu",
        "clamp_min",
        "silu",
        "gelu",
        "add",
        "mul",
    ),
}


def group_of(name: str) -> str:
    """The group of a profiled operation ("aten::exp_" -> exp: normaliser and top-k)."""
    op = name.split("::")[-1].strip("_")
    for group, ops in GROUPS.items():
        if op in ops:
            return group
    return "other operations"


def shape(name: str) -> ModelConfig:
    if name == "small":
        return ModelConfig.from_preset(
            "small", norm="post", sinusoid_layout="halves", dropout=0.0, max_len=128
        )
    return opus_mt_shape()


def profile(
    label: str, model: Transformer, src: torch.Tensor, dc: DecodeConfig, steps: int
) -> None:
    decode(model, src, dc)  # warm-up
    start = time.perf_counter()
    decode(model, src, dc)
    plain_ms = (time.perf_counter() - start) * 1000 / steps
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        decode(model, src, dc)
        wall_ms = (time.perf_counter() - start) * 1000 / steps
    spent: Counter[str] = Counter()
    for event in prof.key_averages():
        spent[group_of(event.key)] += event.self_cpu_time_total / 1000 / steps
    spent["between operations"] = max(0.0, wall_ms - sum(spent.values()))
    parts = ", ".join(f"{g} {ms:.2f} ({ms / wall_ms:.0%})" for g, ms in spent.most_common())
    print(
        f"{label}: {plain_ms:.2f} ms a step unprofiled; profiled {wall_ms:.2f} ms: {parts}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--onednn", action="store_true", help="matrix products on oneDNN")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"{torch.get_num_threads()} threads, CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    for name in ("small", "opus-mt"):
        torch.manual_seed(0)
        model = Transformer(shape(name)).eval()
        kernels.decode_with_onednn(model, args.onednn)
        src = torch.randint(4, 8000, (32, 24))
        src[:, -1] = model.cfg.eos_id
        for beams in (1, 4):
            dc = DecodeConfig(beam_size=beams, max_new_tokens=64, min_new_tokens=64)
            profile(f"{name}, {'greedy' if beams == 1 else 'beam 4'}", model, src, dc, 64)


if __name__ == "__main__":
    with torch.no_grad():
        main()
