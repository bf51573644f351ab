"""NLLB-200 and mBART-50 at their real shapes in vaswani, next to transformers and CTranslate2.

For each family a model of the published shape is randomly initialised by transformers
(NLLB-200 distilled 600M: d_model 1024, 12+12 layers, 16 heads, d_ff 4096, 256,206 tokens;
mBART-50: the same widths, 250,054 tokens, GELU, learned positions), saved with save_pretrained and
imported as `vaswani import-hf` imports it (weights; the tokenizer files, which are copied, are not
part of a speed test). Reported:

- import: seconds and the peak resident memory of a process that only imports;
- decoding: new target tokens per second of vaswani (fp32; on oneDNN; int8 weights; with a random
  shortlist of the stated size), transformers' generate (fp32, and int8 by PyTorch's dynamic
  quantization of its linear layers) and CTranslate2 (fp32 and int8, its own process), greedy and
  beam 4, a batch of `--batch` sources decoding exactly `--new` tokens each (the rows of
  `benchmarks/decode_speed.py`, whose machinery this uses);
- fine-tuning: one training update (Adam, as `vaswani train --init` makes it, label-smoothed loss
  through the fused output layer) of a batch of `--batch` pairs of `--src-len` tokens: seconds,
  target tokens per second and the peak resident memory of its process, with everything trained
  and with the shared embedding (42% of NLLB's weights) frozen.

    python benchmarks/hub_models.py [--families nllb mbart] [--batch 16] [--new 32]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import tempfile
import time
from pathlib import Path

import torch
from decode_speed import CT2, agreement, compare, timed

from vaswani.device import benchmark_setting
from vaswani.hub import model_config
from vaswani.marian import load_marian_model

SHAPES = {
    "nllb": dict(vocab_size=256206, activation_function="relu", scale_embedding=True),
    "mbart": dict(vocab_size=250054, activation_function="gelu", scale_embedding=True),
}


def hf_model(family: str):
    from transformers import (
        M2M100Config,
        M2M100ForConditionalGeneration,
        MBartConfig,
        MBartForConditionalGeneration,
    )

    shape = dict(
        d_model=1024,
        encoder_layers=12,
        decoder_layers=12,
        encoder_attention_heads=16,
        decoder_attention_heads=16,
        encoder_ffn_dim=4096,
        decoder_ffn_dim=4096,
        max_position_embeddings=1024,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_eos_token_id=None,
        dropout=0.1,
        **SHAPES[family],
    )
    if family == "mbart":
        return MBartForConditionalGeneration(MBartConfig(**shape)).eval()
    return M2M100ForConditionalGeneration(M2M100Config(**shape)).eval()


def peak_mib() -> float:
    """This process's peak resident memory (VmHWM: ru_maxrss would count its parent's peak, which
    a spawned process inherits on Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def import_alone(directory: str) -> tuple[float, float, float]:
    """In a process of its own: seconds to import, its peak resident MiB, and the MiB before."""
    torch.set_num_threads(torch.get_num_threads())
    before = peak_mib()
    start = time.perf_counter()
    config = json.loads((Path(directory) / "config.json").read_text())
    load_marian_model(Path(directory), model_config(config))
    return time.perf_counter() - start, peak_mib(), before


def fine_tune_alone(
    directory: str, batch: int, length: int, frozen: bool, threads: int, precision: str
) -> dict:
    """In a process of its own: one training update's seconds (the second of two) and peak MiB."""
    from vaswani.data.batching import Batch
    from vaswani.device import autocast
    from vaswani.tasks import TRANSLATE

    torch.set_num_threads(threads)
    config = json.loads((Path(directory) / "config.json").read_text())
    model = load_marian_model(Path(directory), model_config(config)).train()
    if frozen:
        model.decoder.embed.token.weight.requires_grad_(False)  # tied: encoder's and output's too
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    cfg = model.cfg
    src = torch.randint(4, cfg.vocab_size, (batch, length))
    src[:, -1] = cfg.eos_id
    tgt = torch.randint(4, cfg.vocab_size, (batch, length + 1))
    data = Batch(src, torch.cat([torch.full((batch, 1), cfg.bos_id), tgt[:, :-1]], 1), tgt)
    seconds = 0.0
    for _ in range(2):  # the first update also allocates the optimizer's state
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with autocast(torch.device("cpu"), precision):
            loss, _ = TRANSLATE.training_loss(model, data, cfg.pad_id, 0.1)
        (loss / data.tgt_out.numel()).backward()
        optimizer.step()
        seconds = time.perf_counter() - start
    tokens = data.tgt_out.numel()
    return {"seconds": seconds, "tokens_per_s": tokens / seconds, "peak_mib": peak_mib()}


