"""Language-model generation speed with the KV cache and without it, side by side in one run.

The model is a decoder-only Transformer of the `small` preset's shape (3 layers, d_model 256,
4 heads, d_ff 1024, vocabulary 8,000; position limit raised to 1,024), randomly initialised, with
the end-of-text token's embedding zeroed so that greedy generation (temperature 0) never ends
early: every run makes exactly the asked number of new tokens. With the cache each step feeds the
one new token and attends over stored keys and values; without it (`use_cache=False`) each step
re-runs the whole text, as a model without a cache must. The script checks that both give the same
tokens, then reports new tokens per second (batch x new tokens / seconds, best of --repeats).

    python benchmarks/generate_speed.py [--new 128 256 512] [--batch 1] [--prompt-len 16]
"""

from __future__ import annotations

import argparse
import time

import torch

from vaswani.config import ModelConfig, Sampling
from vaswani.decoding.sampling import sample
from vaswani.device import autocast, benchmark_setting
from vaswani.model import DecoderOnly


def timed(model: DecoderOnly, prompts: list[list[int]], new: int, use_cache: bool, repeats: int):
    """Best seconds over `repeats` runs, and the generated tokens."""
    best, tokens = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        found = sample(model, prompts, Sampling(new, temperature=0.0), use_cache=use_cache)
        best = min(best, time.perf_counter() - start)
        tokens = [h.tokens for h in found]
    return best, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--new", type=int, nargs="+", default=[128, 256, 512])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument(
        "--precisions", nargs="+", help="default: fp32 and what --precision auto picks here"
    )
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    setting, precisions = benchmark_setting("cpu")
    print(setting)
    torch.manual_seed(0)

    cfg = ModelConfig.from_preset("small", n_encoder_layers=0, dropout=0.0, max_len=1024)
    model = DecoderOnly(cfg).eval()
    with torch.no_grad():
        model.decoder.embed.token.weight[cfg.eos_id] = 0.0  # tied: its logit is always 0
    prompts = torch.randint(4, cfg.vocab_size, (args.batch, args.prompt_len)).tolist()

    print(
        f"decoder-only, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, "
        f"batch {args.batch}, prompt {args.prompt_len} tokens"
    )
    print(
        "| precision | new tokens | with cache tok/s | without cache tok/s | speed-up | same tokens |"
    )
    print("| --- | ---: | ---: | ---: | ---: | :---: |")
    for precision in args.precisions or precisions:
        with autocast(torch.device("cpu"), precision):
            sample(model, prompts, Sampling(8, temperature=0.0))  # warm-up
            for new in args.new:
                row(model, prompts, new, precision, args)


def row(model, prompts, new: int, precision: str, args) -> None:
    """One table row: `new` tokens generated with and without the KV cache."""
    cached_s, cached = timed(model, prompts, new, True, args.repeats)
    plain_s, plain = timed(model, prompts, new, False, args.repeats)
    assert all(len(t) == new for t in cached), "generation ended early"
    made = args.batch * new
    print(
        f"| {precision} | {new} | {made / cached_s:,.0f} | {made / plain_s:,.0f} | "
        f"{plain_s / cached_s:.1f}x | {'yes' if cached == plain else 'NO'} |",
        flush=True,
    )


if __name__ == "__main__":
    main()
