"""Held-out BLEU and chrF against training minutes: the old defaults against the new ones.

For each budget (minutes) and each arm, `vaswani prepare` (once per arm), `vaswani train
--max-minutes M` and `vaswani evaluate --split test` (beam 4) run as a user would type them; a
schedule that knows its end trains differently for every budget, so every budget is its own run.

Arms (add your own with --arm NAME="PREPARE FLAGS|TRAIN FLAGS"):
  old   the defaults before budgeted training: 8,000-token vocabulary, the small preset, the
        paper's inverse-square-root schedule (warm-up 1,000, scale 2), no weight average
  new   the defaults: no flags at all

With --side-by-side the arms of a budget run at the same time, one thread each, so that both see
the same machine (on 2 cores: one core each); otherwise one after the other with every core.

    python benchmarks/learning_curve.py CORPUS --minutes 1 5 10 20 --out bench/lc
    python benchmarks/learning_curve.py CORPUS --minutes 5 --arm "vocab8k=--vocab-size 8000|"

Writes OUT/results.jsonl (one record per run), OUT/table.md and OUT/learning_curve.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ARMS = {
    "old": ("--vocab-size 8000", "--preset small --schedule inverse-sqrt --ema-decay 0"),
    "new": ("", ""),
}
SCORE = re.compile(r"^(BLEU|chrF) = ([0-9.]+)", re.M)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def vaswani(*args: str, threads: int | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    command = [sys.executable, "-m", "vaswani.cli", *args]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(process: subprocess.Popen, what: str) -> str:
    output, _ = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"{what} failed ({process.returncode}):\n{output[-3000:]}")
    return output


def train_and_score(
    corpus: str, out: Path, arms: dict, minutes: float, threads: int | None, side_by_side: bool
) -> list[dict]:
    runs = {}
    started = {}
    for name, (_, train_flags) in arms.items():
        run = out / "runs" / f"{name}-{minutes:g}min"
        if (run / "train_config.json").exists():
            subprocess.run(["rm", "-rf", str(run)], check=True)
        args = [
            "train",
            "--data",
            str(out / "data" / name),
            "--out",
            str(run),
            "--max-minutes",
            str(minutes),
            *shlex.split(train_flags),
        ]
        started[name] = vaswani(*args, threads=threads)
        runs[name] = run
        if not side_by_side:
            finish(started[name], f"{name} training")
    results = []
    for name, process in started.items():
        log = finish(process, f"{name} training") if side_by_side else ""
        evaluated = finish(
            vaswani(
                "evaluate", "--checkpoint", str(runs[name]), "--split", "test", threads=threads
            ),
            f"{name} evaluation",
        )
        scores = dict(SCORE.findall(evaluated))
        steps = re.search(r"at step (\d+)", log)
        record = {
            "corpus": corpus,
            "arm": name,
            "minutes": minutes,
            "bleu": float(scores["BLEU"]),
            "chrf": float(scores["chrF"]),
            "steps": int(steps.group(1)) if steps else last_step(runs[name]),
            "threads": threads,
            "side_by_side": side_by_side,
            "cpu": cpu_name(),
            "capability": capability(),
        }
        results.append(record)
        print(json.dumps(record), flush=True)
    return results


def last_step(run: Path) -> int | None:
    steps = [json.loads(line).get("step") for line in (run / "metrics.jsonl").open()]
    return max((s for s in steps if s is not None), default=None)


def capability() -> str:
    import torch

    return torch.backends.cpu.get_cpu_capability()


def table(results: list[dict]) -> str:
    arms = list(dict.fromkeys(r["arm"] for r in results))
    lines = [
        "| corpus | minutes | " + " | ".join(f"{a} BLEU / chrF (updates)" for a in arms) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in arms) + " |",
    ]
    keys = sorted({(r["corpus"], r["minutes"]) for r in results})
    for corpus, minutes in keys:
        cells = []
        for arm in arms:
            found = [
                r
                for r in results
                if (r["corpus"], r["minutes"], r["arm"]) == (corpus, minutes, arm)
            ]
            cells.append(
                f"{found[-1]['bleu']:.2f} / {found[-1]['chrf']:.1f} ({found[-1]['steps']})"
                if found
                else "-"
            )
        lines.append(f"| {Path(corpus).name} | {minutes:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for corpus in sorted({r["corpus"] for r in results}):
        for arm in dict.fromkeys(r["arm"] for r in results):
            points = sorted(
                (r["minutes"], r["bleu"], r["chrf"])
                for r in results
                if r["corpus"] == corpus and r["arm"] == arm
            )
            if not points:
                continue
            minutes, bleu, chrf = zip(*points, strict=True)
            label = f"{Path(corpus).name}: {arm}"
            axes[0].plot(minutes, bleu, marker="o", label=label)
            axes[1].plot(minutes, chrf, marker="o", label=label)
    for axis, name in zip(axes, ("test BLEU", "test chrF"), strict=True):
        axis.set_xlabel("training minutes")
        axis.set_ylabel(name)
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.suptitle(f"{cpu_name()} ({capability()})", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", help="a built-in corpus name or a TSV file, as for prepare")
    parser.add_argument("--out", type=Path, default=Path("bench/learning-curve"))
    parser.add_argument("--minutes", type=float, nargs="+", default=[1, 5, 10, 20])
    parser.add_argument("--arms", nargs="*", default=list(ARMS), help="which built-in arms to run")
    parser.add_argument(
        "--arm",
        action="append",
        default=[],
        metavar='NAME="PREP|TRAIN"',
        help="an extra arm: prepare flags and train flags, split by |",
    )
    parser.add_argument("--prepare", default="", help="flags for prepare in every arm")
    parser.add_argument(
        "--side-by-side",
        action="store_true",
        help="run the arms of a budget at once, one thread each",
    )
    args = parser.parse_args()
    arms = {name: ARMS[name] for name in args.arms}
    for item in args.arm:
        name, _, flags = item.partition("=")
        prepare_flags, _, train_flags = flags.partition("|")
        arms[name] = (prepare_flags, train_flags)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (prepare_flags, _) in arms.items():
        data = args.out / "data" / name
        if not (data / "meta.json").exists():
            flags = [*shlex.split(args.prepare), *shlex.split(prepare_flags)]
            finish(
                vaswani("prepare", args.corpus, "--out", str(data), "--force", *flags),
                f"{name} prepare",
            )
    threads = 1 if args.side_by_side else None
    results_path = args.out / "results.jsonl"
    started = time.perf_counter()
    for minutes in args.minutes:
        for record in train_and_score(
            args.corpus, args.out, arms, minutes, threads, args.side_by_side
        ):
            with results_path.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
    results = [json.loads(line) for line in results_path.open()]
    (args.out / "table.md").write_text(table(results) + "\n")
    plot(results, args.out / "learning_curve.png")
    print(table(results))
    print(f"{time.perf_counter() - started:.0f}s; {cpu_name()}, capability {capability()}")


if __name__ == "__main__":
    main()
