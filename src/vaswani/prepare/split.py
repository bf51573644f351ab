"""Stages 2 and 3 of `prepare`, clean and split: one pass over the corpus that drops copies,
duplicates and wrong-language pairs (the filters of `clean.py`), assigns each pair its split by
hash, applies --weight and writes the kept text (`SplitWriter`); then the training text as the later
stages read it (`KeptText`: decontaminated, a multilingual corpus's pairs sampled by
temperature)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from itertools import compress, starmap
from pathlib import Path
from typing import Any

import numpy as np

from vaswani.data.clean import PAIR_RECORD, PairFilter, record_chunks, text_key
from vaswani.data.corpora import DataError, Example, Pair, pair_digest, split_of
from vaswani.data.dataset import SIDES, SPLITS
from vaswani.data.langid import LanguageFilter
from vaswani.data.options import ENCODE_CHUNK, MAX_WEIGHT, PrepareOptions
from vaswani.data.readers import Corpus
from vaswani.data.tokenizer import iter_text_lines
from vaswani.languages import Languages, pair_name, parse_pair
from vaswani.prepare.read import CorpusSource
from vaswani.progress import progress_bar
from vaswani.tasks import get_task


def cleaning_record(opts: PrepareOptions) -> dict:
    """The cleaning switches a dataset was prepared with, for meta.json."""
    return {
        "dedupe": opts.dedupe,
        "drop_copies": get_task(opts.task).parallel and opts.drop_copies,
        "max_length_ratio": opts.max_length_ratio,
        "drop_held_out": opts.drop_held_out,
        "lang_id": opts.lang_id,
        "exclude": [str(p) for p in opts.exclude],
    }


class SplitWriter:
    """Where the first pass puts what it keeps: each split's text (one segment a line), a
    `PAIR_RECORD` per training pair in `records`, the pairs per split, and the keys of the
    held-out (valid and test) sentences on `sides` (indices into SIDES)."""

    def __init__(
        self, raw: dict[tuple[str, str], Path], records: Path, sides: list[int], keep_held_out: bool
    ) -> None:
        self.raw, self.records, self.sides, self.keep_held_out = raw, records, sides, keep_held_out
        self.counts: Counter = Counter()
        self.held_out: set[int] = set()
        self.pending: list[tuple[int, int, int, int]] = []
        self.stack = ExitStack()

    def __enter__(self) -> SplitWriter:
        def opened(key: tuple[str, str], path: Path) -> Any:  # text, or a language pair index array
            if key[1] == "pair":
                return open(path, "wb")  # noqa: SIM115 - closed in __exit__
            return open(path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115 - as above

        self.out = {
            key: self.stack.enter_context(opened(key, path)) for key, path in self.raw.items()
        }
        # A multilingual dataset's language pair of each line, by split (kept only for one).
        self.language_pairs: dict[str, list[int]] = {
            split: [] for split in SPLITS if (split, "pair") in self.out
        }
        self.record_file = self.stack.enter_context(open(self.records, "wb"))
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.flush()
        self.stack.close()

    def flush(self) -> None:
        np.array(self.pending, PAIR_RECORD).tofile(self.record_file)
        self.pending.clear()
        for split, pairs in self.language_pairs.items():
            np.array(pairs, np.uint16).tofile(self.out[split, "pair"])
            pairs.clear()

    def add(
        self,
        split: str,
        src: str,
        tgt: str,
        norm: tuple[str, str],
        copies: int,
        language_pair: int = 0,
    ) -> None:
        for _ in range(copies):
            self.out[split, "src"].write(src + "\n")
            self.out[split, "tgt"].write(tgt + "\n")
        self.counts[split] += copies
        if self.language_pairs:
            self.language_pairs[split] += [language_pair] * copies
        if split != "train":
            if self.keep_held_out:
                self.held_out.update(text_key(norm[k]) for k in self.sides)
            return
        record = (text_key(norm[0]), text_key(norm[1]), len(src.split()), len(tgt.split()))
        self.pending += [record] * copies
        if len(self.pending) >= ENCODE_CHUNK:
            self.flush()


def split_corpus(
    corpus: CorpusSource,
    raw: dict[tuple[str, str], Path],
    records: Path,
    valid_fraction: float,
    test_fraction: float,
    opts: PrepareOptions,
) -> tuple[Counter, Counter, list[dict], set[int], int | None]:
    """One pass over the corpus: drop copies, duplicates (and with --lang-id pairs in the wrong
    language), assign splits by hash (back-translated pairs: training), apply --weight, and write
    (`SplitWriter`). Returns the pairs per split, the pairs dropped by reason, a record per
    corpus, the keys of the held-out sentences, and the line of the training text where the
    back-translated pairs begin (they come last; None without them)."""
    task = get_task(opts.task)
    kept = PairFilter(opts.dedupe, drop_copies=task.parallel and opts.drop_copies)
    sides = [k for k, side in enumerate(SIDES) if side in task.sides]
    filters: dict[tuple, LanguageFilter] = {}  # by language pair, built once each
    weights = corpus_weights(corpus.parts, opts.weights)
    corpora = []
    bar = progress_bar(enabled=opts.progress, desc="reading", unit=" pairs")
    names = corpus.description.get("pairs", [])
    tagged_from = None
    with SplitWriter(raw, records, sides, opts.drop_held_out) as out:
        for part, weight in zip(corpus.parts, weights, strict=True):
            before, written = kept.dropped.copy(), 0
            synthetic = part.description.get("back_translated", False)
            if synthetic and tagged_from is None:
                tagged_from = out.counts["train"]
            # A multilingual dataset: the same texts in two language pairs are two examples.
            scope = part.description.get("pair", "")
            language_pair = names.index(scope) if scope else 0
            pairs = bar_counted(part.pairs, bar)
            if opts.lang_id:  # a multilingual dataset's own pair, or --src-lang/--tgt-lang
                langs = parse_pair(scope) if scope else (opts.src_lang, opts.tgt_lang)
                if langs not in filters:
                    filters[langs] = LanguageFilter(*langs)
                pairs = filters[langs].filter(pairs, kept.dropped)
            for src, tgt in pairs:
                # The text files hold one segment a line, so a segment may not hold a newline.
                src, tgt = " ".join(src.split("\n")), " ".join(tgt.split("\n"))
                norm = kept.keep(src, tgt, scope)
                if norm is None:
                    continue
                digest = pair_digest(src, tgt)
                split = "train" if synthetic else split_of(digest, valid_fraction, test_fraction)
                copies = 1 if split != "train" else copies_of(digest, weight)
                if not copies:
                    kept.dropped["left out by --weight"] += 1
                    continue
                out.add(split, src, tgt, norm, copies, language_pair)
                written += 1
            dropped = part.dropped + (kept.dropped - before)
            # Every pair read is either written or dropped for a reason.
            corpora.append(
                {
                    **part.description,
                    "pairs_read": written + sum(dropped.values()),
                    "kept": written,
                    "dropped": dict(sorted(dropped.items())),
                    **({"weight": weight} if weight != 1 else {}),
                }
            )
    bar.close()
    return out.counts, kept.dropped, corpora, out.held_out, tagged_from


def corpus_weights(parts: list[Corpus], weights: tuple[tuple[str, float], ...]) -> list[float]:
    """The weight of each corpus: that of the most specific --weight naming its file or a
    directory above it, else 1. A --weight that names no corpus is an error (a typing slip)."""
    found = [1.0] * len(parts)
    for given, weight in sorted(weights, key=lambda item: len(Path(item[0]).resolve().parts)):
        if not (math.isfinite(weight) and 0 < weight <= MAX_WEIGHT):
            raise DataError(
                f"the weights entry {given}={weight}: give a weight above 0, at most {MAX_WEIGHT}"
            )
        target, matched = Path(given).resolve(), False
        for i, part in enumerate(parts):
            paths = [Path(p).resolve() for p in part.description.get("paths", [])]
            if "path" in part.description:
                paths.append(Path(part.description["path"]).resolve())
            if any(path == target or path.is_relative_to(target) for path in paths):
                found[i], matched = weight, True
        if not matched:
            names = ", ".join(
                sorted({str(p.description.get("path", p.description.get("paths"))) for p in parts})
            )
            raise DataError(f"the weights entry {given}: not one of the corpora read ({names})")
    return found


def copies_of(digest: bytes, weight: float) -> int:
    """How many times a training pair is used under `weight`: its whole part, and one more for a
    share of the pairs equal to the fraction (chosen by bytes of the digest the split does not
    use, so the choice is independent of the split)."""
    whole = int(weight)
    return whole + (int.from_bytes(digest[8:16], "big") / 2**64 < weight - whole)


def bar_counted(pairs: Iterator[Pair], bar: Any) -> Iterator[Pair]:
    for pair in pairs:
        bar.update(1)
        yield pair


class KeptText:
    """The first pass's text read back for the later passes: each split's pairs, without the
    training pairs the decontamination `keep` mask drops; for a multilingual dataset (`languages`)
    each pair's language pair beside it, and the training pairs repeated by `temperature`."""

    def __init__(
        self,
        raw: dict[tuple[str, str], Path],
        keep: np.ndarray,
        languages: Languages | None,
        temperature: float,
        tagged_from: int | None = None,
    ) -> None:
        self.raw, self.keep, self.languages = raw, keep, languages
        self.tagged_from = tagged_from
        if languages is not None:
            self.language_pair = {
                split: np.fromfile(self.raw[split, "pair"], np.uint16) for split in SPLITS
            }
            self.trained = np.bincount(
                self.language_pair["train"][self.keep], minlength=len(languages.pairs)
            )
            self.weights = temperature_weights(self.trained, temperature)

    def training_pairs(self) -> int:
        """The training pairs kept; with sampling, about how many it gives (for progress)."""
        if self.languages is None:
            return int(self.keep.sum())
        return int(round(float((self.trained * self.weights).sum())))

    def pairs(self, split: str, sampled: bool = False) -> Iterator[Example]:
        """The kept pairs of a split, each with its language pair in a multilingual dataset,
        whose training pairs are `sampled` by temperature if asked."""
        columns = [iter_text_lines(self.raw[split, "src"]), iter_text_lines(self.raw[split, "tgt"])]
        if self.languages is not None:
            columns.append(iter(self.language_pair[split].tolist()))
        pairs: Iterator[Example] = starmap(Example, zip(*columns, strict=True))
        if split == "train" and self.tagged_from is not None:
            pairs = (
                pair._replace(tagged=True) if i >= self.tagged_from else pair
                for i, pair in enumerate(pairs)
            )
        if split == "train":
            pairs = compress(pairs, self.keep)
            if sampled and self.languages is not None:
                pairs = repeated(pairs, self.weights)
        return pairs

    def languages_record(self, temperature: float, splits: dict) -> dict:
        """meta.json's "languages": the pairs, the token form, the temperature, and per pair its
        training weight and pairs by split."""
        names = [pair_name(*pair) for pair in self.languages.pairs]  # type: ignore[union-attr]
        by_pair = {
            name: {
                "weight": round(float(self.weights[p]), 4),
                **{split: splits[split]["by_pair"].get(name, 0) for split in SPLITS},
            }
            for p, name in enumerate(names)
        }
        return {**self.languages.record(), "temperature": temperature, "by_pair": by_pair}  # type: ignore[union-attr]


