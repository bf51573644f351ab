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
import math
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from itertools import compress, islice
from pathlib import Path
from typing import Any

import numpy as np

from vaswani.config import LIMITS, one_of
from vaswani.data.builtin import (
    DING_PATH,
    NUMBERS_MULTI_PAIRS,
    ding_de_en,
    grammar_en,
    numbers_de,
    numbers_pair,
    sentiment_en,
)
from vaswani.data.clean import (
    DEDUPE,
    PAIR_RECORD,
    PairFilter,
    contamination_mask,
    exclusion_keys,
    ratio_outlier,
    record_chunks,
    text_key,
)
from vaswani.data.corpora import DEFAULT_MAX_LINE_BYTES, DataError, Pair, pair_digest, split_of
from vaswani.data.dataset import FORMAT_VERSION, SIDES, SPLITS
from vaswani.data.formats import FORMATS, Corpus, ReadOptions, open_corpora
from vaswani.data.formats.xml import MARKUP
from vaswani.data.ids import IdsWriter
from vaswani.data.langid import LanguageFilter
from vaswani.data.tokenizer import (
    SPECIAL_TOKENS,
    LabelSet,
    SubwordTokenizer,
    auto_vocab_size,
    iter_text_lines,
    load_tokenizers,
)
from vaswani.files import UnsafeFileError, member, read_json
from vaswani.languages import LANGUAGE_TOKEN, Languages, check_token_form, pair_name, parse_pair
from vaswani.progress import progress_bar
from vaswani.tasks import Task, builtin_corpora, get_task, task_for_corpus

LABELS_FILE = "labels.json"
ENCODE_CHUNK = 10_000
MAX_WEIGHT = 100.0


@dataclass
class PrepareOptions:
    task: str = "translate"
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
    lang_id: bool = False
    """Drop pairs with a side of 4+ words identified (lingua) as the other language of the pair:
    needs --src-lang and --tgt-lang; about 5,000 pairs of sentences a second on 2 cores."""
    drop_held_out: bool = True
    """Drop training pairs whose source or target (normalised) is in the valid or test split."""
    exclude: tuple[Path, ...] = ()
    """Files of sentences (an external test set; both columns of a TSV line) that no training pair
    may contain, as source or target."""
    weights: tuple[tuple[str, float], ...] = ()
    """(corpus, weight) pairs: each training pair of that corpus (a file given, or every file
    under a directory given) is used `weight` times: 2 doubles a small in-domain corpus, 0.5
    keeps half of a large one (which half: by a hash of each pair). Valid and test are not
    weighted."""
    pairs: tuple[str, ...] = ()
    """Several language pairs in one multilingual dataset, each SRC-TGT=FILE (a TSV, TMX, XLIFF,
    PO, MO or JSONL file, or two aligned files joined by a comma: de-en=corpus.de,corpus.en; a
    region after _: pt_BR-en). Each source gets a token that asks for its target language."""
    language_token: str = LANGUAGE_TOKEN
    """multilingual: the token put before every source to ask for its target language, {lang}
    standing for the target's code (<2fr>, as Johnson et al. 2017; OPUS-MT writes >>{lang}<<)."""
    temperature: float = 5.0
    """multilingual: training pairs are sampled in proportion to (pairs of the language
    pair)^(1/T) (Arivazhagan et al. 2019): 1 keeps the corpus as it is; 5 gives a pair 100 times
    smaller 40% of the larger one's share instead of 1%. Done by repeating the smaller pairs'
    examples (at most 100 times); valid and test are not repeated."""
    tokenizer_sample: int = 1_000_000
    """Learn the BPE from at most this many training pairs, evenly spread; 0: all of them. A
    million pairs hold every frequent merge (on 1M pairs of ding-de-en phrases a 200k sample gave
    the same tokens per pair as all of them) and take about a minute on 2 cores."""


@dataclass
class CorpusSource:
    """What to read: one corpus or several (`parts`, read in order), what to record about them, and
    the default split fractions."""

    description: dict
    parts: list[Corpus]
    valid_fraction: float = 0.01
    test_fraction: float = 0.01
    generated: bool = False
    """Made by rule (numbers-multi), so its lengths are right: no length-ratio filter (an English
    number takes four times the tokens of its German one-word spelling)."""

    @property
    def dropped(self) -> Counter:
        """What the readers skipped, by reason, over all parts (complete once they are read)."""
        return sum((part.dropped for part in self.parts), Counter())


