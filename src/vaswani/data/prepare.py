"""`vaswani prepare`: parallel text -> tokenizer + memory-mappable token ids + meta.json.

A prepared directory holds:
    tokenizer.json                     shared BPE (or src.tokenizer.json + tgt.tokenizer.json)
    {split}.{src,tgt}.bin              token ids of every pair, concatenated (uint16 or uint32)
    {split}.{src,tgt}.idx              int64 offsets into the .bin file, one more than pairs
    {valid,test}.{src,tgt}.txt         the kept text of the evaluation splits, for sacreBLEU
    meta.json                          counts, length statistics, filtered pairs and why
Everything is a pure function of the inputs and options: re-running gives byte-identical files.
Over 500 lines on purpose: the pipeline (options, choosing the corpus, one pass that cleans and
splits, decontamination, the tokenizer, encoding) reads top to bottom in the order it runs; the
readers (`formats/`) and the filters (`clean.py`) live apart.

One format serves the three tasks (meta.json's "task"):
    translate   (source, target) pairs of sentences
    lm          ("", text) pairs: a language model's examples have no source, and the text is the
                target side, as the decoder-only model is a translation decoder without its
                encoder. A text longer than max_example_len is cut into pieces rather than dropped.
    classify    (text, label) pairs: the tokenizer learns the text only, and the target side is
                one token, the label's index in labels.json (`LabelSet`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from vaswani.config import LIMITS, TASKS, one_of
from vaswani.data.clean import (
    DEDUPE,
    PairFilter,
    decontaminate,
    exclusion_digests,
    held_out_digests,
    ratio_outlier,
)
from vaswani.data.corpora import (
    DEFAULT_MAX_LINE_BYTES,
    DING_PATH,
    DataError,
    Pair,
    ding_de_en,
    grammar_en,
    numbers_de,
    pair_digest,
    read_text_files,
    read_tsv,
    sentiment_en,
    split_of,
)
from vaswani.data.formats import FORMATS, Corpus, ReadOptions, open_corpora
from vaswani.data.formats.xml import MARKUP
from vaswani.data.ids import IdsWriter
from vaswani.data.tokenizer import (
    LabelSet,
    SubwordTokenizer,
    auto_vocab_size,
    iter_text_lines,
    load_tokenizers,
)
from vaswani.files import UnsafeFileError, member, read_json
from vaswani.progress import progress_bar

FORMAT_VERSION = 1
SPLITS = ("train", "valid", "test")
SIDES = ("src", "tgt")
BUILTIN_CORPORA = {  # name -> the task it is for
    "numbers-de": "translate",
    "ding-de-en": "translate",
    "grammar-en": "lm",
    "sentiment-en": "classify",
}
DEFAULT_CORPUS = {"lm": "grammar-en", "classify": "sentiment-en"}
LABELS_FILE = "labels.json"
ENCODE_CHUNK = 10_000


@dataclass
class PrepareOptions:
    task: str = one_of("translate", TASKS)
    """translate (encoder-decoder), lm (decoder-only language model), classify (encoder with a
    classification head)."""
    vocab_size: int | None = None
    """BPE vocabulary size; None (auto): from the training split's word count (`auto_vocab_size`),
    e.g. 3,000 for 20k short sentence pairs, 8,000 for a million words a side."""
    max_example_len: int = 256
    """Drop pairs longer than this many tokens (with BOS/EOS) on either side; a language model's
    longer texts are cut into pieces instead."""
    shared_vocab: bool = True
    """One tokenizer for both languages (paper §3.4)."""
    valid_fraction: float | None = None
    """Share of pairs for validation (none given: the corpus's default)."""
    test_fraction: float | None = None
    """Share of pairs for test (none given: the corpus's default)."""
    skip_invalid: bool = False
    """Drop (and count) pairs with invalid UTF-8, NUL bytes, BOMs or bad TSV rows instead of
    stopping at the first."""
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    """Refuse any input line longer than this."""
    numbers_size: int = 30000
    """numbers-de: pairs."""
    numbers_max: int = 999_999
    """numbers-de: largest number."""
    builtin_size: int = 20000
    """grammar-en, sentiment-en: examples."""
    seed: int = 0
    """numbers-de, grammar-en, sentiment-en: random seed."""
    ding_path: Path = DING_PATH
    """ding-de-en: the dictionary file (Debian's trans-de-en package)."""
    min_frequency: int = 2
    progress: bool = True
    tokenizer_from: Path | None = None
    """A run directory whose tokenizer to use instead of learning one (to fine-tune that run
    with train --init)."""
    format: str | None = one_of(None, FORMATS)
    """tsv, moses, tmx, xliff, po, mo or jsonl; none given: from each file's extension."""
    src_lang: str | None = None
    """tmx: the source language (es matches es-ES, ES, es_MX); none given: the header's."""
    tgt_lang: str | None = None
    """tmx: the target language."""
    markup: str = one_of("strip", MARKUP)
    """tmx, xliff: inline codes (<bpt>, <ph>, ...) left out (strip) or kept as their text (keep)."""
    fields: str = "src,tgt"
    """jsonl: the keys of the source and the target."""
    dedupe: str = one_of("normalised", DEDUPE)
    """Drop repeated pairs: normalised (case, spaces and punctuation ignored), exact, or none."""
    drop_copies: bool = True
    """Drop pairs whose target is a copy of the source (normalised)."""
    max_length_ratio: float = 3.0
    """Drop training pairs with one side over this many times longer than the other, in tokens
    (pairs under 10 tokens a side are kept); 0 keeps all."""
    drop_held_out: bool = True
    """Drop training pairs whose source or target (normalised) is in the valid or test split."""
    exclude: tuple[Path, ...] = ()
    """Files of sentences (an external test set; both columns of a TSV line) that no training pair
    may contain, as source or target."""
    tokenizer_sample: int | None = None
    """Learn the BPE from at most this many training pairs, evenly spread (for large corpora);
    none: all of them."""


@dataclass
class CorpusSource:
    """What to read: one corpus or several (`parts`, read in order), what to record about them, and
    the default split fractions."""

    description: dict
    parts: list[Corpus]
    valid_fraction: float = 0.01
    test_fraction: float = 0.01

    @property
    def dropped(self) -> Counter:
        """What the readers skipped, by reason, over all parts (complete once they are read)."""
        return sum((part.dropped for part in self.parts), Counter())


def single(description: dict, pairs: Iterator[Pair], dropped: Counter, **fractions: float
           ) -> CorpusSource:  # fmt: skip
    return CorpusSource(description, [Corpus(description, pairs, dropped)], **fractions)


def open_corpus(inputs: list[str], opts: PrepareOptions) -> CorpusSource:
    """A built-in corpus by name, or files: for translation one TSV file or two aligned files
    (source, then target); for lm any number of text files; for classify one TSV of text, label.
    No input: the task's built-in corpus (lm: grammar-en, classify: sentiment-en)."""
    dropped: Counter = Counter()
    read = {
        "dropped": dropped,
        "skip_invalid": opts.skip_invalid,
        "max_line_bytes": opts.max_line_bytes,
    }
    if opts.task not in TASKS:
        raise DataError(f"--task {opts.task}: choose one of {', '.join(TASKS)}")
    if not inputs:
        if opts.task not in DEFAULT_CORPUS:
            raise DataError("give a corpus: a built-in name (numbers-de, ding-de-en) or files")
        inputs = [DEFAULT_CORPUS[opts.task]]
    if len(inputs) == 1 and BUILTIN_CORPORA.get(inputs[0], opts.task) != opts.task:
        raise DataError(
            f"{inputs[0]} is a corpus for --task {BUILTIN_CORPORA[inputs[0]]}, not {opts.task}"
        )
    if len(inputs) == 1 and inputs[0] in ("grammar-en", "sentiment-en"):
        make = grammar_en if inputs[0] == "grammar-en" else sentiment_en
        description = {"name": inputs[0], "size": opts.builtin_size, "seed": opts.seed}
        pairs = make(opts.builtin_size, opts.seed)
        return single(description, pairs, dropped, valid_fraction=0.05, test_fraction=0.05)
    if len(inputs) == 1 and inputs[0] == "numbers-de":
        description = {"name": "numbers-de", "size": opts.numbers_size, "seed": opts.seed,
                       "max_number": opts.numbers_max}  # fmt: skip
        pairs = numbers_de(opts.numbers_size, opts.seed, opts.numbers_max)
        return single(description, pairs, dropped, valid_fraction=0.05, test_fraction=0.05)
    if len(inputs) == 1 and inputs[0] == "ding-de-en":
        pairs = ding_de_en(Path(opts.ding_path), dropped)
        return single({"name": "ding-de-en", "path": str(opts.ding_path)}, pairs, dropped)
    paths = [Path(p) for p in inputs]
    for path in paths:
        if path.is_dir() and opts.task != "translate":
            raise DataError(f"{path}: is a directory; give the text file(s) in it")
        if not path.exists():  # a FIFO or `<(command)` is fine: it is read once, in order
            known = ", ".join(BUILTIN_CORPORA)
            raise DataError(f"{path}: no such file (and not a built-in corpus: {known})")
    if opts.task == "lm":
        pairs = read_text_files(paths, **read)
        return single({"name": "text", "paths": [str(p) for p in paths]}, pairs, dropped)
    if opts.task == "classify":
        if len(paths) != 1:
            raise DataError(
                f"--task classify reads one TSV file of text<TAB>label, got {len(paths)}"
            )
        pairs = read_tsv(paths[0], **read, column_names="text, label")
        return single({"name": "tsv", "path": str(paths[0])}, pairs, dropped)
    fields = tuple(name.strip() for name in opts.fields.split(","))
    if len(fields) != 2 or not all(fields):
        raise DataError(f"--fields {opts.fields}: give two keys, source then target (de,en)")
    how = ReadOptions(opts.format, opts.src_lang, opts.tgt_lang, opts.markup, fields,  # type: ignore[arg-type]
                      opts.skip_invalid, opts.max_line_bytes)  # fmt: skip
    parts = open_corpora(paths, how)
    if len(parts) == 1:
        return CorpusSource(parts[0].description, parts)
    return CorpusSource({"name": "several", "corpora": len(parts)}, parts)


def length_stats(lengths: list[int]) -> dict:
    if not lengths:
        return {"mean": 0.0, "p50": 0, "p95": 0, "p99": 0, "max": 0, "tokens": 0}
    array = np.asarray(lengths)
    return {
        "mean": round(float(array.mean()), 3),
        "p50": int(np.percentile(array, 50, method="lower")),
        "p95": int(np.percentile(array, 95, method="lower")),
        "p99": int(np.percentile(array, 99, method="lower")),
        "max": int(array.max()),
        "tokens": int(array.sum()),
    }


def prepare(inputs: list[str], out: Path, opts: PrepareOptions, force: bool = False) -> dict:
    """Read, deduplicate, split, train the tokenizer, encode, filter and write; returns meta."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DataError(f"--out {out}: exists and is not a directory; choose another --out")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise DataError(
                f"{out}: already exists and is not empty; choose another --out or --force"
            )
        for given in [*inputs, opts.ding_path, opts.tokenizer_from]:
            inside = given is not None and Path(given).resolve().is_relative_to(out.resolve())
            if inside and Path(given).exists():
                raise DataError(
                    f"--out {out} holds the input {given}, which --force would delete; "
                    "choose another --out"
                )
    if opts.vocab_size is not None and not 260 <= opts.vocab_size <= LIMITS["vocab_size"]:
        raise DataError(
            f"--vocab-size must be in 260 (4 specials + 256 bytes) .. {LIMITS['vocab_size']:,}, "
            f"got {opts.vocab_size}"
        )
    if opts.max_example_len < 3:
        raise DataError(f"--max-example-len must be at least 3, got {opts.max_example_len}")
    if opts.tokenizer_from is not None and opts.task != "translate":
        raise DataError("--tokenizer-from is for fine-tuning translation models (--task translate)")
    corpus = open_corpus(inputs, opts)
    valid_fraction = corpus.valid_fraction if opts.valid_fraction is None else opts.valid_fraction
    test_fraction = corpus.test_fraction if opts.test_fraction is None else opts.test_fraction
    if not (valid_fraction >= 0 and test_fraction >= 0 and valid_fraction + test_fraction < 1):
        raise DataError("--valid-fraction and --test-fraction must be >= 0 and sum to less than 1")

    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        meta = _prepare_into(work, corpus, opts, valid_fraction, test_fraction)
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            out.rename(old)
            work.rename(out)
            shutil.rmtree(old)
        else:
            work.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return meta


def _prepare_into(
    work: Path,
    corpus: CorpusSource,
    opts: PrepareOptions,
    valid_fraction: float,
    test_fraction: float,
) -> dict:
    raw = {(split, side): work / f"raw.{split}.{side}" for split in SPLITS for side in SIDES}
    counts, cleaned, records = _split_corpus(corpus, raw, valid_fraction, test_fraction, opts)
    counts["train"] = _decontaminate(raw, opts, cleaned)
    if counts["train"] == 0:
        raise DataError("no training pairs left after reading; check the input files")
    if opts.tokenizer_from is None:
        requested = opts.vocab_size
        if requested is None:
            # Words of the text the tokenizer learns: both sides of a shared vocabulary.
            sides = {"lm": ["tgt"], "classify": ["src"]}.get(opts.task, list(SIDES))
            sides = sides if opts.shared_vocab else sides[:1]
            words = sum(len(t.split()) for t in iter_text_lines(*(raw["train", s] for s in sides)))
            opts = dataclasses.replace(opts, vocab_size=auto_vocab_size(words))
        tokenizers, tokenizer_files = _train_tokenizers(work, raw, counts["train"], opts)
        tokenizer_meta = {
            "shared": tokenizer_files["src"] == tokenizer_files["tgt"],
            "requested_vocab_size": requested if requested is not None else "auto",
            **({"auto_vocab_size": {"words": words}} if requested is None else {}),
            "min_frequency": opts.min_frequency,
        }
        if opts.task == "classify":
            tokenizer_meta["labels"] = True
    else:
        tokenizers, tokenizer_meta = _copy_tokenizers(work, Path(opts.tokenizer_from))
        tokenizer_files = tokenizer_meta.pop("files")
    vocab = {side: tokenizers[side].vocab_size for side in SIDES}
    dtype = np.dtype("<u2") if max(vocab.values()) <= 1 << 16 else np.dtype("<u4")
    splits_meta = {}
    for split in SPLITS:
        splits_meta[split] = _encode_split(work, split, raw, counts[split], tokenizers, dtype, opts)
        for side in SIDES:
            raw[split, side].unlink()

    dropped = corpus.dropped + cleaned
    if opts.task != "translate" and "duplicate pair" in dropped:
        dropped["duplicate text"] = dropped.pop("duplicate pair")
    meta = {
        "format_version": FORMAT_VERSION,
        "task": opts.task,
        "corpus": corpus.description,
        **({"corpora": records} if len(records) > 1 else {}),
        "cleaning": cleaning_record(opts),
        "pairs_read": sum(record["pairs_read"] for record in records),
        "dropped_while_reading": dict(sorted(dropped.items())),
        "split_fractions": {"valid": valid_fraction, "test": test_fraction},
        "tokenizer": {**tokenizer_meta, "files": tokenizer_files, "vocab_size": vocab},
        "max_example_len": opts.max_example_len,
        "dtype": dtype.str,
        "splits": splits_meta,
    }
    (work / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return meta


def cleaning_record(opts: PrepareOptions) -> dict:
    """The cleaning switches a dataset was prepared with, for meta.json."""
    return {
        "dedupe": opts.dedupe,
        "drop_copies": opts.task == "translate" and opts.drop_copies,
        "max_length_ratio": opts.max_length_ratio,
        "drop_held_out": opts.drop_held_out,
        "exclude": [str(p) for p in opts.exclude],
    }


def _split_corpus(
    corpus: CorpusSource,
    raw: dict[tuple[str, str], Path],
    valid_fraction: float,
    test_fraction: float,
    opts: PrepareOptions,
) -> tuple[Counter, Counter, list[dict]]:
    """One pass over the corpus: drop copies and duplicates, assign splits by hash, write text per
    split. Returns the pairs per split, the pairs dropped by reason, and a record per corpus."""
    counts: Counter = Counter()
    kept = PairFilter(opts.dedupe, drop_copies=opts.task == "translate" and opts.drop_copies)
    records = []
    with ExitStack() as stack:
        out = {
            key: stack.enter_context(open(path, "w", encoding="utf-8", newline="\n"))
            for key, path in raw.items()
        }
        bar = progress_bar(enabled=opts.progress, desc="reading", unit=" pairs")
        for part in corpus.parts:
            before, read, written = kept.dropped.copy(), 0, 0
            for src, tgt in part.pairs:
                read += 1
                bar.update(1)
                # The text files hold one segment a line, so a segment may not hold a newline.
                src, tgt = " ".join(src.split("\n")), " ".join(tgt.split("\n"))
                if not kept.keep(src, tgt):
                    continue
                split = split_of(pair_digest(src, tgt), valid_fraction, test_fraction)
                out[split, "src"].write(src + "\n")
                out[split, "tgt"].write(tgt + "\n")
                counts[split] += 1
                written += 1
            dropped = part.dropped + (kept.dropped - before)
            records.append({**part.description, "pairs_read": read + sum(part.dropped.values()),
                            "kept": written, "dropped": dict(sorted(dropped.items()))})  # fmt: skip
        bar.close()
    return counts, kept.dropped, records


def _decontaminate(raw: dict[tuple[str, str], Path], opts: PrepareOptions, dropped: Counter
                   ) -> int:  # fmt: skip
    """Drop training pairs whose text is in the valid or test split or an --exclude file;
    returns the training pairs left. The sides compared are text (a classifier's label is not)."""
    sides = {"translate": SIDES, "lm": ("tgt",), "classify": ("src",)}[opts.task]
    held_out = held_out_digests(
        iter_text_lines(*(raw[split, side] for split in ("valid", "test") for side in sides))
        if opts.drop_held_out
        else []
    )
    excluded = exclusion_digests(opts.exclude, opts.max_line_bytes)
    return decontaminate(raw["train", "src"], raw["train", "tgt"], held_out, excluded, dropped,
                         sides)  # fmt: skip


def _train_tokenizers(
    work: Path, raw: dict[tuple[str, str], Path], n_train: int, opts: PrepareOptions
) -> tuple[dict[str, SubwordTokenizer], dict[str, str]]:
    """BPE learned from the training split only: one shared tokenizer (§3.4), or one per side.
    A language model's text is all on the target side; a classifier's labels get a `LabelSet`
    made from every split (a label seen only in the test split is still a class)."""
    sample = min(opts.tokenizer_sample or n_train, n_train)

    def text_of(*paths: Path) -> Iterator[str]:  # `sample` lines of each, evenly spread
        for path in paths:
            for i, line in enumerate(iter_text_lines(path)):
                if (i * sample) % n_train < sample:
                    yield line

    if opts.task == "lm":
        texts = text_of(raw["train", "tgt"])
        shared = SubwordTokenizer.train(texts, opts.vocab_size, opts.min_frequency, sample)
        tokenizers = {"src": shared, "tgt": shared}
        files = {"src": "tokenizer.json", "tgt": "tokenizer.json"}
    elif opts.task == "classify":
        texts = text_of(raw["train", "src"])
        labels = sorted(set(iter_text_lines(*(raw[split, "tgt"] for split in SPLITS))))
        if len(labels) < 2:
            raise DataError(f"a classification dataset needs at least 2 labels, found {labels}")
        tokenizers = {
            "src": SubwordTokenizer.train(texts, opts.vocab_size, opts.min_frequency, sample),
            "tgt": LabelSet(labels),
        }
        files = {"src": "tokenizer.json", "tgt": LABELS_FILE}
    elif opts.shared_vocab:
        texts = text_of(raw["train", "src"], raw["train", "tgt"])
        shared = SubwordTokenizer.train(texts, opts.vocab_size, opts.min_frequency, 2 * sample)
        tokenizers = {"src": shared, "tgt": shared}
        files = {"src": "tokenizer.json", "tgt": "tokenizer.json"}
    else:
        tokenizers = {
            side: SubwordTokenizer.train(
                text_of(raw["train", side]), opts.vocab_size, opts.min_frequency, sample
            )
            for side in SIDES
        }
        files = {side: f"{side}.tokenizer.json" for side in SIDES}
    for side in SIDES:
        tokenizers[side].save(work / files[side])
    return tokenizers, files  # type: ignore[return-value]


def _copy_tokenizers(work: Path, run: Path) -> tuple[dict[str, Any], dict]:
    """The tokenizer of run directory `run` (e.g. an imported OPUS-MT model), copied into `work`."""
    record = run / "data.json"  # vaswani.run.DATA_INFO (data cannot import run: run imports data)
    try:
        info = read_json(record, "run record", dict)
        tokenizer_meta = dict(info["meta"]["tokenizer"])
        files = tokenizer_meta["files"]
        for name in set(files.values()):
            # Read only inside the run; write only plain names inside the new dataset.
            source = member(run, name, str(record))
            if not isinstance(name, str) or Path(name).name != name or name.startswith("."):
                raise UnsafeFileError(f"{record} names {name!r}, which is not a plain file name")
            shutil.copyfile(source, work / name)
        src, tgt = load_tokenizers(work, tokenizer_meta)
    except UnsafeFileError as error:
        raise DataError(f"--tokenizer-from {run}: {error}") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(
            f"--tokenizer-from {run}: not a run directory with a usable tokenizer ({error})"
        ) from None
    kind = tokenizer_meta.get("kind", "bpe")
    # One vocabulary for both sides: Marian's vocab.json (unless a target_vocab.json is added), or
    # one BPE file.
    shared = "tgt_vocab" not in files if kind == "marian" else files["src"] == files["tgt"]
    return {"src": src, "tgt": tgt}, {
        "kind": kind,
        "shared": shared,
        "files": files,
        "from_run": str(run),
    }


def cut_into_pieces(texts: list[list[int]], room: int) -> list[list[int]]:
    """Each id sequence cut into consecutive pieces of at most `room` ids (a language model's long
    texts: every piece is learnt, though a piece after the first starts without its context)."""
    return [ids[i : i + room] for ids in texts for i in range(0, len(ids), room)]


def encode_chunk(
    chunk: list[tuple[str, str]],
    tokenizers: dict[str, SubwordTokenizer],
    room: dict[str, int],
    task: str,
) -> tuple[dict[str, list[list[int]]], list[int], int]:
    """Token ids of a chunk of pairs by side, the indices of those that fit their `room`, and how
    many texts were cut into pieces (a language model's long texts are cut, not dropped)."""
    ids = {
        side: tokenizers[side].encode_batch([p[k] for p in chunk]) for k, side in enumerate(SIDES)
    }
    cut = 0
    if task == "lm":
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


def _encode_split(
    work: Path,
    split: str,
    raw: dict[tuple[str, str], Path],
    count: int,
    tokenizers: dict[str, SubwordTokenizer],
    dtype: np.dtype,
    opts: PrepareOptions,
) -> dict:
    """Encode one split in chunks, drop pairs over max_example_len (cut a language model's texts into
    pieces instead), write ids (and evaluation text)."""
    writers = {side: IdsWriter(work / f"{split}.{side}", dtype) for side in SIDES}
    lengths: dict[str, list[int]] = {"src": [], "tgt": []}
    too_long = cut = off_ratio = 0
    ratio_checked = split == "train" and opts.task == "translate"
    # +1: the EOS (source, decoder output) or BOS (decoder input) the batch adds; a classifier
    # also puts a start token before its text.
    room = {
        "src": opts.max_example_len - (2 if opts.task == "classify" else 1),
        "tgt": opts.max_example_len - 1,
    }
    with ExitStack() as stack:
        text_out = {
            side: stack.enter_context(
                open(work / f"{split}.{side}.txt", "w", encoding="utf-8", newline="\n")
            )
            for side in SIDES
            # The training text is not needed again (its ids are), nor a language model's text.
            if split != "train" and opts.task != "lm"
        }
        lines = zip(
            iter_text_lines(raw[split, "src"]), iter_text_lines(raw[split, "tgt"]), strict=True
        )
        bar = progress_bar(
            total=count, enabled=opts.progress, desc=f"encoding {split}", unit=" pairs"
        )
        while chunk := list(islice(lines, ENCODE_CHUNK)):
            ids, keep, pieces_cut = encode_chunk(chunk, tokenizers, room, opts.task)
            cut += pieces_cut
            too_long += len(ids["src"]) - len(keep)
            if ratio_checked:
                fitting, keep = len(keep), in_ratio(ids, keep, opts.max_length_ratio)
                off_ratio += fitting - len(keep)
            for k, side in enumerate(SIDES):
                kept = [ids[side][i] for i in keep]
                writers[side].add(kept)
                lengths[side].extend(len(s) for s in kept)
                if text_out:
                    text_out[side].writelines(chunk[i][k] + "\n" for i in keep)
            bar.update(len(chunk))
        bar.close()
    return {
        "pairs": len(lengths["src"]),
        "filtered_too_long": too_long,
        **({"filtered_length_ratio": off_ratio} if ratio_checked else {}),
        **({"long_texts_cut": cut} if opts.task == "lm" else {}),
        "src_lengths": length_stats(lengths["src"]),
        "tgt_lengths": length_stats(lengths["tgt"]),
        "sha256": {side: writers[side].close() for side in SIDES},
    }
