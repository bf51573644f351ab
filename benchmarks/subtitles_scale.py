"""How whole-file reading and writing scale: an SRT of a million cues (74 MB, each cue a sentence
with an <i> tag) read, translated by a stand-in (each text in upper case, its words aligned in
place) through `translate_documents` and written back, in a child process whose peak resident
memory is reported; with --checkpoint, also `vaswani translate --input FILE --output FILE` end to end on a
smaller file, as a user runs it.

    python benchmarks/subtitles_scale.py [--cues 1000000] [--checkpoint RUN --translate-cues 20000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def srt(cues: int) -> str:
    """`cues` cues of one sentence each, one second apart."""
    blocks = []
    for i in range(1, cues + 1):
        h, m, s = i // 3600, i // 60 % 60, i % 60
        blocks.append(
            f"{i}\n{h:02d}:{m:02d}:{s:02d},000 --> {h:02d}:{m:02d}:{s:02d},900\n"
            f"Line number {i} is <i>here</i>.\n"
        )
    return "\n".join(blocks)


def stages(path: str) -> None:
    """In a child: `path` read, its texts translated by the stand-in (a chunk at a time, as
    `translate_documents` does for a real model) and written back, timed; prints JSON."""
    sys.path.insert(0, str(ROOT / "src"))
    from vaswani.documents.formats import read_document, translate_documents

    def stand_in(texts: list[str], alignments: bool) -> tuple[list[str], list]:
        aligned = [[(i, i) for i in range(len(t.split()))] for t in texts]
        return [t.upper() for t in texts], aligned

    times, start = {}, time.perf_counter()
    # The file's bytes are not kept once read, as in `vaswani translate`.
    document = read_document(Path(path).read_bytes(), "srt", path)
    times["read"] = time.perf_counter() - start
    start = time.perf_counter()
    out = translate_documents([document], stand_in, "de")[0]
    times["translate and write"] = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"bytes out": len(out), **times, "peak MiB": peak}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cues", type=int, default=1_000_000)
    parser.add_argument("--checkpoint", help="a run: also translate a file end to end")
    parser.add_argument("--translate-cues", type=int, default=20_000)
    parser.add_argument("--stages", help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args()
    if args.stages:
        stages(args.stages)
        return
    with tempfile.TemporaryDirectory() as tmp:
        if args.checkpoint:  # first: a child's peak memory is the largest of all children's
            small = Path(tmp) / "small.srt"
            small.write_text(srt(args.translate_cues))
            command = [sys.executable, "-m", "vaswani", "translate", "--checkpoint"]
            command += [args.checkpoint, "--input", str(small), "--output", str(small) + ".de"]
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            seconds = time.perf_counter() - start
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            print(
                f"translate: {args.translate_cues:,} cues in {seconds:.1f} s "
                f"({args.translate_cues / seconds:,.0f} cues/s), peak {peak:.0f} MiB",
                flush=True,
            )
        big = Path(tmp) / "big.srt"
        big.write_text(srt(args.cues))
        print(f"{args.cues:,} cues, {big.stat().st_size / 1e6:.0f} MB", flush=True)
        child = [sys.executable, __file__, "--stages", str(big)]
        print(subprocess.run(child, capture_output=True, text=True, check=True).stdout.strip())


if __name__ == "__main__":
    main()