def single(
    description: dict, pairs: Iterator[Pair], dropped: Counter, **fractions: float
) -> CorpusSource:
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
    task = get_task(opts.task)
    if opts.pairs:
        return open_pairs(inputs, opts)
    if not inputs:
        if task.default_corpus is None:
            raise DataError(f"give a corpus: a built-in name ({', '.join(task.corpora)}) or files")
        inputs = [task.default_corpus]
    corpus_task = task_for_corpus(inputs[0]) if len(inputs) == 1 else None
    if corpus_task not in (None, task):
        raise DataError(f"{inputs[0]} is a corpus for --task {corpus_task}, not {task}")
    if corpus_task is not None:
        return builtin_corpus(inputs[0], opts, dropped)
    paths = [Path(p) for p in inputs]
    for path in paths:
        if path.is_dir() and not task.parallel:
            raise DataError(f"{path}: is a directory; give the text file(s) in it")
        if not path.exists():  # a FIFO or `<(command)` is fine: it is read once, in order
            known = ", ".join(builtin_corpora())
            raise DataError(f"{path}: no such file (and not a built-in corpus: {known})")
    if not task.parallel:
        return single(*task.read_files(paths, read), dropped)
    parts = open_corpora(paths, read_options(opts, opts.src_lang, opts.tgt_lang))
    if len(parts) == 1:
        return CorpusSource(parts[0].description, parts)
    return CorpusSource({"name": "several", "corpora": len(parts)}, parts)


def builtin_corpus(name: str, opts: PrepareOptions, dropped: Counter) -> CorpusSource:
    """The built-in corpus called `name` (`vaswani.tasks`: each task's `corpora`)."""
    if name in ("grammar-en", "sentiment-en"):
        make = grammar_en if name == "grammar-en" else sentiment_en
        description = {"name": name, "size": opts.builtin_size, "seed": opts.seed}
        pairs = make(opts.builtin_size, opts.seed)
        return single(description, pairs, dropped, valid_fraction=0.05, test_fraction=0.05)
    if name == "numbers-de":
        description = {
            "name": "numbers-de",
            "size": opts.numbers_size,
            "seed": opts.seed,
            "max_number": opts.numbers_max,
        }
        pairs = numbers_de(opts.numbers_size, opts.seed, opts.numbers_max)
        return single(description, pairs, dropped, valid_fraction=0.05, test_fraction=0.05)
    if name == "numbers-multi":
        return numbers_multi(opts)
    pairs = ding_de_en(Path(opts.ding_path), dropped)
    return single({"name": "ding-de-en", "path": str(opts.ding_path)}, pairs, dropped)


def numbers_multi(opts: PrepareOptions) -> CorpusSource:
    """The built-in multilingual corpus: `numbers_size` numbers for each of its language pairs."""
    parts = []
    for name in NUMBERS_MULTI_PAIRS:
        description = {
            "name": "numbers-multi",
            "pair": name,
            "size": opts.numbers_size,
            "seed": opts.seed,
            "max_number": opts.numbers_max,
        }
        pairs = numbers_pair(name, opts.numbers_size, opts.seed, opts.numbers_max)
        parts.append(Corpus(description, pairs, Counter()))
    return CorpusSource(
        {"name": "numbers-multi", "pairs": list(NUMBERS_MULTI_PAIRS)},
        parts,
        valid_fraction=0.05,
        test_fraction=0.05,
        generated=True,
    )


def read_options(opts: PrepareOptions, src_lang: str | None, tgt_lang: str | None) -> ReadOptions:
    fields = tuple(name.strip() for name in opts.fields.split(","))
    if len(fields) != 2 or not all(fields):
        raise DataError(f"--fields {opts.fields}: give two keys, source then target (de,en)")
    return ReadOptions(
        opts.format,
        src_lang,
        tgt_lang,
        opts.markup,
        fields,  # type: ignore[arg-type]
        opts.skip_invalid,
        opts.max_line_bytes,
    )


