"""`vaswani demo`: the whole system on data it makes itself, in a few CPU minutes.

Prepares the built-in `numbers-de` corpus (numbers as digits -> German number words, e.g.
271493 -> zweihunderteinundsiebzigtausendvierhundertdreiundneunzig), trains a small Transformer
on it with `vaswani train`'s loop, evaluates it on held-out numbers (exact match, sacreBLEU, chrF),
translates a few of them, and draws attention maps and training curves. Every step is the same
code the commands run; the run directory it leaves works with translate, evaluate, serve and plot.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from vaswani import plot
from vaswani.config import DecodeConfig, TrainConfig
from vaswani.data import PreparedData, PrepareOptions, prepare
from vaswani.decode import translate
from vaswani.evaluate import Scores, score
from vaswani.train.distributed import autocast, pick_device
from vaswani.train.loop import load_trained, train

MARKER = ".vaswani-demo"  # a directory holding this was made by the demo and may be replaced
# The `tiny` preset widened to 64 and without dropout (the corpus is large and regular, so dropout
# only slows learning): 99.9% exact match after 2,762 updates (2 CPU-minutes), 98.8% with dropout.
MODEL = {"d_model": 64, "d_ff": 256, "dropout": 0.0, "max_len": 64}


@dataclass
class DemoResult:
    directory: Path
    steps: int
    train_seconds: float
    exact_match: float
    scores: Scores
    examples: list[tuple[str, str, str]]  # source, reference, hypothesis
    pictures: list[Path]


def claim_directory(out: Path) -> None:
    """Create `out`, or empty it when an earlier demo made it; never touch anything else."""
    if out.exists():
        if not (out / MARKER).exists():
            raise ValueError(f"{out} exists and was not made by the demo; choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("made by `vaswani demo`; replaced when the demo runs again\n")


def run_demo(
    out: Path = Path("demo"),
    steps: int = 3000,
    precision: str = "bf16",
    seed: int = 0,
    device: str = "auto",
    progress: bool = True,
) -> DemoResult:
    out = Path(out)
    claim_directory(out)
    data_dir, run_dir = out / "data", out / "run"
    prepare(
        ["numbers-de"],
        data_dir,
        PrepareOptions(vocab_size=400, numbers_size=30_000, seed=seed, progress=progress),
    )
    tc = TrainConfig(
        data=str(data_dir),
        out=str(run_dir),
        preset="tiny",
        model=MODEL,
        max_tokens=2048,
        warmup=400,
        lr_scale=2.0,
        max_steps=steps,
        eval_every=1000,
        eval_sentences=200,
        save_every=1000,
        log_every=min(20, steps),
        precision=precision,
        seed=seed,
        device=device,
    )
    start = time.perf_counter()
    result = train(tc, progress=progress)
    train_seconds = time.perf_counter() - start

    # Validation BLEU picks "best" weights, and word BLEU is 0 on one-word targets: take the last.
    model, src_tok, tgt_tok, _ = load_trained(run_dir, weights="latest")
    run_on = pick_device(device)
    model.to(run_on)
    sources, references = PreparedData(data_dir).text("test")
    with autocast(run_on, precision):
        hypotheses = translate(model, src_tok, tgt_tok, sources, DecodeConfig())
    exact = sum(h == r for h, r in zip(hypotheses, references, strict=True)) / len(references)
    plot.attention(model, src_tok, tgt_tok, sources[0], out / "attention.png")
    plot.training(run_dir, out / "training.png")
    pictures = [out / f"attention-{kind}.png" for kind in ("encoder", "decoder", "cross")]
    pictures.append(out / "training.png")
    return DemoResult(
        directory=out,
        steps=result.step,
        train_seconds=train_seconds,
        exact_match=exact,
        scores=score(hypotheses, references, tokenize="char"),
        examples=list(zip(sources, references, hypotheses, strict=True))[:6],
        pictures=pictures,
    )
