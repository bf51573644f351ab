"""Filters on pairs, each counting what it drops by reason (meta.json "dropped_while_reading").

Real corpora are dirty: the source copied as the target, the same pair many times over with other
spaces or capitals, and sentences of the test set inside the training data, which inflate every
score. `prepare` drops:
  - copies: a pair whose target equals its source once normalised (translation only);
  - duplicates: a pair seen before, exactly or once normalised (`dedupe`);
  - contamination: a training pair whose source or target, normalised, is a source or target of
    the valid or test split, or a line of an `--exclude` file (an external test set);
  - length-ratio outliers (in tokens, training split only) are dropped while encoding.
Normalised: case folded, punctuation and symbols removed, runs of spaces made one.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from vaswani.data.corpora import decode_lines, read_lines

DEDUPE = ("normalised", "exact", "none")
_NOT_WORD = re.compile(r"[^\w\s]+")


def normalised(text: str) -> str:
    """`text` as duplicates and contamination compare it: "Hello,  World!" -> "hello world"."""
    return " ".join(_NOT_WORD.sub(" ", text.casefold()).split())


def digest(*texts: str) -> bytes:
    """A stable 16-byte fingerprint of `texts` (the same in every process and Python version):
    the sets of seen pairs hold these, not the text, so memory stays small at millions of pairs."""
    return hashlib.blake2b("\t".join(texts).encode(), digest_size=16).digest()


@dataclass
class PairFilter:
    """Copies and duplicates, decided pair by pair as the corpus streams past."""

    dedupe: str = "normalised"
    drop_copies: bool = True
    dropped: Counter = field(default_factory=Counter)
    seen: set[bytes] = field(default_factory=set)

    def keep(self, src: str, tgt: str) -> bool:
        norm = normalised(src), normalised(tgt)
        if self.drop_copies and norm[0] == norm[1]:
            self.dropped["copy of the source"] += 1
            return False
        if self.dedupe == "none":
            return True
        key = digest(*norm) if self.dedupe == "normalised" else digest(src, tgt)
        if key in self.seen:
            self.dropped["duplicate pair"] += 1
            return False
        self.seen.add(key)
        return True


def held_out_digests(texts: Iterable[str]) -> set[bytes]:
    """Fingerprints of the normalised non-empty `texts` (sides of the valid and test splits)."""
    return {digest(norm) for text in texts if (norm := normalised(text))}


def exclusion_digests(paths: Iterable[Path], max_line_bytes: int) -> set[bytes]:
    """Fingerprints of every line of each `--exclude` file (both columns of a TSV line)."""
    found: set[bytes] = set()
    for path in paths:
        for line in decode_lines(read_lines(Path(path), max_line_bytes), path):
            found |= held_out_digests(line.split("\t"))
    return found


def decontaminate(
    src: Path,
    tgt: Path,
    held_out: set[bytes],
    excluded: set[bytes],
    dropped: Counter,
    sides: tuple[str, ...] = ("src", "tgt"),
) -> int:
    """Rewrite the training text files `src`/`tgt` (one segment a line) without the pairs whose
    text on `sides` is held out (valid/test) or excluded; returns the pairs kept."""
    kept = 0
    new_src, new_tgt = (path.with_name(path.name + ".clean") for path in (src, tgt))
    with (
        open(src, encoding="utf-8", newline="\n") as read_src,
        open(tgt, encoding="utf-8", newline="\n") as read_tgt,
        open(new_src, "w", encoding="utf-8", newline="\n") as write_src,
        open(new_tgt, "w", encoding="utf-8", newline="\n") as write_tgt,
    ):
        for source, target in zip(read_src, read_tgt, strict=True):
            texts = [text for side, text in (("src", source), ("tgt", target)) if side in sides]
            keys = {digest(norm) for text in texts if (norm := normalised(text))}
            if keys & held_out:
                dropped["in the valid or test split"] += 1
            elif keys & excluded:
                dropped["in an --exclude file"] += 1
            else:
                write_src.write(source)
                write_tgt.write(target)
                kept += 1
    os.replace(new_src, src)
    os.replace(new_tgt, tgt)
    return kept


def ratio_outlier(src_tokens: int, tgt_tokens: int, max_ratio: float) -> bool:
    """Whether one side is over `max_ratio` times longer than the other, in tokens. Pairs whose
    longer side has under 10 tokens are never outliers: "OK" / "In Ordnung" is a fine pair."""
    longer, shorter = max(src_tokens, tgt_tokens), min(src_tokens, tgt_tokens)
    return max_ratio > 0 and longer >= 10 and longer > max_ratio * max(shorter, 1)
