"""`vaswani demo`: the whole system on data it makes itself, in a few CPU minutes.

Prepares the built-in `numbers-de` corpus (numbers as digits -> German number words, e.g.
271493 -> zweihunderteinundsiebzigtausendvierhundertdreiundneunzig), trains a small Transformer
on it with `vaswani train`'s loop, evaluates it on held-out numbers (exact match, sacreBLEU, chrF),
translates a few of them, and draws attention maps and training curves. Every step is the same
code the commands run; the run directory it leaves works with translate, evaluate, serve and plot.

`--multilingual`: the same with one model for many languages, on `numbers-multi` (digits -> German,
English, French and Spanish words, German -> English, English -> French), each source led by the
token of its target language; it also tries German -> French, a pair it never saw (zero-shot).
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vaswani import plot
from vaswani.config import TrainConfig
from vaswani.data import PreparedData, PrepareOptions
from vaswani.data.builtin import NUMBER_LANGUAGES, NUMBERS_MULTI_ZERO_SHOT, number_in, numbers_pair
from vaswani.device import pick_device
from vaswani.errors import VaswaniError
from vaswani.evaluate import by_pair
from vaswani.metrics import Scores, score
from vaswani.prepare import prepare
from vaswani.train.loop import train
from vaswani.translation.engine import Engine, load_run
from vaswani.translation.request import Request

MARKER = ".vaswani-demo"  # a directory holding this was made by the demo and may be replaced
# The `tiny` preset widened to 64 and without dropout (the corpus is large and regular, so dropout
# only slows learning).
MODEL = {"d_model": 64, "d_ff": 256, "dropout": 0.0, "max_len": 64}
# Measured on 2 cores in fp32 (AVX2; ATEN_CPU_CAPABILITY=avx2 on a Xeon), with the 1,511 test numbers:
#   batch_tokens 2048, 3000 steps, lr_scale 2, no clipping: 251 s, 100% exact, but a loss jump to 3.2
#       (grad norm 38) at step 1340
#   batch_tokens 1024, 2000 steps, lr_scale 1, warm-up 200, clip 1.0: 81 s, 99.8% exact, loss bumps
#       of at most 2.0 (lr_scale 0.5: 99.3%; adam_eps 1e-6: 98.5%; pre-norm: 99.5%)
# The bumps that remain are one batch: the shortest numbers (null, elf, zwölf, ...), rare in the
# corpus, keep a loss near 1.2 when every other batch is below 0.02.
# With the linear schedule and the weight average (AMD EPYC, AVX2, 2 cores): 87 s, 100% exact
# (the paper's schedule there: 93 s, 99.14%).
TRAINING = {
    "preset": "tiny",
    "model": MODEL,
    "batch_tokens": 1024,
    "warmup": 200,
    "lr_scale": 1.0,
    "clip_norm": 1.0,
    "eval_every": 1000,
    "eval_sentences": 200,
    "save_every": 1000,
}
# numbers-multi at the rate above: the model learnt to ignore its source (training loss flat near 2
# from update 200, validation chrF 45 after 3,000 updates, every source translated alike); at half
# the rate with twice the warm-up it learns (chrF 92 after 1,000 updates). AMD EPYC, AVX2, 2 cores.
MULTI_TRAINING = {**TRAINING, "warmup": 400, "lr_scale": 0.5}
MULTI_VOCAB = 1000  # four languages' number words (numbers-de alone: 400)


class DemoError(VaswaniError):
    """The demo's directory is something else's."""


@dataclass
class DemoResult:
    directory: Path
    steps: int
    train_seconds: float
    precision: str
    exact_match: float
    """The share of test numbers translated exactly (multilingual: that of the worst pair)."""
    scores: Scores
    examples: list[tuple[str, str, str]]  # source, reference, hypothesis
    pictures: list[Path]
    by_pair: dict[str, float] | None = None
    """Multilingual: each trained pair's exact match."""
    zero_shot: tuple[str, float, Scores, int] | None = None
    """Multilingual: the untrained pair, its exact match, its scores, and the numbers tried."""


def claim_directory(out: Path) -> None:
    """Create `out`, or empty it when an earlier demo made it; never touch anything else."""
    if out.exists():
        if not (out / MARKER).exists():
            raise DemoError(f"{out} exists and was not made by the demo; choose another --out")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("made by `vaswani demo`; replaced when the demo runs again\n")


@dataclass(frozen=True)
class DemoSettings:
    """What the demo trains and how (`vaswani demo`'s flags)."""

    steps: int = 2000
    precision: str = "auto"
    seed: int = 0
    device: str = "auto"
    progress: bool = True
    numbers: int = 30_000
    """Pairs of numbers-de (multilingual: of each pair of numbers-multi)."""
    multilingual: bool = False