def in_process(fn, *args):  # noqa: ANN001
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        return pool.submit(fn, *args).result()


def int8_generate_rows(hf, src: torch.Tensor, args) -> list[str]:  # noqa: ANN001
    """transformers' generate with its linear layers quantized to int8 (dynamic, PyTorch's)."""
    from decode_speed import generate_fixed

    quantized = torch.ao.quantization.quantize_dynamic(  # from fp32 (compare() may have cast it)
        hf.float(), {torch.nn.Linear}, dtype=torch.qint8
    )
    rows = []
    for beams in args.beams:
        for new in args.new:
            seconds, _ = timed(args.repeats, generate_fixed, quantized, src, beams, new, 1)
            search = "greedy" if beams == 1 else f"beam {beams}"
            rows.append(f"generate int8 {search} {new}: {src.size(0) * new / seconds:,.0f} tok/s")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=["nllb", "mbart"], choices=list(SHAPES))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--src-len", type=int, default=24)
    parser.add_argument("--new", type=int, nargs="+", default=[32])
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--precisions", nargs="+", default=["fp32"])
    parser.add_argument("--repeats", type=int, default=1, help="best of this many runs")
    parser.add_argument("--shortlist-frequent", type=int, default=1000)
    parser.add_argument("--shortlist-per-token", type=int, default=10)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--fine-tune-batch", type=int, default=16)
    parser.add_argument(
        "--fine-tune-precisions", nargs="*", default=["fp32", "bf16"], help="none: no fine-tuning"
    )
    parser.add_argument("--skip-decoding", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(benchmark_setting("cpu")[0], flush=True)
    work = Path(tempfile.mkdtemp())
    for family in args.families:
        torch.manual_seed(0)
        directory = work / family
        hf = hf_model(family)
        hf.save_pretrained(directory)
        seconds, peak, before = in_process(import_alone, str(directory))
        size = sum(p.stat().st_size for p in directory.iterdir()) / 2**30
        print(
            f"{family}: {sum(p.numel() for p in hf.parameters()) / 1e6:,.0f}M parameters, "
            f"{size:.2f} GiB saved; import {seconds:.1f} s, peak resident {peak:,.0f} MiB "
            f"({before:,.0f} MiB before reading)",
            flush=True,
        )
        for frozen, precision in [(f, p) for p in args.fine_tune_precisions for f in (False, True)]:
            sizes = (args.fine_tune_batch, args.src_len)
            found = in_process(
                fine_tune_alone, str(directory), *sizes, frozen, args.threads, precision
            )
            what = f"{precision}, " + ("embedding frozen" if frozen else "all weights")
            print(
                f"{family} fine-tuning, {what}: one update of {args.fine_tune_batch} x "
                f"{args.src_len} tokens {found['seconds']:.1f} s "
                f"({found['tokens_per_s']:,.0f} target tokens/s), peak resident "
                f"{found['peak_mib']:,.0f} MiB",
                flush=True,
            )
        if args.skip_decoding:
            continue
        config = json.loads((directory / "config.json").read_text())
        model = load_marian_model(directory, model_config(config)).eval()
        src = torch.randint(4, model.cfg.vocab_size - 2, (args.batch, args.src_len))
        src[:, -1] = model.cfg.eos_id
        print(f"{family}: max |logit difference| {agreement(model, hf, src):.1e}", flush=True)
        print(
            "| model | precision | search | new tokens | vaswani tok/s | vaswani on oneDNN | "
            "vaswani int8 | vaswani + shortlist | generate | CT2 fp32 | CT2 int8 | "
            "vaswani / generate |"
        )
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        ct2 = CT2(model, work / f"{family}-ct2", args.threads)
        compare(family, model, hf, src, args, args.new, ct2)
        for row in int8_generate_rows(hf, src, args):
            print(f"{family} {row}", flush=True)
        del model, hf, ct2


if __name__ == "__main__":
    with torch.no_grad():
        main()
