"""What `vaswani prepare` costs as a corpus grows: pairs per second and peak resident memory.

For each size (100k, 1M and 10M pairs by default) the script writes a TSV corpus of that many
pairs, runs `vaswani prepare` on it in a child process, and reports the wall time, pairs per
second and the peak resident memory of the whole process tree (the prepare process and any
workers it starts, sampled every 0.1 s from /proc), then how both grow from one size to the next.

The corpora are made of real sentence pairs: ding-de-en (Debian's trans-de-en) when installed,
else the LibreOffice German catalogs (libreoffice-l10n-de), else the built-in numbers-de. Each
generated pair joins two to four base pairs picked at random (the same picks on both sides), so
that the text, its vocabulary and its word lengths are real while the pairs stay distinct: the
cleaning has real work to do (and drops the few repeats the draw makes), not a corpus of copies.

    python benchmarks/prepare_scale.py [--sizes 100000 1000000 10000000] [--work DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vaswani.data.builtin import DING_PATH, ding_de_en, numbers_de
from vaswani.data.readers import ReadOptions, open_corpora

LIBREOFFICE_DE = Path("/usr/lib/libreoffice/program/resource/de")


def base_pairs() -> tuple[str, list[tuple[str, str]]]:
    """Real sentence pairs to build the corpora from, and what they are."""
    if DING_PATH.exists():
        name, pairs = "ding-de-en", ding_de_en(DING_PATH)
    elif LIBREOFFICE_DE.is_dir():
        parts = open_corpora([LIBREOFFICE_DE], ReadOptions(format="mo"))
        name, pairs = "LibreOffice de catalogs", (pair for part in parts for pair in part.pairs)
    else:
        name, pairs = "numbers-de", numbers_de(100_000, seed=0)
    kept = sorted({(s, t) for s, t in pairs if len(s.split()) >= 2 and len(t.split()) >= 2})
    if not kept:
        sys.exit(f"no usable base pairs in {name}")
    return name, kept


def write_corpus(path: Path, size: int, base: list[tuple[str, str]], seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for _ in range(size):
            picks = [base[rng.randrange(len(base))] for _ in range(rng.randint(2, 4))]
            src = " ".join(p[0] for p in picks).replace("\t", " ")
            tgt = " ".join(p[1] for p in picks).replace("\t", " ")
            out.write(f"{src}\t{tgt}\n")


def cpu_name() -> str:
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def tree_rss(root: int) -> int:
    """Resident bytes of process `root` and all its descendants, now."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def run_prepare(corpus: Path, out: Path, extra: list[str]) -> tuple[float, int, dict]:
    """Wall seconds, peak tree RSS in bytes, and meta.json of one `vaswani prepare` run."""
    command = [sys.executable, "-m", "vaswani", "prepare", str(corpus), "--out", str(out), *extra]
    start = time.perf_counter()
    child = subprocess.Popen(command)
    peak = 0
    while child.poll() is None:
        peak = max(peak, tree_rss(child.pid))
        time.sleep(0.1)
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        sys.exit(f"vaswani prepare failed with status {child.returncode}: {' '.join(command)}")
    meta = json.loads((out / "meta.json").read_text())
    return seconds, peak, meta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument(
        "--work",
        type=Path,
        help="where corpora and datasets go (a temporary "
        "directory by default; 10M pairs take about 2 GB)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the corpora and datasets")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("prepare_args", nargs="*", help="more `vaswani prepare` flags, after --")
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="prepare-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    name, base = base_pairs()
    print(f"base: {len(base):,} pairs of {name}; CPU: {cpu_name()}, {os.cpu_count()} cores")
    rows = []
    try:
        for size in args.sizes:
            corpus = work / f"corpus-{size}.tsv"
            started = time.perf_counter()
            write_corpus(corpus, size, base, args.seed)
            written = time.perf_counter() - started
            out = work / f"data-{size}"
            shutil.rmtree(out, ignore_errors=True)
            seconds, peak, meta = run_prepare(corpus, out, args.prepare_args)
            kept = sum(split["pairs"] for split in meta["splits"].values())
            row = {
                "pairs": size,
                "corpus_mb": round(corpus.stat().st_size / 1e6, 1),
                "seconds": round(seconds, 1),
                "pairs_per_s": round(size / seconds),
                "peak_rss_mib": round(peak / 2**20),
                "kept": kept,
                "vocab": meta["tokenizer"]["vocab_size"]["src"],
                "write_corpus_s": round(written, 1),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            if not args.keep:
                corpus.unlink()
                shutil.rmtree(out)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)

    print("\n| pairs | corpus MB | seconds | pairs/s | peak RSS MiB | time x | memory x |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for i, row in enumerate(rows):
        grow_t = grow_m = "-"
        if i:
            grow_t = f"{row['seconds'] / rows[i - 1]['seconds']:.1f}"
            grow_m = f"{row['peak_rss_mib'] / rows[i - 1]['peak_rss_mib']:.2f}"
        print(
            f"| {row['pairs']:,} | {row['corpus_mb']} | {row['seconds']} | "
            f"{row['pairs_per_s']:,} | {row['peak_rss_mib']:,} | {grow_t} | {grow_m} |"
        )


if __name__ == "__main__":
    main()