def run_demo(out: Path = Path("demo"), settings: DemoSettings | None = None) -> DemoResult:
    """Prepare the demo's pairs (5% held out for the test), train, evaluate, translate and draw,
    all under `out`, as `settings` say."""
    out, settings = Path(out), settings or DemoSettings()
    claim_directory(out)
    data_dir, run_dir = out / "data", out / "run"
    multilingual, seed = settings.multilingual, settings.seed
    corpus, vocab = ("numbers-multi", MULTI_VOCAB) if multilingual else ("numbers-de", 400)
    options = PrepareOptions(
        vocab_size=vocab, numbers_size=settings.numbers, seed=seed, progress=settings.progress
    )
    prepare([corpus], data_dir, options)
    training = MULTI_TRAINING if multilingual else TRAINING
    tc = TrainConfig(
        data=str(data_dir),
        out=str(run_dir),
        max_steps=settings.steps,
        log_every=min(20, settings.steps),
        precision=settings.precision,
        seed=seed,
        device=settings.device,
        **training,
    )
    start = time.perf_counter()
    result = train(tc, progress=settings.progress)
    train_seconds = time.perf_counter() - start

    # best/: the weights of the best validation chrF (a character score, so it works on one-word
    # targets, where word BLEU is always 0).
    run = load_run(run_dir)
    run_on, _ = pick_device(settings.device)
    run.model.to(run_on)
    run.precision = result.precision  # decoded as trained
    data = PreparedData(data_dir)
    sources, references = data.text("test")
    targets = data.targets("test")
    hypotheses = run.translate(sources, Request(target=targets))
    exact = exact_share(hypotheses, references)
    found = DemoResult(
        directory=out,
        steps=result.step,
        train_seconds=train_seconds,
        precision=result.precision,
        exact_match=exact,
        scores=score(hypotheses, references, tokenize="char"),
        examples=list(zip(sources, references, hypotheses, strict=True))[:6],
        pictures=[out / f"attention-{kind}.png" for kind in ("encoder", "decoder", "cross")],
    )
    prefix = None
    if targets is not None:
        multilingual_results(found, run, data, hypotheses, seed)
        prefix = run.prefixes(targets[0], 1)[0]
    plot.attention(run, sources[0], out / "attention.png", prefix)
    plot.training(run_dir, out / "training.png")
    found.pictures.append(out / "training.png")
    return found


def multilingual_results(
    found: DemoResult, run: Engine, data: PreparedData, hypotheses: list[str], seed: int
) -> None:
    """A multilingual demo's figures: exact match by pair (the worst one counts), examples into
    every language, the zero-shot pair."""
    references = data.text("test")[1]
    per_pair = by_pair(hypotheses, references, data.pair_names("test"))
    found.by_pair = {name: figures["exact"] for name, figures in per_pair.items() if name != "mean"}
    found.exact_match = min(found.by_pair.values())
    found.examples = [
        (f"{source} ({target})", "", hypothesis)
        for source, target, hypothesis in multilingual_examples(run, seed)
    ]
    found.zero_shot = zero_shot(run, seed)


def exact_share(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    return sum(h == r for h, r in zip(hypotheses, references, strict=True)) / len(references)


def multilingual_examples(run: Engine, seed: int) -> list[tuple[str, str, str]]:
    """A number and a German number word, each into every language they are trained to go to."""
    number = random.Random(seed).randrange(1000, 1_000_000)
    examples = [(str(number), language) for language in NUMBER_LANGUAGES]
    examples.append((number_in(number, "de"), "en"))
    texts, targets = (list(column) for column in zip(*examples, strict=True))
    return list(zip(texts, targets, run.translate(texts, Request(target=targets)), strict=True))


ZERO_SHOT_NUMBERS = 500


def zero_shot(run: Engine, seed: int) -> tuple[str, float, Scores, int]:
    """The never-trained pair of numbers-multi (German -> French) on ZERO_SHOT_NUMBERS numbers."""
    pairs = list(numbers_pair(NUMBERS_MULTI_ZERO_SHOT, ZERO_SHOT_NUMBERS, seed + 1))
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    target = NUMBERS_MULTI_ZERO_SHOT.split("-")[1]
    hypotheses = run.translate(sources, Request(target=target))
    scores = score(hypotheses, references, tokenize="char")
    return NUMBERS_MULTI_ZERO_SHOT, exact_share(hypotheses, references), scores, len(sources)
