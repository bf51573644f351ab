"""Stage 1 of `prepare`, read: the corpus a command names (a built-in one, files, or a multilingual
dataset's --pair files) as one stream of pairs per part, with what the readers skipped
(`CorpusSource`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vaswani.data.builtin import (
    NUMBERS_MULTI_PAIRS,
    ding_de_en,
    grammar_en,
    numbers_de,
    numbers_pair,
    sentiment_en,
)
from vaswani.data.corpora import DataError, Pair
from vaswani.data.options import PrepareOptions
from vaswani.data.readers import Corpus, ReadOptions, open_corpora
from vaswani.languages import Languages, pair_name, parse_pair
from vaswani.tasks import builtin_corpora, get_task, task_for_corpus


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
    description: dict, pairs: Iterator[Pair], dropped: Counter, held_out: float = 0.01
) -> CorpusSource:
    """One corpus as the source of a dataset; `held_out`: its share in each of valid and test."""
    return CorpusSource(description, [Corpus(description, pairs, dropped)], held_out, held_out)


def open_corpus(inputs: list[str], opts: PrepareOptions) -> CorpusSource:
    """A built-in corpus by name, or files: for translation one TSV file or two aligned files
    (source, then target); for lm any number of text files; for classify one TSV of text, label.
    No input: the task's built-in corpus (lm: grammar-en, classify: sentiment-en). The
    --back-translated files come last, as parts marked "back_translated"."""
    corpus = open_real_corpus(inputs, opts)
    if opts.back_translated:
        if opts.pairs or not get_task(opts.task).parallel:
            raise DataError(
                "back_translated=... is for a dataset of one language pair (task='translate', "
                "no pairs)"
            )
        synthetic = open_corpora(
            list(opts.back_translated), read_options(opts, opts.src_lang, opts.tgt_lang)
        )
        for part in synthetic:
            part.description["back_translated"] = True
        corpus = CorpusSource(
            {"name": "several", "corpora": len(corpus.parts) + len(synthetic)},
            [*corpus.parts, *synthetic],
            corpus.valid_fraction,
            corpus.test_fraction,
            corpus.generated,
        )
    return corpus


def open_real_corpus(inputs: list[str], opts: PrepareOptions) -> CorpusSource:
    """`open_corpus` before the back-translated pairs."""
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
        raise DataError(f"{inputs[0]} is a corpus for task='{corpus_task}', not {task}")
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
        return single(description, pairs, dropped, held_out=0.05)
    if name == "numbers-de":
        description = {
            "name": "numbers-de",
            "size": opts.numbers_size,
            "seed": opts.seed,
            "max_number": opts.numbers_max,
        }
        pairs = numbers_de(opts.numbers_size, opts.seed, opts.numbers_max)
        return single(description, pairs, dropped, held_out=0.05)
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
        raise DataError(f"fields={opts.fields}: give two keys, source then target (de,en)")
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
            "give the corpora of a multilingual dataset as pairs=SRC-TGT=FILE,... "
            f"only, not also as inputs ({' '.join(inputs)})"
        )
    if not get_task(opts.task).parallel:
        raise DataError("pairs=... is for translation (task='translate')")
    parts, names = [], []
    for spec in opts.pairs:
        pair, equals, files = spec.partition("=")
        try:
            src, tgt = parse_pair(pair)
        except ValueError as error:
            raise DataError(f"the pairs entry {spec}: {error}") from None
        paths = [Path(p) for p in files.split(",") if p.strip()]
        if not equals or not 1 <= len(paths) <= 2:
            raise DataError(
                f"the pairs entry {spec}: give SRC-TGT=FILE, or SRC-TGT=SOURCE,TARGET for two "
                "aligned files"
            )
        for path in paths:
            if not path.exists():
                raise DataError(f"the pairs entry {spec}: {path}: no such file")
        name = pair_name(src, tgt)
        names.append(name)
        for part in open_corpora(paths, read_options(opts, src, tgt)):
            part.description["pair"] = name
            parts.append(part)
    return CorpusSource({"name": "pairs", "pairs": list(dict.fromkeys(names))}, parts)


def corpus_languages(corpus: CorpusSource, opts: PrepareOptions) -> Languages | None:
    """The language pairs of a multilingual corpus (its parts name their pair), or None."""
    names = corpus.description.get("pairs")
    if not names:
        return None
    if len(names) > np.iinfo(np.uint16).max:
        raise DataError(f"{len(names)} language pairs: at most {np.iinfo(np.uint16).max}")
    return Languages([parse_pair(name) for name in names], opts.language_token)
