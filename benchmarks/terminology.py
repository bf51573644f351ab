"""Glossaries, confidence and translation memory measured on a prepared dataset's held-out splits
(the figures of docs/glossaries.md):

- glossary: the share of term occurrences whose target is in the output, with deliberately
  unusual targets (each source word that a bilingual dictionary knows given a random other
  dictionary word); BLEU with a glossary of terms the model already translates right (the
  dictionary's translation in both its output and the reference, somewhere in the test split),
  and with those of them whose target is in the reference of every test sentence that holds
  the term; beam search's time with a 1,000-term glossary against none. The dictionary is ding's (`apt-get install trans-de-en`).
- confidence: Spearman's correlation with sentence chrF on the test split of each candidate
  signal, of a calibration fitted on the validation split, and of one that also reads each
  translation back through the model (least probable token, entropy), with its cost in time.
- memory: the time of a file with no match in a memory of --memory-size entries, against none.

    python benchmarks/terminology.py --checkpoint RUN --data DATA [--side en] [--part all]

Translation runs in fp32 on this process's threads.
"""

from __future__ import annotations

import argparse
import collections
import random
import re
import time
from pathlib import Path

import numpy as np
import torch

from vaswani.config import DecodeConfig
from vaswani.data import PreparedData
from vaswani.decoding.confidence import fit, mean_probability, spearman
from vaswani.decoding.text import (
    Segments,
    TextModel,
    encode_sources,
    source_batch,
    translate_segments,
)
from vaswani.metrics import score, sentence_chrf
from vaswani.translation.engine import load_run
from vaswani.translation.glossary import Glossary, contains
from vaswani.translation.memory import Memory
from vaswani.translation.pipeline import best_texts
from vaswani.translation.request import Aids, Request

DING = Path("/usr/share/trans/de-en")
NOT_TERMS = {"the", "and", "for", "with", "this", "that", "der", "die", "das", "und", "mit", "den"}


def dictionary(side: str) -> dict[str, set[str]]:
    """ding's one-word entries: source word (lower case) -> its translations."""
    pairs: dict[str, set[str]] = collections.defaultdict(set)
    bare = re.compile(r"\{.*?\}|\[.*?\]|\(.*?\)")
    for line in DING.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or "::" not in line:
            continue
        german, english = line.split("::", 1)
        for de, en in zip(german.split("|"), english.split("|"), strict=False):
            de, en = bare.sub("", de).strip(), re.sub(r"^to ", "", bare.sub("", en).strip())
            if re.fullmatch(r"[A-Za-zÄÖÜäöüß]{3,}", de) and re.fullmatch(r"[A-Za-z]{3,}", en):
                source, target = (en, de) if side == "en" else (de, en)
                pairs[source.lower()].add(target)
    return pairs


def timed(loaded, texts: list[str], aids: Aids | None = None) -> tuple[list, float]:
    start = time.perf_counter()
    request = Request(too_long="truncate", aids=aids or Aids())
    found = loaded.translate_nbest(texts, request).found
    return found, time.perf_counter() - start


