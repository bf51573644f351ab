"""Training with a time budget on a machine something else is using: the same run (the built-in
numbers-de corpus, `vaswani train --max-minutes M`) alone, beside one busy thread (a plain CPU
loop), and beside two (a 1-thread PyTorch training and a CPU loop), then `make demo`'s training
(a fixed number of updates) alone and beside one busy thread. Each row: wall time against the
budget, updates made, the updates first planned, the threads, precision, batch and dropout chosen,
the share of the time spent validating, the final validation chrF, how often the plan was fitted
again to the pace, and the test split's chrF (greedy, translated once the neighbours are stopped).

    python benchmarks/busy_machine.py [--minutes 5] [--out DIR] [--corpus numbers-de|PATH]
        [--only alone|one|two|demo]

--corpus is what `vaswani prepare` reads: a built-in corpus, or e.g. a folder of a language's
gettext catalogs (/usr/share/locale/es/LC_MESSAGES: English msgids, Spanish msgstrs).

The neighbours run as separate processes for the whole of each row and are stopped after it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VASWANI = [sys.executable, "-m", "vaswani.cli"]
LOOP = [sys.executable, "-c", "while True: pass"]


def torch_neighbour(data: Path, out: Path) -> list[str]:
    """A 1-thread PyTorch training of its own that outlasts any row."""
    return [*VASWANI, "train", "--data", str(data), "--out", str(out), "--max-minutes", "600"]


def neighbours(kind: str, data: Path, work: Path) -> list[subprocess.Popen]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    if kind == "one":
        return [subprocess.Popen(LOOP, **quiet)]
    if kind == "two":
        other = work / f"neighbour-{time.monotonic_ns()}"
        return [
            subprocess.Popen(torch_neighbour(data, other), **quiet),
            subprocess.Popen(LOOP, **quiet),
        ]
    return []


def summary(run: Path, wall: float, stderr: str, budget: float | None) -> dict:
    records = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    steps = [r["step"] for r in records if "loss" in r]
    chrf = [r["valid_chrf"] for r in records if "valid_chrf" in r]
    accounts = json.loads((run / "time.json").read_text())["seconds"]
    total = sum(accounts.values()) or wall
    planned = re.search(r"ends at update (\d+)", stderr)
    threads = re.search(r"(\d+) threads? \(([^)]*)\)", stderr)
    recipe = json.loads((run / "recipe.json").read_text())
    return {
        "wall_s": round(wall, 1),
        "budget_s": budget,
        "updates": steps[-1] if steps else 0,
        "planned": int(planned.group(1)) if planned else None,
        "threads": threads.group(0) if threads else None,
        "precision": json.loads((run / "environment.json").read_text())["precision"],
        "batch_tokens": recipe.get("batch", {}).get("batch_tokens"),
        "dropout": json.loads((run / "config.json").read_text())["dropout"],
        "changed_threads": [r["threads"] for r in records if "threads" in r],
        "validation_share": round(accounts.get("validation", 0.0) / total, 3),
        "chrf": chrf[-1] if chrf else None,
        "replanned": sum("replanned" in r for r in records),
        "skipped_validations": sum("skipped_validation" in r for r in records),
        "fewest_valid_sentences": min(
            (r.get("valid_sentences", 200) for r in records if "valid_chrf" in r), default=None
        ),
    }


def row(name: str, command: list[str], run: Path, kind: str, data: Path, work: Path, budget):
    others = neighbours(kind, data, work)
    time.sleep(2 if others else 0)  # the neighbours are running before the run starts
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - began
    for other in others:
        other.kill()
        other.wait()
    run.with_suffix(".log").write_text(done.stderr)  # what the run said, beside it
    if done.returncode != 0:
        print(f"{name}: exit {done.returncode}: {done.stderr.strip()[-300:]}", flush=True)
        return
    figures = {**summary(run, wall, done.stderr, budget), "test_chrf": test_chrf(run)}
    print(f"{name}: {json.dumps(figures)}", flush=True)


def test_chrf(run: Path) -> float | None:
    """chrF of the run's best weights on its data's test split, greedy (None: no score came)."""
    command = [*VASWANI, "evaluate", "--checkpoint", str(run), "--split", "test"]
    done = subprocess.run([*command, "--beam-size", "1"], capture_output=True, text=True)
    score = re.search(r"chrF = ([\d.]+)", done.stdout)
    return float(score.group(1)) if score else None


def demo(out: Path, kind: str, data: Path, work: Path) -> None:
    """`vaswani demo` (what `make demo` runs): its own training time, as it prints it."""
    others = neighbours(kind, data, work)
    time.sleep(2 if others else 0)
    done = subprocess.run([*VASWANI, "demo", "--out", str(out)], capture_output=True, text=True)
    for other in others:
        other.kill()
        other.wait()
    trained = re.search(r"trained (\d+) steps in (\d+)s", done.stdout)
    threads = re.search(r"(\d+) threads? \(([^)]*)\)", done.stderr)
    said = trained.group(0) if trained else f"exit {done.returncode}"
    print(f"demo, {kind}: {said}; {threads.group(0) if threads else ''}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder)")
    parser.add_argument("--corpus", default="numbers-de", help="what the runs train on")
    parser.add_argument("--only", choices=["alone", "one", "two", "demo"], action="append")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        data = work / "data"
        if not data.exists():
            subprocess.run([*VASWANI, "prepare", args.corpus, "--out", str(data)], check=True)
        machine = subprocess.run([*VASWANI, "env"], capture_output=True, text=True).stdout
        print(" | ".join(line.strip() for line in machine.splitlines()[4:8]), flush=True)
        budget = args.minutes * 60
        for kind in args.only or ["alone", "one", "two", "demo"]:
            if kind == "demo":
                for beside in ("alone", "one"):
                    demo(work / f"demo-{beside}", beside, data, work)
                continue
            run = work / f"run-{kind}"
            command = [*VASWANI, "train", "--data", str(data), "--out", str(run)]
            command += ["--max-minutes", str(args.minutes)]
            row(f"{args.minutes:g} minutes, {kind}", command, run, kind, data, work, budget)


if __name__ == "__main__":
    main()