def open_pairs(inputs: list[str], opts: PrepareOptions) -> CorpusSource:
    """The corpora of a multilingual dataset, one or more per --pair SRC-TGT=FILE[,FILE]; each
    part's description names its pair."""
    if inputs:
        raise DataError(
            "give the corpora of a multilingual dataset with --pair SRC-TGT=FILE "
            f"only, not also as arguments ({' '.join(inputs)})"
        )
    if not get_task(opts.task).parallel:
        raise DataError("--pair is for translation (--task translate)")
    parts, names = [], []
    for spec in opts.pairs:
        pair, equals, files = spec.partition("=")
        try:
            src, tgt = parse_pair(pair)
        except ValueError as error:
            raise DataError(f"--pair {spec}: {error}") from None
        paths = [Path(p) for p in files.split(",") if p.strip()]
        if not equals or not 1 <= len(paths) <= 2:
            raise DataError(
                f"--pair {spec}: give SRC-TGT=FILE, or SRC-TGT=SOURCE,TARGET for two aligned files"
            )
        for path in paths:
            if not path.exists():
                raise DataError(f"--pair {spec}: {path}: no such file")
        name = pair_name(src, tgt)
        names.append(name)
        for part in open_corpora(paths, read_options(opts, src, tgt)):
            part.description["pair"] = name
            parts.append(part)
    return CorpusSource({"name": "pairs", "pairs": list(dict.fromkeys(names))}, parts)


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


def check_out(out: Path, inputs: list[str], opts: PrepareOptions, force: bool) -> None:
    """Refuse an --out that is a file, that holds something (unless --force), or that holds an
    input --force would delete."""
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


def check_options(opts: PrepareOptions) -> None:
    """Refuse options out of range, or meant for another task, before anything is read."""
    if opts.vocab_size is not None and not 260 <= opts.vocab_size <= LIMITS["vocab_size"]:
        raise DataError(
            f"--vocab-size must be in 260 (4 specials + 256 bytes) .. {LIMITS['vocab_size']:,}, "
            f"got {opts.vocab_size}"
        )
    if opts.tokenizer_sample < 0:
        raise DataError(
            f"--tokenizer-sample must be 0 (all pairs) or more, got {opts.tokenizer_sample}"
        )
    if opts.max_example_len < 3:
        raise DataError(f"--max-example-len must be at least 3, got {opts.max_example_len}")
    parallel = get_task(opts.task).parallel
    if opts.lang_id and not parallel:
        raise DataError("--lang-id is for translation pairs (--task translate)")
    if opts.tokenizer_from is not None and not parallel:
        raise DataError("--tokenizer-from is for fine-tuning translation models (--task translate)")
    try:
        check_token_form(opts.language_token)
    except ValueError as error:
        raise DataError(f"--language-token: {error}") from None
    if not (math.isfinite(opts.temperature) and opts.temperature >= 1):
        raise DataError(
            f"--temperature must be 1 (as the corpus is) or more, got {opts.temperature}"
        )