def glossary_part(loaded, src: list[str], ref: list[str], side: str) -> None:
    pairs = dictionary(side)
    base, seconds = timed(loaded, src)
    before = score(best_texts(base), ref)
    print(f"no glossary: BLEU {before.bleu:.2f} chrF {before.chrf:.2f} ({seconds:.1f} s)")
    rng = random.Random(0)
    others = sorted({t for ts in pairs.values() for t in ts})
    known = {w.lower() for s in src for w in re.findall(r"\w+", s)} & set(pairs) - NOT_TERMS
    words = sorted(known)
    rng.shuffle(words)
    unusual = Glossary.of((w, rng.choice(others)) for w in words[:300])
    found, _ = timed(loaded, src, Aids(unusual))
    terms = [(f[0].text, t, placed) for f in found if f for _, t, placed in f[0].terms]
    present = sum(contains(text, t, within=False) for text, t, _ in terms)
    print(
        f"unusual targets: {len(unusual)} terms, {len(terms)} occurrences; target in the output "
        f"{present} ({100 * present / max(len(terms), 1):.1f}%), reported placed "
        f"{sum(p for *_, p in terms)}, reported not placed {sum(not p for *_, p in terms)}"
    )
    right: collections.Counter = collections.Counter()
    for s, f, r in zip(src, base, ref, strict=True):
        for w in {w.lower() for w in re.findall(r"\w+", s)} - NOT_TERMS:
            for t in pairs.get(w, ()):
                if f and contains(f[0].text, t, within=False) and contains(r, t, within=False):
                    right[w, t] += 1
    chosen: dict[str, str] = {}
    for (w, t), _ in right.most_common():
        chosen.setdefault(w, t)
    # Consistent terms: the reference of every test sentence that holds the source word has it.
    holding = collections.defaultdict(list)
    for s, r in zip(src, ref, strict=True):
        for w in {w.lower() for w in re.findall(r"\w+", s)} & set(chosen):
            holding[w].append(r)
    consistent = {w: t for w, t in chosen.items() if all(contains(r, t) for r in holding[w])}
    for name, terms in (("already right", chosen), ("already right and consistent", consistent)):
        found, _ = timed(loaded, src, Aids(Glossary.of(terms.items())))
        after = score(best_texts(found), ref)
        print(
            f"terms {name}: {len(terms)} terms; BLEU {after.bleu:.2f} "
            f"({after.bleu - before.bleu:+.2f}), chrF {after.chrf:.2f} "
            f"({after.chrf - before.chrf:+.2f})"
        )
    thousand = dict(list(chosen.items())[:1000])
    for w in sorted(pairs):
        if len(thousand) >= 1000:
            break
        thousand.setdefault(w, sorted(pairs[w])[0])
    big = Glossary.of(thousand.items())
    plain = min(timed(loaded, src)[1] for _ in range(2))
    with_terms = min(timed(loaded, src, Aids(big))[1] for _ in range(2))
    hold = sum(1 for s in src if big.find(s))
    print(
        f"speed: beam 4 {plain:.2f} s, with a 1,000-term glossary {with_terms:.2f} s "
        f"({100 * (with_terms / plain - 1):+.1f}%); {hold} of {len(src)} sentences hold a term"
    )


@torch.no_grad()
def read_back(loaded, src: list[str], found: list) -> tuple[list[float], list[float], float]:
    """Each best translation's least token log-probability and mean entropy, read back
    teacher-forced; and the seconds it took."""
    start, model, cfg = time.perf_counter(), loaded.model, loaded.config
    encoded = encode_sources(loaded.src_tokenizer, Segments(src), cfg.max_len, "truncate")
    outputs = [loaded.tgt_tokenizer.encode_batch([f[0].text])[0][: cfg.max_len - 2] for f in found]
    least, entropy = [], []
    for start_row in range(0, len(src), 64):
        rows = range(start_row, min(start_row + 64, len(src)))
        batch = source_batch([encoded[i] for i in rows], cfg)
        width = max(len(outputs[i]) for i in rows) + 2
        tgt = torch.full((len(rows), width), cfg.pad_id, dtype=torch.long)
        for row, i in enumerate(rows):
            tgt[row, : len(outputs[i]) + 2] = torch.tensor([cfg.bos_id, *outputs[i], cfg.eos_id])
        log_probs = model(batch, tgt[:, :-1]).float().log_softmax(-1)
        for row, i in enumerate(rows):
            n = len(outputs[i]) + 1
            chosen = log_probs[row, torch.arange(n), tgt[row, 1 : n + 1]]
            steps = log_probs[row, :n]
            least.append(chosen.min().item())
            entropy.append(-(steps.exp() * steps).sum(-1).mean().item())
    return least, entropy, time.perf_counter() - start


