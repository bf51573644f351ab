"""Word alignments of the training pairs (`prepare --word-alignments`), for guided alignment:
training one attention head to point at the source word each target word translates (Garg et
al. 2019), so that the model's own alignment places inline markup (`vaswani.documents`).

The aligner is eflomal (`pip install 'vaswani[align]'`: Bayesian IBM models with Markov chain
Monte Carlo, fast on CPUs). Each training pair is read back from its ids, split into words at
whitespace, aligned in both directions, and the links both directions agree on are written to
`train.align`, one line of Pharaoh pairs `i-j` per pair, in the order of the training split.
"""

from __future__ import annotations

import io
import tempfile
import time
from pathlib import Path

from vaswani.data.corpora import DataError
from vaswani.safe_io import DamagedFileError, member, read_text

FILE = "train.align"
MAX_LINK_BYTES = 1 << 20
"""The longest line of train.align: links of two sentences of the longest TSV line."""


def read_links(line: str) -> set[tuple[int, int]]:
    """The pairs of a line of Pharaoh links ("0-0 1-2"); ValueError for anything else."""
    links = set()
    for pair in line.split():
        i, dash, j = pair.partition("-")
        if not (dash and i.isdigit() and j.isdigit()):
            raise ValueError(f"{pair!r} is not a link SRC-TGT")
        links.add((int(i), int(j)))
    return links


def write_alignments(directory: Path, split: object, src_tok: object, tgt_tok: object) -> dict:
    """Align every pair of the training `split` (read back with its tokenizers) with eflomal;
    `directory`/train.align, and the record for meta.json."""
    try:
        import eflomal
    except ImportError:
        raise DataError(
            "word_alignments=True needs eflomal: pip install 'vaswani[align]' (or pip install eflomal)"
        ) from None
    start = time.perf_counter()
    sources, targets = [], []
    for i in range(len(split)):
        src, tgt = split.pair(i)
        sources.append(" ".join(src_tok.decode(src.tolist()).split()) or "<empty>")
        targets.append(" ".join(tgt_tok.decode(tgt.tolist()).split()) or "<empty>")
    with tempfile.TemporaryDirectory() as scratch:
        forward, reverse = Path(scratch) / "forward", Path(scratch) / "reverse"
        eflomal.Aligner().align(
            io.StringIO("\n".join(sources) + "\n"),
            io.StringIO("\n".join(targets) + "\n"),
            links_filename_fwd=str(forward),
            links_filename_rev=str(reverse),
        )
        lines = [
            " ".join(f"{i}-{j}" for i, j in sorted(read_links(f) & read_links(r)))
            for f, r in zip(
                read_text(forward, "eflomal's links").splitlines(),
                read_text(reverse, "eflomal's links").splitlines(),
                strict=True,
            )
        ]
    if len(lines) != len(sources):
        raise DataError(f"eflomal aligned {len(lines)} of {len(sources)} training pairs")
    (directory / FILE).write_text("".join(line + "\n" for line in lines))
    links = sum(len(line.split()) for line in lines)
    return {
        "aligner": "eflomal (links both directions agree on)",
        "pairs": len(lines),
        "links": links,
        "seconds": round(time.perf_counter() - start, 1),
    }


def load_alignments(directory: Path, pairs: int) -> list[str] | None:
    """The lines of `directory`/train.align (one for each of the `pairs` training pairs), or None
    when the data has none. Read line by line and bounded: a file with a line over
    MAX_LINK_BYTES or more lines than pairs is refused as soon as that is read."""
    path = Path(directory) / FILE
    if not path.is_file():
        return None
    lines = []
    with open(member(directory, FILE, "the word alignments"), "rb") as handle:
        while line := handle.readline(MAX_LINK_BYTES + 1):
            if len(line) > MAX_LINK_BYTES or len(lines) == pairs:
                problem = "a line too long" if len(lines) < pairs else f"over {pairs:,} lines"
                raise DamagedFileError(f"{path}:{len(lines) + 1}: {problem}; prepare again")
            try:
                lines.append(line.decode("utf-8").rstrip("\n"))
            except UnicodeDecodeError:
                raise DamagedFileError(
                    f"{path}:{len(lines) + 1}: not UTF-8; prepare again"
                ) from None
    return lines
