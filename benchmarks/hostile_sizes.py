"""The large hostile files of round 5, translated end to end as a user runs them (`vaswani
translate --checkpoint RUN --input FILE --output OUT`), each in a child process: its wall time,
peak resident memory and exit status. `--src` times another checkout's code on the same files
(a `git worktree` of the commit before a change), so that before and after are one run.

- table-unique.md: a Markdown table of 20,000 columns, every cell different;
- table-repeated.md: 20,000 columns whose cells repeat (a spreadsheet's);
- cues-sentences.srt: a million cues, each a sentence that comes again ("four two.");
- cues-unended.srt: a million cues that never end a sentence (no punctuation at all).

    python benchmarks/hostile_sizes.py --checkpoint RUN [--src OTHER/src] [--only NAME]
        [--timeout 600]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def row(values: list[str]) -> str:
    return "|" + "|".join(f" {v} " for v in values) + "|\n"


def table(cells: list[str]) -> str:
    return row([f"c{k}" for k in range(len(cells))]) + row(["---"] * len(cells)) + row(cells)


def cues(count: int, text: str) -> str:
    blocks = []
    for i in range(1, count + 1):
        h, m, s = i // 3600 % 100, i // 60 % 60, i % 60
        blocks.append(f"{i}\n{h:02d}:{m:02d}:{s:02d},000 --> {h:02d}:{m:02d}:{s:02d},500\n{text}\n")
    return "\n".join(blocks)


FILES = {
    "table-unique.md": lambda: table([f"four {k}" for k in range(20_000)]),
    "table-repeated.md": lambda: table([("four", "two", "seven")[k % 3] for k in range(20_000)]),
    "cues-sentences.srt": lambda: cues(1_000_000, "four two."),
    "cues-unended.srt": lambda: cues(1_000_000, "four two"),
}


def timed(command: list[str], env: dict, timeout: float) -> tuple[float, float, str]:
    """Wall seconds, the child's peak resident MiB, and how it ended."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        ended = f"exit {done.returncode}" + (
            f": {done.stderr.strip()[-120:]}" * bool(done.returncode)
        )
    except subprocess.TimeoutExpired:
        ended = f"still running after {timeout:.0f} s (stopped)"
    seconds = time.perf_counter() - start
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, ended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a run directory to translate with")
    parser.add_argument("--src", help="another checkout's src/ to time instead of this one's")
    parser.add_argument("--only", choices=sorted(FILES), action="append")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    src = Path(args.src).resolve() if args.src else ROOT / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "LIMIT": str(args.timeout)}
    print(f"code: {src}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or FILES:
            path = Path(tmp) / name
            path.write_text(FILES[name]())
            out = Path(tmp) / f"out-{name}"
            command = [sys.executable, "-m", "vaswani.cli", "translate", "--checkpoint"]
            command += [args.checkpoint, "--input", str(path), "--output", str(out)]
            # each in a child of its own: RUSAGE_CHILDREN's peak is the largest child's so far
            probe = [sys.executable, "-c", _CHILD, *command]
            result = subprocess.run(probe, env=env, capture_output=True, text=True)
            print(f"{name} ({path.stat().st_size / 1e6:.1f} MB): {result.stdout.strip()}")
            path.unlink()
            out.unlink(missing_ok=True)


_CHILD = f"""
import os, sys
sys.path.insert(0, {str(ROOT / "benchmarks")!r})
from hostile_sizes import timed
seconds, peak, ended = timed(sys.argv[1:], dict(os.environ), float(os.environ.get("LIMIT", 600)))
print(f"{{seconds:.1f}} s, peak {{peak:.0f}} MiB, {{ended}}")
"""


if __name__ == "__main__":
    main()
