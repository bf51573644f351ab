"""Decoding speed of vaswani next to Hugging Face `MarianMTModel.generate`, in one run.

Both sides hold the same model: a post-norm encoder-decoder with sinusoidal positions and scaled,
tied embeddings (the architecture of the paper and of OPUS-MT; vaswani set to Marian's
sines-then-cosines position layout), vaswani's randomly initialised weights copied into a
`MarianMTModel` with the import's name mapping reversed (the script checks that their logits
agree before timing). Every run decodes a batch of
sources with a fixed number of new tokens (end-of-sentence forbidden until then, stopped there),
greedy and with beam 4, in fp32 and in what `--precision auto` picks here (both models cast to it),
and reports new target tokens per second
(batch x new tokens / seconds; for beams, tokens of the returned best hypotheses).

A second set of rows decodes with a model imported from Hugging Face's format: a randomly
initialised MarianMTModel of OPUS-MT's usual shape (6+6 layers, d_model 512, SiLU, 58,101 tokens)
is saved with save_pretrained, converted by `vaswani.marian` as `vaswani import-marian` does, and
timed against the same saved model loaded back into transformers.

In fp32 each row also times vaswani with its float32 matrix products on oneDNN instead of MKL
(what `--precision auto` may choose, `vaswani.kernels`), vaswani with int8 weights (`--quantize
int8`), vaswani with a lexical shortlist (`--shortlist`; fp32 weights) and CTranslate2 (fp32 and
int8) on the same weights,
written by `vaswani export --to ctranslate2`'s spec builder; CTranslate2 runs with as many threads as
vaswani, one batch, the same forced lengths, over the full vocabulary. Random weights have no
lexicon to learn a shortlist from, so the benchmark's lists are drawn at random, as large as stated
(`--shortlist-frequent` tokens for every sentence plus `--shortlist-per-token` per source token);
what a real table keeps, and what it costs in BLEU, `vaswani shortlist` and `evaluate --shortlist`
report on real data. generate and CTranslate2 score every token.

    pip install -e .[bench]      # transformers and ctranslate2, for the references only
    python benchmarks/decode_speed.py [--batch 32] [--src-len 24] [--new 64 128 256] [--imported-new 64]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from vaswani import ModelConfig, Transformer, export, kernels
from vaswani.config import DecodeConfig
from vaswani.decoding.quantize import quantize
from vaswani.decoding.search import decode
from vaswani.decoding.shortlist import Shortlist
from vaswani.device import DTYPES, benchmark_setting
from vaswani.export import save_ctranslate2
from vaswani.marian import load_marian_model, model_config


def opus_mt_shape() -> ModelConfig:
    """OPUS-MT's usual shape (e.g. opus-mt-de-en): 6+6 layers, d_model 512, SiLU, 58k vocabulary."""
    return ModelConfig(
        vocab_size=58101,
        activation="silu",
        sinusoid_layout="halves",
        max_len=512,
        dropout=0.0,
        pad_id=58100,
        bos_id=58100,
        eos_id=0,
    )


def marian_config(cfg: ModelConfig):
    from transformers import MarianConfig

    return MarianConfig(**{**export.marian_config(cfg), "dropout": 0.0})


def marian_copy(model: Transformer):
    """A transformers `MarianMTModel` with `model`'s weights, as `vaswani export --to
    huggingface` writes them."""
    from transformers import MarianMTModel

    hf = MarianMTModel(marian_config(model.cfg)).eval()
    hf.load_state_dict(export.marian_tensors(model), strict=True)
    return hf


def opus_sized_import(cfg: ModelConfig, directory: Path):
    """A randomly initialised MarianMTModel of OPUS-MT's usual shape, saved with save_pretrained,
    and the vaswani model that `vaswani.marian` converts it into (the import path, minus the
    tokenizer files a decoding benchmark does not need)."""
    from transformers import MarianMTModel

    hf = MarianMTModel(marian_config(cfg)).eval()
    with torch.no_grad():
        hf.final_logits_bias.normal_(0.0, 0.1)
    hf.save_pretrained(directory)
    hf_config = json.loads((directory / "config.json").read_text())
    imported = load_marian_model(directory, model_config(hf_config))
    return imported.eval(), MarianMTModel.from_pretrained(directory).eval()


def random_shortlist(cfg: ModelConfig, src: torch.Tensor, frequent: int, per_token: int):
    """A shortlist of random target tokens (see the docstring), and its size for `src` in words."""
    generator = torch.Generator().manual_seed(1)
    usable = torch.tensor([t for t in range(cfg.target_vocab_size) if t != cfg.pad_id])
    draw = torch.randint(usable.numel(), (cfg.vocab_size, per_token), generator=generator)
    per_source = usable[draw]
    per_source[cfg.pad_id] = -1
    picked = usable[torch.randperm(usable.numel(), generator=generator)[:frequent]]
    shortlist = Shortlist(torch.cat([picked, torch.tensor([cfg.eos_id])]).unique(), per_source)
    tokens, allowed = shortlist.allowed(src)
    size = (
        f"shortlist: {tokens.numel():,} of {cfg.target_vocab_size:,} tokens scored per step for "
        f"the batch, {allowed.sum(dim=1).float().mean():,.0f} per sentence"
    )
    return shortlist, size


