"""`vaswani prepare`: parallel text -> tokenizer + memory-mappable token ids + meta.json.

A prepared directory holds:
    tokenizer.json                     shared BPE (or src.tokenizer.json + tgt.tokenizer.json)
    {split}.{src,tgt}.bin              token ids of every pair, concatenated (uint16 or uint32)
    {split}.{src,tgt}.idx              int64 offsets into the .bin file, one more than pairs
    {valid,test}.{src,tgt}.txt         the kept text of the evaluation splits, for sacreBLEU
    meta.json                          counts, length statistics, filtered pairs and why
Everything is a pure function of the inputs and options: re-running gives byte-identical files.

The stages, one module each, in the order `prepare` runs them (options: `options.py`):
    read        read.py     the corpus named: built-in, files (readers in `formats/`), --pair files
    clean+split split.py    one pass: the filters of `clean.py`, each pair's split by hash, --weight
    decontam.   clean.py    held-out and --exclude text masked out of training, by 64-bit keys
    tokenizer   vocab.py    BPE from a sample of the training split, or a run's (--tokenizer-from)
    encode      encode.py   ids in chunks, length limits, evaluation text, statistics
    write       here        meta.json, and the finished directory put in place of --out at once

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
import math
from pathlib import Path

import numpy as np

from vaswani.config import LIMITS
from vaswani.data.clean import contamination_mask, exclusion_keys
from vaswani.data.corpora import DataError
from vaswani.data.dataset import FORMAT_VERSION, SIDES, SPLITS, ParallelSplit
from vaswani.data.options import PrepareOptions
from vaswani.data.wordalign import write_alignments
from vaswani.languages import check_token_form
from vaswani.prepare.encode import Encoding, encode_split
from vaswani.prepare.read import CorpusSource, corpus_languages, open_corpus
from vaswani.prepare.split import KeptText, cleaning_record, split_corpus
from vaswani.prepare.vocab import dataset_tokenizers, forced_languages
from vaswani.safe_io import built_in_place
from vaswani.tasks import get_task


def check_out(out: Path, inputs: list[str], opts: PrepareOptions, force: bool) -> None:
    """Refuse an --out that is a file, that holds something (unless --force), or that holds an
    input --force would delete."""
    if out.exists() and not out.is_dir():
        raise DataError(f"out='{out}': exists and is not a directory; give another out=...")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise DataError(
                f"{out}: already exists and is not empty; give another out=..., or force=True"
            )
        for given in [*inputs, *opts.back_translated, opts.ding_path, opts.tokenizer_from]:
            inside = given is not None and Path(given).resolve().is_relative_to(out.resolve())
            if inside and Path(given).exists():
                raise DataError(
                    f"out='{out}' holds the input {given}, which force=True would delete; "
                    "give another out=..."
                )


def check_options(opts: PrepareOptions) -> None:
    """Refuse options out of range, or meant for another task, before anything is read."""
    if opts.vocab_size is not None and not 260 <= opts.vocab_size <= LIMITS["vocab_size"]:
        raise DataError(
            f"vocab_size={opts.vocab_size}: must be in 260 (4 specials + 256 bytes) .. "
            f"{LIMITS['vocab_size']:,}"
        )
    if opts.tokenizer_sample < 0:
        raise DataError(f"tokenizer_sample={opts.tokenizer_sample}: must be 0 (all pairs) or more")
    if opts.max_example_len < 3:
        raise DataError(f"max_example_len={opts.max_example_len}: must be at least 3")
    parallel = get_task(opts.task).parallel
    if opts.lang_id and not parallel:
        raise DataError("lang_id=True is for translation pairs (task='translate')")
    if opts.word_alignments and not parallel:
        raise DataError("word_alignments=True is for translation pairs (task='translate')")
    if opts.tokenizer_from is not None and not parallel:
        raise DataError(
            f"tokenizer_from='{opts.tokenizer_from}' is for fine-tuning translation models "
            "(task='translate')"
        )
    try:
        check_token_form(opts.language_token)
    except ValueError as error:
        raise DataError(f"language_token={opts.language_token!r}: {error}") from None
    tag = opts.back_translation_tag
    if not tag or tag != "".join(tag.split()):
        raise DataError(f"back_translation_tag={tag!r}: give one token, without spaces (<BT>)")
    if not (math.isfinite(opts.temperature) and opts.temperature >= 1):
        raise DataError(f"temperature={opts.temperature}: must be 1 (as the corpus is) or more")


def prepare(inputs: list[str], out: Path, opts: PrepareOptions, force: bool = False) -> dict:
    """Read, deduplicate, split, train the tokenizer, encode, filter and write; returns meta."""
    out = Path(out)
    check_out(out, inputs, opts, force)
    check_options(opts)
    corpus = open_corpus(inputs, opts)
    valid_fraction = corpus.valid_fraction if opts.valid_fraction is None else opts.valid_fraction
    test_fraction = corpus.test_fraction if opts.test_fraction is None else opts.test_fraction
    if not (valid_fraction >= 0 and test_fraction >= 0 and valid_fraction + test_fraction < 1):
        raise DataError(
            f"valid_fraction={valid_fraction} and test_fraction={test_fraction}: must be >= 0 "
            "and sum to less than 1"
        )

    with built_in_place(out) as work:
        return _prepare_into(work, corpus, opts, valid_fraction, test_fraction)


def _prepare_into(
    work: Path,
    corpus: CorpusSource,
    opts: PrepareOptions,
    valid_fraction: float,
    test_fraction: float,
) -> dict:
    if corpus.generated:
        opts = dataclasses.replace(opts, max_length_ratio=0.0)
    languages = corpus_languages(corpus, opts)
    # The index of a multilingual dataset's language pair of each line (uint16) beside its text.
    columns = [*SIDES, "pair"] if languages is not None else SIDES
    raw = {
        (split, column): work / f"raw.{split}.{column}" for split in SPLITS for column in columns
    }
    records = work / "raw.train.pairs"
    counts, cleaned, corpora, held_out, tagged_from = split_corpus(
        corpus, raw, records, valid_fraction, test_fraction, opts
    )
    # Decontamination compares keys, so it needs no pass over the text: the later passes skip the
    # dropped pairs by this mask.
    sides = get_task(opts.task).sides
    excluded = exclusion_keys(opts.exclude, opts.max_line_bytes)
    keep = contamination_mask(records, held_out, excluded, cleaned, sides)
    if not keep.any():
        raise DataError("no training pairs left after reading; check the input files")
    text = KeptText(raw, keep, languages, opts.temperature, tagged_from)
    tokenizers, tokenizer_meta, prefix = dataset_tokenizers(work, raw, records, text, opts)
    counts["train"] = text.training_pairs()
    largest = max(tokenizer_meta["vocab_size"].values())
    dtype = np.dtype("<u2") if largest <= 1 << 16 else np.dtype("<u4")
    encoding = Encoding(tokenizers, dtype, opts, prefix, languages)
    splits_meta = {
        split: encode_split(encoding, work, split, text.pairs(split, sampled=True), counts[split])
        for split in SPLITS
    }
    for path in [*raw.values(), records]:
        path.unlink()

    dropped = corpus.dropped + cleaned
    if not get_task(opts.task).parallel and "duplicate pair" in dropped:
        dropped["duplicate text"] = dropped.pop("duplicate pair")
    meta = {
        "format_version": FORMAT_VERSION,
        "task": opts.task,
        "corpus": corpus.description,
        **({"corpora": corpora} if len(corpora) > 1 else {}),
        "cleaning": cleaning_record(opts),
        "pairs_read": sum(record["pairs_read"] for record in corpora),
        "dropped_while_reading": dict(sorted(dropped.items())),
        "split_fractions": {"valid": valid_fraction, "test": test_fraction},
        "tokenizer": tokenizer_meta,
        "max_example_len": opts.max_example_len,
        "dtype": dtype.str,
        "splits": splits_meta,
    }
    if languages is not None:
        meta["languages"] = text.languages_record(opts.temperature, splits_meta)
    elif opts.src_lang or opts.tgt_lang:  # what splits a text into sentences when translating
        meta["pair"] = {"source": opts.src_lang, "target": opts.tgt_lang}
    forced = forced_languages(opts.tokenizer_from)
    if forced is not None:  # a model told both languages keeps all its languages
        meta["languages"] = {**meta.get("languages", {}), **forced.record()}
    if tagged_from is not None:
        meta["back_translated"] = {
            **tokenizer_meta["back_translation_tag"],
            "files": [str(path) for path in opts.back_translated],
            "train_pairs": splits_meta["train"].get("back_translated", 0),
        }
    if opts.word_alignments:
        train = ParallelSplit(work, "train", dtype)
        meta["word_alignments"] = write_alignments(
            work, train, tokenizers["src"], tokenizers["tgt"]
        )
    (work / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return meta