def confidence_part(loaded, data: PreparedData) -> None:
    def assessed(split: str) -> tuple[list[str], list, list[float], float]:
        src, ref = data.text(split)
        keep = [i for i, (s, r) in enumerate(zip(src, ref, strict=True)) if s.strip() and r.strip()]
        src, ref = [src[i] for i in keep], [ref[i] for i in keep]
        start = time.perf_counter()
        assessing = TextModel(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer)
        assessing.assess = mean_probability
        found = translate_segments(assessing, Segments(src), DecodeConfig(), "truncate")
        seconds = time.perf_counter() - start
        return src, found, sentence_chrf([f[0].text for f in found], ref), seconds

    valid_src, valid, valid_chrf, _ = assessed("valid")
    test_src, test, chrf, seconds = assessed("test")
    least, entropy, extra = read_back(loaded, test_src, test)
    v_least, v_entropy, _ = read_back(loaded, valid_src, valid)
    signals = [f[0].signals for f in test]
    print(
        f"test: {len(test)} sentences, beam 4 in {seconds:.1f} s; reading back: {extra:.1f} s more"
    )
    rows = {
        "mean log-probability per token": [s.mean_log_prob for s in signals],
        "least token log-probability (read back)": least,
        "-mean entropy (read back)": [-e for e in entropy],
        "beam agreement (token F1)": [s.agreement for s in signals],
        "-length": [-s.length for s in signals],
    }
    calibration = fit([f[0].signals for f in valid], valid_chrf)
    rows[f"calibrated on valid ({len(valid)}): search's signals"] = [
        calibration(s) for s in signals
    ]

    def matrix(found: list, lp: list[float], ent: list[float]) -> np.ndarray:
        rows = zip(found, lp, ent, strict=True)
        return np.array([[*f[0].signals.vector(), a, b] for f, a, b in rows])

    x_valid, x_test = matrix(valid, v_least, v_entropy), matrix(test, least, entropy)
    mean, scale = x_valid.mean(0), x_valid.std(0) + 1e-9
    z = (x_valid - mean) / scale
    y = np.array(valid_chrf) / 100
    w = np.linalg.solve(z.T @ z + np.eye(z.shape[1]), z.T @ (y - y.mean()))
    both = list(((x_test - mean) / scale) @ w)
    rows["calibrated on valid: search's signals and the read-back ones"] = both
    for name, values in rows.items():
        print(f"| {name} | {spearman(values, chrf):.3f} |")


def memory_part(loaded, src: list[str], size: int) -> None:
    memory = Memory(
        (f"entry {i} of a memory that matches nothing", f"Eintrag {i}") for i in range(size)
    )
    plain = min(timed(loaded, src)[1] for _ in range(3))
    exact = min(timed(loaded, src, Aids(memory=memory))[1] for _ in range(3))
    fuzzy = min(timed(loaded, src, Aids(memory=memory, fuzzy_threshold=90))[1] for _ in range(2))
    print(
        f"memory of {size:,} entries, no match: {plain:.2f} s without, {exact:.2f} s with exact "
        f"lookups ({100 * (exact / plain - 1):+.1f}%), {fuzzy:.2f} s with fuzzy matching "
        f"({100 * (fuzzy / plain - 1):+.1f}%)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--side", choices=("en", "de"), default="en", help="the source language")
    parser.add_argument(
        "--part", choices=("glossary", "confidence", "memory", "all"), default="all"
    )
    parser.add_argument("--memory-size", type=int, default=100_000)
    args = parser.parse_args()
    loaded = load_run(args.checkpoint)
    data = PreparedData(args.data)
    src, ref = data.text("test")
    keep = [i for i, (s, r) in enumerate(zip(src, ref, strict=True)) if s.strip() and r.strip()]
    src, ref = [src[i] for i in keep], [ref[i] for i in keep]
    print(
        f"{args.checkpoint} on {len(src)} test sentences of {args.data}, {torch.get_num_threads()} threads"
    )
    if args.part in ("glossary", "all"):
        glossary_part(loaded, src, ref, args.side)
    if args.part in ("confidence", "all"):
        confidence_part(loaded, data)
    if args.part in ("memory", "all"):
        memory_part(loaded, src, args.memory_size)


if __name__ == "__main__":
    main()
