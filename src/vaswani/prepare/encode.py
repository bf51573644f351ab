"""Stages 5 and 6 of `prepare`, encode and write: each split encoded in chunks on the tokenizer's
threads while the one before is written, pairs over the length limits dropped (a language model's
long texts cut into pieces), ids and evaluation text written with their statistics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from vaswani.data.clean import ratio_outlier
from vaswani.data.corpora import Example
from vaswani.data.dataset import SIDES
from vaswani.data.ids import IdsWriter
from vaswani.data.options import ENCODE_CHUNK, PrepareOptions
from vaswani.data.tokenizer import SubwordTokenizer
from vaswani.languages import Languages, pair_name
from vaswani.progress import progress_bar
from vaswani.tasks import Task, get_task


def length_stats(lengths: np.ndarray) -> dict:
    if not len(lengths):
        return {"mean": 0.0, "p50": 0, "p95": 0, "p99": 0, "max": 0, "tokens": 0}
    array = np.asarray(lengths)
    return {
        "mean": round(float(array.mean()), 3),
        "p50": int(np.percentile(array, 50, method="lower")),
        "p95": int(np.percentile(array, 95, method="lower")),
        "p99": int(np.percentile(array, 99, method="lower")),
        "max": int(array.max()),
        "tokens": int(array.sum(dtype=np.int64)),
    }


def cut_into_pieces(texts: list[list[int]], room: int) -> list[list[int]]:
    """Each id sequence cut into consecutive pieces of at most `room` ids (a language model's long
    texts: every piece is learnt, though a piece after the first starts without its context)."""
    return [ids[i : i + room] for ids in texts for i in range(0, len(ids), room)]


Prefix = Callable[[Example], tuple[list[int], list[int]]]
"""What goes before a pair's source ids and before its target ids: in a multilingual dataset the
token that asks for the target language (before the source), in a back-translated pair the tag, for
a model of the NLLB family the source's and the target's language tokens (`vaswani.hub`)."""


def encode_chunk(
    chunk: list[Example],
    tokenizers: dict[str, SubwordTokenizer],
    room: dict[str, int],
    task: Task,
    prefix: Prefix | None = None,
) -> tuple[dict[str, list[list[int]]], list[int], int]:
    """Token ids of a chunk of pairs by side, the indices of those that fit their `room`, and how
    many texts were cut into pieces (a language model's long texts are cut, not dropped). Each
    source, and each target, starts with the ids `prefix(pair)` gives it (`Prefix`)."""
    ids = {
        side: tokenizers[side].encode_batch([p[k] for p in chunk]) for k, side in enumerate(SIDES)
    }
    if prefix is not None:
        for i, pair in enumerate(chunk):
            before_source, before_target = prefix(pair)
            ids["src"][i] = [*before_source, *ids["src"][i]]
            ids["tgt"][i] = [*before_target, *ids["tgt"][i]]
    cut = 0
    if task.cuts_long_texts:
        pieces = cut_into_pieces(ids["tgt"], room["tgt"])
        cut = sum(len(t) > room["tgt"] for t in ids["tgt"])
        ids = {"src": [[] for _ in pieces], "tgt": pieces}
    keep = [
        i for i in range(len(ids["src"])) if all(len(ids[side][i]) <= room[side] for side in SIDES)
    ]
    return ids, keep, cut


def in_ratio(ids: dict[str, list[list[int]]], keep: list[int], max_ratio: float) -> list[int]:
    """The indices of `keep` whose sides are within `max_ratio` of each other (`ratio_outlier`)."""
    return [i for i in keep if not ratio_outlier(len(ids["src"][i]), len(ids["tgt"][i]), max_ratio)]


def encoded_chunks(
    pairs: Iterator[Example],
    tokenizers: dict[str, SubwordTokenizer],
    room: dict[str, int],
    task: Task,
    prefix: Prefix | None = None,
) -> Iterator[tuple[list[Example], tuple[dict[str, list[list[int]]], list[int], int]]]:
    """Chunks of `pairs` with their `encode_chunk`, each encoded (by the tokenizer's threads,
    outside the GIL, on every core) while the caller writes the one before."""
    with ThreadPoolExecutor(1) as encoder:
        chunk = list(islice(pairs, ENCODE_CHUNK))
        encoding = encoder.submit(encode_chunk, chunk, tokenizers, room, task, prefix)
        while chunk:
            following = list(islice(pairs, ENCODE_CHUNK))
            done = encoding.result()
            encoding = encoder.submit(encode_chunk, following, tokenizers, room, task, prefix)
            yield chunk, done
            chunk = following


def evaluation_text(
    stack: ExitStack, work: Path, split: str, task: Task, multilingual: bool
) -> dict[str, Any]:
    """The text files of an evaluation split, by side (and "pair": each line's language pair),
    open in `stack`; none for the training split (its ids are enough) or a language model."""
    if split == "train" or task.cuts_long_texts:
        return {}
    return {
        side: stack.enter_context(
            open(work / f"{split}.{side}.txt", "w", encoding="utf-8", newline="\n")
        )
        for side in [*SIDES, *(["pair"] if multilingual else [])]
    }


@dataclass(frozen=True)
class Encoding:
    """How every split of a dataset is encoded: by which tokenizers, into which integer type, with
    which options, each pair after which prefix (a multilingual pair's tokens)."""

    tokenizers: dict[str, SubwordTokenizer]
    dtype: np.dtype
    opts: PrepareOptions
    prefix: Prefix | None = None
    languages: Languages | None = None


def encode_split(
    encoding: Encoding, work: Path, split: str, pairs: Iterator[Example], count: int
) -> dict:
    """Encode one split (`count` pairs) in chunks into `work`, drop pairs over max_example_len (cut
    a language model's texts into pieces instead), write ids (and evaluation text; for a
    multilingual dataset, the language pair of each line in {split}.pair.txt)."""
    tokenizers, dtype, opts = encoding.tokenizers, encoding.dtype, encoding.opts
    prefix, languages = encoding.prefix, encoding.languages
    by_pair: Counter = Counter()
    writers = {side: IdsWriter(work / f"{split}.{side}", dtype) for side in SIDES}
    lengths: dict[str, list[np.ndarray]] = {"src": [], "tgt": []}
    too_long = cut = off_ratio = tagged = 0
    task = get_task(opts.task)
    ratio_checked = split == "train" and task.parallel
    # +1: the EOS (source, decoder output) or BOS (decoder input) the batch adds; a classifier
    # also puts a start token before its text.
    room = {
        "src": opts.max_example_len - 1 - task.extra_positions,
        "tgt": opts.max_example_len - 1,
    }
    with ExitStack() as stack:
        text_out = evaluation_text(stack, work, split, task, languages is not None)
        bar = progress_bar(
            total=count, enabled=opts.progress, desc=f"encoding {split}", unit=" pairs"
        )
        chunks = encoded_chunks(pairs, tokenizers, room, task, prefix)
        for chunk, (ids, keep, pieces_cut) in chunks:
            cut += pieces_cut
            too_long += len(ids["src"]) - len(keep)
            if ratio_checked:
                fitting, keep = len(keep), in_ratio(ids, keep, opts.max_length_ratio)
                off_ratio += fitting - len(keep)
            for k, side in enumerate(SIDES):
                kept = [ids[side][i] for i in keep]
                lengths[side].append(writers[side].add(kept))
                if text_out:
                    text_out[side].writelines(chunk[i][k] + "\n" for i in keep)
            if languages is not None:
                found = [pair_name(*languages.pairs[chunk[i].language_pair]) for i in keep]
                by_pair.update(found)
                if text_out:
                    text_out["pair"].writelines(name + "\n" for name in found)
            if not task.cuts_long_texts:  # (a language model's `keep` counts pieces)
                tagged += sum(chunk[i].tagged for i in keep)
            bar.update(len(chunk))
        bar.close()
    every = {side: np.concatenate([np.zeros(0, np.int32), *lengths[side]]) for side in SIDES}
    return {
        "pairs": len(every["src"]),
        "filtered_too_long": too_long,
        **({"filtered_length_ratio": off_ratio} if ratio_checked else {}),
        **({"long_texts_cut": cut} if task.cuts_long_texts else {}),
        **({"back_translated": tagged} if tagged else {}),
        "src_lengths": length_stats(every["src"]),
        "tgt_lengths": length_stats(every["tgt"]),
        "sha256": {side: writers[side].close() for side in SIDES},
        **({"by_pair": dict(sorted(by_pair.items()))} if languages is not None else {}),
    }