def timed(repeats: int, fn, *args, **kwargs) -> tuple[float, object]:
    """Best wall time of `repeats` calls of fn(*args, **kwargs), and its result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best, out


def agreement(model: Transformer, hf, src: torch.Tensor) -> float:
    """Largest |logit difference| of the two models on `src` and random targets (fp32)."""
    cfg = model.cfg
    tgt = torch.randint(4, cfg.vocab_size, (src.size(0), 16))
    tgt[:, 0] = cfg.bos_id
    ours = model(src, tgt)
    theirs = hf(input_ids=src, attention_mask=torch.ones_like(src), decoder_input_ids=tgt).logits
    gap = (ours - theirs).abs().max().item()
    if gap > 1e-3:
        raise RuntimeError(f"the two models disagree: max |logit difference| {gap:.2e}")
    return gap


class CT2:
    """The same weights in CTranslate2 (fp32 and int8), through `vaswani export`'s spec builder.

    On a CPU it is timed in a process of its own (`times`): after CTranslate2 has run in a
    process, its idle threads slowed PyTorch's decoding there by a third (3,200 -> 2,200 tok/s,
    small preset, beam 4, 2 cores), which would bias every row measured after it."""

    def __init__(
        self, model: Transformer, directory: Path, threads: int, device: str = "cpu"
    ) -> None:
        self.vocab = [f"t{i}" for i in range(model.cfg.vocab_size)]
        self.directories = {q: str(directory / q) for q in ("float32", "int8")}
        for quantization, out in self.directories.items():
            save_ctranslate2(model, self.vocab, self.vocab, Path(out), quantization)
        self.threads, self.device, self.translators = threads, device, {}

    def decode(self, quantization: str, src: torch.Tensor, beams: int, new: int) -> list:
        """Translate in this process (a GPU's: no CPU threads to contend with)."""
        import ctranslate2

        if quantization not in self.translators:
            self.translators[quantization] = ctranslate2.Translator(
                self.directories[quantization],
                device=self.device,
                intra_threads=self.threads,
                inter_threads=1,
            )
        return ct2_translate(self.translators[quantization], self.vocab, src.tolist(), beams, new)

    def times(self, src: torch.Tensor, jobs: list[tuple[str, int, int]], repeats: int) -> dict:
        """Best seconds of each (quantization, beams, new tokens) job, in a process of its own."""
        import concurrent.futures
        import multiprocessing

        spawn = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
            return pool.submit(
                ct2_times, self.directories, self.vocab, src.tolist(), jobs, self.threads, repeats
            ).result()


def ct2_translate(translator, vocab: list[str], rows: list[list[int]], beams: int, new: int):
    # Sources without their end-of-sentence token: the exported config adds it.
    tokens = [[vocab[i] for i in row[:-1]] for row in rows]
    return translator.translate_batch(
        tokens,
        beam_size=beams,
        max_decoding_length=new,
        min_decoding_length=new,
        length_penalty=0.6 if beams > 1 else 1.0,
        max_batch_size=0,
    )


def ct2_times(directories, vocab, rows, jobs, threads, repeats) -> dict:  # noqa: ANN001
    """`CT2.times` in the child process: CTranslate2 alone."""
    import ctranslate2

    translators = {
        q: ctranslate2.Translator(path, device="cpu", intra_threads=threads, inter_threads=1)
        for q, path in directories.items()
    }
    found = {}
    for quantization, beams, new in jobs:
        found[quantization, beams, new] = timed(
            repeats, ct2_translate, translators[quantization], vocab, rows, beams, new
        )[0]
    return found


def generate_fixed(hf, src: torch.Tensor, beams: int, new: int, pad: int) -> torch.Tensor:
    """transformers' generate making exactly `new` tokens, as vaswani is timed (padding never
    generated, as vaswani never outputs it)."""
    return hf.generate(
        input_ids=src,
        attention_mask=torch.ones_like(src),
        num_beams=beams,
        do_sample=False,
        max_new_tokens=new,
        min_new_tokens=new,
        length_penalty=0.6 if beams > 1 else 1.0,
        early_stopping=False,
        bad_words_ids=[[pad]],
    )


def compare(label: str, model: Transformer, hf, src: torch.Tensor, args, news: list[int], ct2=None):
    """Table rows: each precision x search x number of new tokens; returns vaswani's seconds.
    In fp32, also vaswani with int8 weights (--quantize int8), with a shortlist, and CTranslate2
    fp32 and int8."""
    seconds: dict[tuple[str, str, int], float] = {}
    pad = model.cfg.pad_id
    shortlist, size = random_shortlist(
        model.cfg, src, args.shortlist_frequent, args.shortlist_per_token
    )
    print(f"{label}: {size}", flush=True)
    jobs = [(q, beams, new) for q in ("float32", "int8") for beams in args.beams for new in news]
    ct2_seconds = ct2.times(src, jobs, args.repeats) if ct2 is not None else {}
    for precision in args.precisions:
        # bf16/fp16: both models' weights are cast once (autocast would cast them every step).
        dtype = DTYPES[precision]
        model, hf = model.to(dtype), hf.to(dtype)
        int8 = quantize(model, "int8", torch.device("cpu")) if precision == "fp32" else None
        for beams in args.beams:
            for new in news:
                dc = DecodeConfig(
                    beam_size=beams, max_new_tokens=new, min_new_tokens=new, batch_tokens=1 << 30
                )
                ours_s, found = timed(args.repeats, decode, model, src, dc)
                theirs_s, out = timed(args.repeats, generate_fixed, hf, src, beams, new, pad)
                assert all(len(h[0].tokens) == new for h in found)
                assert out.shape == (src.size(0), new + 1), out.shape
                tokens = src.size(0) * new
                extra = ["", "", "", "", ""]
                if int8 is not None:
                    if kernels.onednn_available():
                        with kernels.onednn_decoding(model, True):
                            t, _ = timed(args.repeats, decode, model, src, dc)
                        extra[0] = f"{tokens / t:,.0f}"
                    extra[1] = f"{tokens / timed(args.repeats, decode, int8, src, dc)[0]:,.0f}"
                    t, _ = timed(args.repeats, decode, model, src, dc, shortlist=shortlist)
                    extra[2] = f"{tokens / t:,.0f}"
                if ct2 is not None and int8 is not None:
                    for i, quantization in enumerate(("float32", "int8"), start=3):
                        extra[i] = f"{tokens / ct2_seconds[quantization, beams, new]:,.0f}"
                note = ""
                if beams == 1 and precision == "fp32":
                    same = sum(
                        h[0].tokens == row[1:].tolist() for h, row in zip(found, out, strict=True)
                    )
                    note = f" (same greedy output as generate for {same}/{src.size(0)})"
                search = "greedy" if beams == 1 else f"beam {beams}"
                seconds[precision, search, new] = ours_s
                print(
                    f"| {label} | {precision} | {search} | {new} | {tokens / ours_s:,.0f} | "
                    f"{extra[0]} | {extra[1]} | {extra[2]} | {tokens / theirs_s:,.0f} | "
                    f"{extra[3]} | {extra[4]} | {theirs_s / ours_s:.2f}x |{note}",
                    flush=True,
                )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--src-len", type=int, default=24)
    parser.add_argument("--new", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument(
        "--precisions", nargs="+", help="default: fp32 and what --precision auto picks here"
    )
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
    parser.add_argument("--shortlist-frequent", type=int, default=1000)
    parser.add_argument("--shortlist-per-token", type=int, default=10)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument(
        "--imported-new",
        type=int,
        nargs="*",
        default=[64],
        help="new tokens for the rows of an imported OPUS-MT-sized Marian model (none: skip)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    setting, precisions = benchmark_setting("cpu")
    args.precisions = args.precisions or precisions
    print(setting)

    cfg = ModelConfig.from_preset(
        args.preset,
        norm="post",
        sinusoid_layout="halves",
        dropout=0.0,
        max_len=max(args.new) + args.src_len + 8,
    )
    model = Transformer(cfg).eval()
    hf = marian_copy(model)
    src = torch.randint(4, cfg.vocab_size, (args.batch, args.src_len))
    src[:, -1] = cfg.eos_id
    gap = agreement(model, hf, src)
    print(
        f"{args.preset} (d_model {cfg.d_model}, {cfg.n_encoder_layers}+{cfg.n_decoder_layers} "
        f"layers, vocab {cfg.vocab_size}), batch {args.batch}, source {args.src_len} tokens, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}; "
        f"max |logit difference| {gap:.1e}"
    )
    print(
        "| model | precision | search | new tokens | vaswani tok/s | vaswani on oneDNN | "
        "vaswani int8 | vaswani + shortlist | generate | CT2 fp32 | CT2 int8 | vaswani / generate |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    work = Path(tempfile.mkdtemp())
    ct2 = CT2(model, work / "small", args.threads)
    seconds = compare(args.preset, model, hf, src, args, args.new, ct2)

    if args.imported_new:
        opus = opus_mt_shape()
        with tempfile.TemporaryDirectory() as directory:
            imported, hf = opus_sized_import(opus, Path(directory))
        src = torch.randint(2, 58100, (args.batch, args.src_len))
        src[:, -1] = opus.eos_id
        gap = agreement(imported, hf, src)
        print(f"imported OPUS-MT-sized Marian model: max |logit difference| {gap:.1e}", flush=True)
        ct2 = CT2(imported, work / "opus", args.threads)
        compare("imported opus-mt", imported, hf, src, args, args.imported_new, ct2)

    # Growth with length: doubling the new tokens should cost about twice as much (target <= 2.2x).
    for (precision, search, new), ours_s in seconds.items():
        if (precision, search, 2 * new) in seconds:
            ratio = seconds[precision, search, 2 * new] / ours_s
            print(f"vaswani {precision} {search}: {2 * new} tokens cost {ratio:.2f}x {new} tokens")


if __name__ == "__main__":
    with torch.no_grad():
        main()