def temperature_weights(pairs: np.ndarray, temperature: float) -> np.ndarray:
    """How many times each language pair's training pairs are used so that pair p's share of
    the training data is proportional to pairs[p]^(1/T): the largest pair once, the others
    (largest / pairs[p])^(1 - 1/T) times, at most MAX_WEIGHT; a pair without data: 0."""
    largest = max(int(pairs.max()), 1)
    with np.errstate(divide="ignore"):
        weights = (largest / pairs.astype(np.float64)) ** (1 - 1 / temperature)
    return np.where(pairs > 0, np.minimum(weights, MAX_WEIGHT), 0.0)


def repeated(pairs: Iterator[Example], weights: np.ndarray) -> Iterator[Example]:
    """Each pair as many times as its language pair's weight says (`copies_of`: the whole part,
    and one more for a share of the pairs equal to the fraction)."""
    for pair in pairs:
        weight = float(weights[pair.language_pair])
        copies = 1 if weight == 1 else copies_of(pair_digest(pair.src, pair.tgt), weight)
        for _ in range(copies):
            yield pair


def training_words(records: Path, keep: np.ndarray, sides: tuple[str, ...]) -> int:
    """The words on `sides` of the kept training pairs (their `PAIR_RECORD`s in `records`)."""
    return sum(
        int(chunk[f"{side}_words"][keep[start : start + len(chunk)]].sum(dtype=np.int64))
        for start, chunk in record_chunks(records)
        for side in sides
    )
