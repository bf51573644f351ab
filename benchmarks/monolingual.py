"""Back-translation and distillation at equal budgets (the figures of docs/monolingual.md), run
through the `vaswani` command as a user runs it; every arm's test BLEU and its time by stage.

backtranslation: for each budget T (minutes), a baseline trained T minutes on the parallel pairs,
against an arm that spends the same T on a reverse model (--reverse-share of T, trained on the
pairs with their columns swapped), back-translation of --mono (--bt-share of T, --method) and the
forward model (the rest) on the pairs plus the synthetic ones (--weight: synthetic pairs used at
most as many as the real ones). The held-out pairs (--heldout, valid and test text of the corpus
the pairs come from) are given to every `prepare`, so that each arm has the same valid and test
splits (a pair's split is a hash of its text). The reverse model holds out 2% of the pairs to
validate on, and no test split.

    python benchmarks/monolingual.py backtranslation --pairs par6k.tsv --heldout heldout.tsv \
        --mono mono.de --src-lang en --tgt-lang de --budgets 5 15 30 --out work/

distillation: a teacher run translates a prepared dataset's training sources (`vaswani
distill`); tiny and mini students trained --minutes on the distilled data and on the references;
each scored on the test split, and its int8 decoding speed next to the teacher's.

    python benchmarks/monolingual.py distillation --teacher RUN --data DATA --minutes 8 --out work/

Each stage is a separate process with this process's environment: OMP_NUM_THREADS=1 and `taskset`
give side-by-side arms a core each.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

VASWANI = [sys.executable, "-m", "vaswani.cli"]


def vaswani(*args: str, log: Path) -> tuple[str, float]:
    """Run `vaswani ARGS`, its output kept in `log`; its stdout and seconds."""
    start = time.perf_counter()
    done = subprocess.run([*VASWANI, *args], capture_output=True, text=True)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"vaswani {' '.join(args)} failed; see {log}")
    return done.stdout, time.perf_counter() - start


def bleu(run: Path, log: Path, *extra: str) -> tuple[float, str]:
    """Test BLEU of a run and its decoding line (`vaswani evaluate`)."""
    out, _ = vaswani("evaluate", "--checkpoint", str(run), "--split", "test", *extra, log=log)
    decoding = next((line for line in out.splitlines() if line.startswith("decoding")), "")
    return float(re.search(r"^BLEU = ([\d.]+)", out, re.M).group(1)), decoding


def swapped(pairs: Path, out: Path) -> Path:
    lines = pairs.read_text(encoding="utf-8").splitlines()
    out.write_text("".join("\t".join(line.split("\t")[::-1]) + "\n" for line in lines))
    return out


def backtranslation(args: argparse.Namespace) -> None:
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    langs = ["--src-lang", args.src_lang, "--tgt-lang", args.tgt_lang]
    langs += ["--valid-fraction", args.valid_fraction, "--test-fraction", args.test_fraction]
    reverse_langs = ["--src-lang", args.tgt_lang, "--tgt-lang", args.src_lang]
    data = out / "data"
    vaswani(
        "prepare",
        str(args.pairs),
        str(args.heldout),
        "--out",
        str(data),
        *langs,
        "--force",
        log=out / "prepare.log",
    )
    reverse_data = out / "reverse-data"
    vaswani(
        "prepare",
        str(swapped(args.pairs, out / "reverse.tsv")),
        "--out",
        str(reverse_data),
        *reverse_langs,
        "--valid-fraction",
        "0.02",
        "--test-fraction",
        "0",
        "--force",
        log=out / "reverse-prepare.log",
    )
    print(
        "| budget | baseline BLEU | with back-translation BLEU | reverse / BT / forward minutes |"
    )
    print("| ---: | ---: | ---: | --- |")
    for budget in args.budgets:
        arm = out / f"{budget:g}"
        arm.mkdir(exist_ok=True)
        train(data, arm / "baseline", budget, arm / "baseline.log")
        base, _ = bleu(arm / "baseline", arm / "baseline-eval.log")
        minutes = [budget * args.reverse_share, budget * args.bt_share]
        minutes.append(budget - sum(minutes))
        start = time.perf_counter()
        train(reverse_data, arm / "reverse", minutes[0], arm / "reverse.log")
        synthetic = arm / "bt.tsv"
        vaswani(
            "backtranslate",
            "--checkpoint",
            str(arm / "reverse"),
            "--input",
            str(args.mono),
            "--output",
            str(synthetic),
            "--method",
            args.method,
            "--max-minutes",
            f"{minutes[1]}",
            "--force",
            log=arm / "bt.log",
        )
        real = len(args.pairs.read_text(encoding="utf-8").splitlines())
        made = max(1, len(synthetic.read_text(encoding="utf-8").splitlines()))
        vaswani(
            "prepare",
            str(args.pairs),
            str(args.heldout),
            "--back-translated",
            str(synthetic),
            "--weight",
            f"{synthetic}={min(1.0, real / made):.3f}",
            "--out",
            str(arm / "bt-data"),
            *langs,
            "--force",
            log=arm / "bt-prepare.log",
        )
        left = budget - (time.perf_counter() - start) / 60  # what the reverse side really took
        train(arm / "bt-data", arm / "forward", left, arm / "forward.log")
        with_bt, _ = bleu(arm / "forward", arm / "forward-eval.log")
        spent = f"{minutes[0]:.1f} / {minutes[1]:.1f} / {left:.1f}"
        print(f"| {budget:g} min | {base:.2f} | {with_bt:.2f} | {spent} |", flush=True)


def train(data: Path, run: Path, minutes: float, log: Path, *extra: str) -> None:
    """`vaswani train` of `data` into `run` for `minutes` (no calibration: it is not timed)."""
    vaswani(
        "train",
        "--data",
        str(data),
        "--out",
        str(run),
        "--max-minutes",
        f"{minutes:.3f}",
        "--no-calibrate",
        *extra,
        log=log,
    )


def distillation(args: argparse.Namespace) -> None:
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    kd = out / "kd"
    _, seconds = vaswani(
        "distill",
        "--teacher",
        str(args.teacher),
        "--data",
        str(args.data),
        "--out",
        str(kd),
        "--force",
        log=out / "distill.log",
    )
    print(f"teacher's translations of the training sources: {seconds:.0f} s")
    teacher, speed = bleu(args.teacher, out / "teacher-int8.log", "--quantize", "int8")
    print(f"teacher: BLEU {teacher:.2f}; int8 {speed}")
    print("| student | on references | on the teacher's translations | int8 decoding |")
    print("| --- | ---: | ---: | --- |")
    for preset in args.presets:
        found = {}
        for name, data in (("references", args.data), ("teacher", kd)):
            run = out / f"{preset}-{name}"
            train(data, run, args.minutes, out / f"{run.name}.log", "--preset", preset)
            found[name] = bleu(run, out / f"{run.name}-eval.log", "--quantize", "int8")
        print(
            f"| {preset} | {found['references'][0]:.2f} | {found['teacher'][0]:.2f} | "
            f"{found['teacher'][1]} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    bt = sub.add_parser("backtranslation")
    bt.add_argument("--pairs", type=Path, required=True, help="parallel TSV (source, target)")
    bt.add_argument("--heldout", type=Path, required=True, help="valid and test pairs, TSV")
    bt.add_argument("--mono", type=Path, required=True, help="text in the target language")
    bt.add_argument("--src-lang", required=True)
    bt.add_argument("--tgt-lang", required=True)
    bt.add_argument("--valid-fraction", default="0.01", help="prepare's, for every arm")
    bt.add_argument("--test-fraction", default="0.01", help="prepare's, for every arm")
    bt.add_argument("--budgets", type=float, nargs="+", default=[5, 15, 30])
    bt.add_argument("--reverse-share", type=float, default=0.33)
    bt.add_argument("--bt-share", type=float, default=0.1)
    bt.add_argument("--method", default="beam", choices=("beam", "sample", "noised"))
    bt.add_argument("--out", type=Path, required=True)
    kd = sub.add_parser("distillation")
    kd.add_argument("--teacher", type=Path, required=True)
    kd.add_argument("--data", type=Path, required=True)
    kd.add_argument("--presets", nargs="+", default=["tiny", "mini"])
    kd.add_argument("--minutes", type=float, default=8)
    kd.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    (backtranslation if args.what == "backtranslation" else distillation)(args)


if __name__ == "__main__":
    main()