def prepare(inputs: list[str], out: Path, opts: PrepareOptions, force: bool = False) -> dict:
    """Read, deduplicate, split, train the tokenizer, encode, filter and write; returns meta."""
    out = Path(out)
    check_out(out, inputs, opts, force)
    check_options(opts)
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
    if corpus.generated:
        opts = dataclasses.replace(opts, max_length_ratio=0.0)
    languages = corpus_languages(corpus, opts)
    # The index of a multilingual dataset's language pair of each line (uint16) beside its text.
    columns = [*SIDES, "pair"] if languages is not None else SIDES
    raw = {
        (split, column): work / f"raw.{split}.{column}" for split in SPLITS for column in columns
    }
    records = work / "raw.train.pairs"
    counts, cleaned, corpora, held_out = _split_corpus(
        corpus, raw, records, valid_fraction, test_fraction, opts
    )
    # Decontamination compares keys, so it needs no pass over the text: the later passes skip the
    # dropped pairs by this mask.
    sides = get_task(opts.task).sides
    excluded = exclusion_keys(opts.exclude, opts.max_line_bytes)
    keep = contamination_mask(records, held_out, excluded, cleaned, sides)
    if not keep.any():
        raise DataError("no training pairs left after reading; check the input files")
    text = KeptText(raw, keep, languages, opts.temperature)
    tokenizers, tokenizer_meta, prefix = _tokenizers(work, raw, records, text, opts)
    counts["train"] = text.training_pairs()
    largest = max(tokenizer_meta["vocab_size"].values())
    dtype = np.dtype("<u2") if largest <= 1 << 16 else np.dtype("<u4")
    splits_meta = {
        split: _encode_split(
            work,
            split,
            text.pairs(split, sampled=True),
            counts[split],
            tokenizers,
            dtype,
            opts,
            prefix,
            languages,
        )
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
    (work / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return meta


def _tokenizers(
    work: Path,
    raw: dict[tuple[str, str], Path],
    records: Path,
    text: KeptText,
    opts: PrepareOptions,
) -> tuple[dict[str, Any], dict, list[int] | None]:
    """The dataset's tokenizers (learnt, or --tokenizer-from a run) and their meta.json record;
    for a multilingual dataset, also the target-language token id of each language pair."""
    if opts.tokenizer_from is None:
        sides = get_task(opts.task).sides
        learnt = sides if opts.shared_vocab else sides[:1]  # (both sides of a shared vocabulary)
        words = None if opts.vocab_size is not None else training_words(records, text.keep, learnt)
        tokenizers, tokenizer_meta = _new_tokenizers(
            work, raw, partial(text.pairs, "train"), int(text.keep.sum()), words, opts
        )
    else:
        tokenizers, tokenizer_meta = _copy_tokenizers(work, Path(opts.tokenizer_from))
    prefix = None
    if text.languages is not None:
        prefix = language_token_ids(
            text.languages,
            tokenizers["src"],
            work / tokenizer_meta["files"]["src"],
            opts.tokenizer_from,
        )
    tokenizer_meta["vocab_size"] = {side: tokenizers[side].vocab_size for side in SIDES}
    return tokenizers, tokenizer_meta, prefix


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
    ) -> None:
        self.raw, self.keep, self.languages = raw, keep, languages
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

    def pairs(self, split: str, sampled: bool = False) -> Iterator[Any]:
        """The (source, target) pairs of a split, (source, target, language pair index) for a
        multilingual dataset, whose training pairs are `sampled` by temperature if asked."""
        columns = [iter_text_lines(self.raw[split, "src"]), iter_text_lines(self.raw[split, "tgt"])]
        if self.languages is not None:
            columns.append(iter(self.language_pair[split].tolist()))
        pairs: Iterator[Any] = zip(*columns, strict=True)
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


def corpus_languages(corpus: CorpusSource, opts: PrepareOptions) -> Languages | None:
    """The language pairs of a multilingual corpus (its parts name their pair), or None."""
    names = corpus.description.get("pairs")
    if not names:
        return None
    if len(names) > np.iinfo(np.uint16).max:
        raise DataError(f"{len(names)} language pairs: at most {np.iinfo(np.uint16).max}")
    return Languages([parse_pair(name) for name in names], opts.language_token)


def temperature_weights(pairs: np.ndarray, temperature: float) -> np.ndarray:
    """How many times each language pair's training pairs are used so that pair p's share of
    the training data is proportional to pairs[p]^(1/T): the largest pair once, the others
    (largest / pairs[p])^(1 - 1/T) times, at most MAX_WEIGHT; a pair without data: 0."""
    largest = max(int(pairs.max()), 1)
    with np.errstate(divide="ignore"):
        weights = (largest / pairs.astype(np.float64)) ** (1 - 1 / temperature)
    return np.where(pairs > 0, np.minimum(weights, MAX_WEIGHT), 0.0)


def repeated(
    pairs: Iterator[tuple[str, str, int]], weights: np.ndarray
) -> Iterator[tuple[str, str, int]]:
    """Each (source, target, language pair) as many times as its pair's weight says
    (`copies_of`: the whole part, and one more for a share of the pairs equal to the fraction)."""
    for pair in pairs:
        weight = float(weights[pair[2]])
        copies = 1 if weight == 1 else copies_of(pair_digest(pair[0], pair[1]), weight)
        for _ in range(copies):
            yield pair


def language_token_ids(
    languages: Languages, tokenizer: Any, file: Path, run: Path | None
) -> list[int]:
    """The id of the target-language token of each language pair: the tokens are added to a new
    tokenizer (and its file saved again); a tokenizer taken --tokenizer-from a run must have them."""
    tokens = [languages.token_of(target) for target in languages.targets]
    taken = sorted(set(tokens) & set(SPECIAL_TOKENS))
    if taken:
        raise DataError(
            f"--language-token {languages.token}: {', '.join(taken)} would be the "
            "tokenizer's own special token; choose another form"
        )
    if run is None:
        tokenizer.add_special_tokens(tokens)
        tokenizer.save(file)
    missing = [token for token in tokens if tokenizer.token_id(token) is None]
    if missing:
        raise DataError(
            f"--tokenizer-from {run}: its vocabulary has no {', '.join(missing)}; "
            "give the --language-token form that model uses (OPUS-MT: >>{lang}<<)"
        )
    return [tokenizer.token_id(languages.token_of(target)) for _, target in languages.pairs]


def training_words(records: Path, keep: np.ndarray, sides: tuple[str, ...]) -> int:
    """The words on `sides` of the kept training pairs (their `PAIR_RECORD`s in `records`)."""
    return sum(
        int(chunk[f"{side}_words"][keep[start : start + len(chunk)]].sum(dtype=np.int64))
        for start, chunk in record_chunks(records)
        for side in sides
    )


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


def _split_corpus(
    corpus: CorpusSource,
    raw: dict[tuple[str, str], Path],
    records: Path,
    valid_fraction: float,
    test_fraction: float,
    opts: PrepareOptions,
) -> tuple[Counter, Counter, list[dict], set[int]]:
    """One pass over the corpus: drop copies, duplicates (and with --lang-id pairs in the wrong
    language), assign splits by hash, apply --weight, and write (`SplitWriter`). Returns the
    pairs per split, the pairs dropped by reason, a record per corpus, and the keys of the
    held-out sentences."""
    task = get_task(opts.task)
    kept = PairFilter(opts.dedupe, drop_copies=task.parallel and opts.drop_copies)
    sides = [k for k, side in enumerate(SIDES) if side in task.sides]
    filters: dict[tuple, LanguageFilter] = {}  # by language pair, built once each
    weights = corpus_weights(corpus.parts, opts.weights)
    corpora = []
    bar = progress_bar(enabled=opts.progress, desc="reading", unit=" pairs")
    names = corpus.description.get("pairs", [])
    with SplitWriter(raw, records, sides, opts.drop_held_out) as out:
        for part, weight in zip(corpus.parts, weights, strict=True):
            before, written = kept.dropped.copy(), 0
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
                split = split_of(digest, valid_fraction, test_fraction)
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
    return out.counts, kept.dropped, corpora, out.held_out


def corpus_weights(parts: list[Corpus], weights: tuple[tuple[str, float], ...]) -> list[float]:
    """The weight of each corpus: that of the most specific --weight naming its file or a
    directory above it, else 1. A --weight that names no corpus is an error (a typing slip)."""
    found = [1.0] * len(parts)
    for given, weight in sorted(weights, key=lambda item: len(Path(item[0]).resolve().parts)):
        if not (math.isfinite(weight) and 0 < weight <= MAX_WEIGHT):
            raise DataError(
                f"--weight {given}={weight}: give a weight above 0, at most {MAX_WEIGHT}"
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
            raise DataError(f"--weight {given}: not one of the corpora read ({names})")
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


def _new_tokenizers(
    work: Path,
    raw: dict[tuple[str, str], Path],
    train_pairs: Callable[[], Iterator[Pair]],
    n_train: int,
    words: int | None,
    opts: PrepareOptions,
) -> tuple[dict[str, SubwordTokenizer], dict]:
    """Tokenizers learnt from the `n_train` training pairs, and their meta.json record. `words`:
    the words of the text they learn, to size the vocabulary from (--vocab-size auto); None when
    the size is given."""
    requested = opts.vocab_size
    if words is not None:
        opts = dataclasses.replace(opts, vocab_size=auto_vocab_size(words))
    tokenizers, files = _train_tokenizers(work, raw, train_pairs, n_train, opts)
    meta = {
        "shared": files["src"] == files["tgt"],
        "requested_vocab_size": requested if requested is not None else "auto",
        **({"auto_vocab_size": {"words": words}} if words is not None else {}),
        "min_frequency": opts.min_frequency,
        "sample_pairs": min(opts.tokenizer_sample or n_train, n_train),
        "files": files,
    }
    if get_task(opts.task).labelled:
        meta["labels"] = True
    return tokenizers, meta


def _train_tokenizers(
    work: Path,
    raw: dict[tuple[str, str], Path],
    train_pairs: Callable[[], Iterator[Pair]],
    n_train: int,
    opts: PrepareOptions,
) -> tuple[dict[str, SubwordTokenizer], dict[str, str]]:
    """BPE learned from the training split only: one shared tokenizer (§3.4), or one per side.
    A language model's text is all on the target side; a classifier's labels get a `LabelSet`
    made from every split (a label seen only in the test split is still a class)."""
    sample = min(opts.tokenizer_sample or n_train, n_train)

    def text_of(*sides: str) -> Iterator[str]:  # those sides of `sample` pairs, evenly spread
        columns = [SIDES.index(side) for side in sides]
        for i, pair in enumerate(train_pairs()):
            if (i * sample) % n_train < sample:
                yield from (pair[k] for k in columns)

    task = get_task(opts.task)
    if task.labelled:
        texts = text_of(*task.sides)
        labels = sorted(set(iter_text_lines(*(raw[split, "tgt"] for split in SPLITS))))
        if len(labels) < 2:
            raise DataError(f"a classification dataset needs at least 2 labels, found {labels}")
        tokenizers = {
            "src": SubwordTokenizer.train(texts, opts.vocab_size, opts.min_frequency, sample),
            "tgt": LabelSet(labels),
        }
        files = {"src": "tokenizer.json", "tgt": LABELS_FILE}
    elif opts.shared_vocab or not task.parallel:  # a language model's one side is shared too
        texts = text_of(*task.sides)
        shared = SubwordTokenizer.train(
            texts, opts.vocab_size, opts.min_frequency, len(task.sides) * sample
        )
        tokenizers = {"src": shared, "tgt": shared}
        files = {"src": "tokenizer.json", "tgt": "tokenizer.json"}
    else:
        tokenizers = {
            side: SubwordTokenizer.train(text_of(side), opts.vocab_size, opts.min_frequency, sample)
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
    chunk: list[Any],
    tokenizers: dict[str, SubwordTokenizer],
    room: dict[str, int],
    task: Task,
    prefix: list[int] | None = None,
) -> tuple[dict[str, list[list[int]]], list[int], int]:
    """Token ids of a chunk of pairs by side, the indices of those that fit their `room`, and how
    many texts were cut into pieces (a language model's long texts are cut, not dropped). A
    multilingual dataset's pairs are (source, target, language pair), and each source starts with
    the id `prefix[language pair]`: the token that asks for its target language."""
    ids = {
        side: tokenizers[side].encode_batch([p[k] for p in chunk]) for k, side in enumerate(SIDES)
    }
    if prefix is not None:
        ids["src"] = [
            [prefix[pair[2]], *source] for pair, source in zip(chunk, ids["src"], strict=True)
        ]
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
    pairs: Iterator[Any],
    tokenizers: dict[str, SubwordTokenizer],
    room: dict[str, int],
    task: Task,
    prefix: list[int] | None = None,
) -> Iterator[tuple[list[Any], tuple[dict[str, list[list[int]]], list[int], int]]]:
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


def _encode_split(
    work: Path,
    split: str,
    pairs: Iterator[Pair],
    count: int,
    tokenizers: dict[str, SubwordTokenizer],
    dtype: np.dtype,
    opts: PrepareOptions,
    prefix: list[int] | None = None,
    languages: Languages | None = None,
) -> dict:
    """Encode one split in chunks, drop pairs over max_example_len (cut a language model's texts into
    pieces instead), write ids (and evaluation text; for a multilingual dataset, the language pair
    of each line in {split}.pair.txt)."""
    by_pair: Counter = Counter()
    writers = {side: IdsWriter(work / f"{split}.{side}", dtype) for side in SIDES}
    lengths: dict[str, list[np.ndarray]] = {"src": [], "tgt": []}
    too_long = cut = off_ratio = 0
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
                found = [pair_name(*languages.pairs[chunk[i][2]]) for i in keep]
                by_pair.update(found)
                if text_out:
                    text_out["pair"].writelines(name + "\n" for name in found)
            bar.update(len(chunk))
        bar.close()
    every = {side: np.concatenate([np.zeros(0, np.int32), *lengths[side]]) for side in SIDES}
    return {
        "pairs": len(every["src"]),
        "filtered_too_long": too_long,
        **({"filtered_length_ratio": off_ratio} if ratio_checked else {}),
        **({"long_texts_cut": cut} if task.cuts_long_texts else {}),
        "src_lengths": length_stats(every["src"]),
        "tgt_lengths": length_stats(every["tgt"]),
        "sha256": {side: writers[side].close() for side in SIDES},
        **({"by_pair": dict(sorted(by_pair.items()))} if languages is not None else {}),
    }
