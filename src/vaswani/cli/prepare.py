"""Read the text of a task, drop empty, copied and duplicate examples, split train/valid/test by a
hash of each example, drop training pairs whose text is in the valid or test split (or an
--exclude file), train a byte-level BPE tokenizer on the training split, and write memory-mappable
token ids and meta.json to --out. CORPUS_OR_PATHS by --task: translate: a built-in corpus
(numbers-de, ding-de-en), two aligned files (source, then target), or one or more corpora by
extension or --format: .tsv (source<TAB>target), .tmx, .xlf/.xliff, .po, .mo (a directory: every
catalog in it), .jsonl; lm: text files, one text (sentence, paragraph) a line, or the built-in
grammar-en (the default); classify: one TSV file of text<TAB>label lines, or the built-in
sentiment-en (the default). Text files may be gzip-compressed. Several language pairs in one
multilingual dataset: --pair SRC-TGT=FILE repeated (or the built-in numbers-multi); each source then
starts with a token asking for its target language."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from vaswani.cli.common import CliError, positive_int
from vaswani.cli.fields import add_field_flags, settings_from
from vaswani.config import PRESET_TRAINING
from vaswani.data import PreparedData, PrepareOptions, TokenBatchSampler
from vaswani.prepare import prepare
from vaswani.tasks import Task, get_task

HELP = "turn text into a dataset for training (tokenizer, token ids, meta.json)"
OPTIONS = (
    "task",
    "vocab_size",
    "max_example_len",
    "valid_fraction",
    "test_fraction",
    "skip_invalid",
    "max_line_bytes",
    "numbers_size",
    "numbers_max",
    "builtin_size",
    "seed",
    "ding_path",
    "tokenizer_from",
    "format",
    "src_lang",
    "word_alignments",
    "tgt_lang",
    "markup",
    "fields",
    "dedupe",
    "drop_copies",
    "drop_held_out",
    "max_length_ratio",
    "lang_id",
    "tokenizer_sample",
    "language_token",
    "temperature",
    "back_translation_tag",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs",
        nargs="*",
        metavar="CORPUS_OR_PATHS",
        help="a built-in corpus (numbers-de, ding-de-en, numbers-multi) or files; see above",
    )
    parser.add_argument(
        "--pair",
        action="append",
        default=[],
        metavar="SRC-TGT=FILE",
        help="a language pair of a multilingual dataset and its corpus: a file of any format "
        "above, or two aligned files joined by a comma (de-en=train.de,train.en); may be "
        "repeated, and one pair may be given several files",
    )
    parser.add_argument("--out", type=Path, help="directory to write (required)")
    add_field_flags(parser, PrepareOptions, OPTIONS, flags={"builtin_size": "--size"})
    parser.add_argument(
        "--separate-vocab",
        action="store_true",
        help="one tokenizer per language instead of a shared one (paper §3.4 shares)",
    )
    parser.add_argument(
        "--batch-tokens",
        type=positive_int,
        default=PRESET_TRAINING["small"]["batch_tokens"],
        help="token budget of a training batch, for the padding report",
    )
    parser.add_argument(
        "--exclude",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a file of sentences (an external test set; both columns of a TSV line) that no "
        "training pair may contain; may be repeated",
    )
    parser.add_argument(
        "--back-translated",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="synthetic pairs from `vaswani backtranslate` (or any corpus file): training only, "
        "each source led by the --back-translation-tag token; their share set by --weight "
        "FILE=W; may be repeated",
    )
    parser.add_argument(
        "--weight",
        type=corpus_weight,
        action="append",
        default=[],
        metavar="CORPUS=W",
        help="use each training pair of CORPUS (a file given, or a directory of catalogs) W "
        "times: 2 doubles a small in-domain corpus next to a large one, 0.5 keeps half; may be "
        "repeated (valid and test are not weighted)",
    )
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")


def corpus_weight(text: str) -> tuple[str, float]:
    corpus, equals, weight = text.rpartition("=")
    try:
        if not (corpus and equals):
            raise ValueError
        return corpus, float(weight)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give CORPUS=WEIGHT, e.g. in-domain.tmx=2"
        ) from None


def run(args: argparse.Namespace) -> int:
    if args.out is None:
        raise CliError("--out is required: the directory to write the dataset to")
    opts = settings_from(
        PrepareOptions,
        args,
        OPTIONS,
        shared_vocab=not args.separate_vocab,
        exclude=tuple(args.exclude),
        back_translated=tuple(args.back_translated),
        weights=tuple(args.weight),
        pairs=tuple(args.pair),
    )
    start = time.perf_counter()
    meta = prepare(args.inputs, args.out, opts, force=args.force)
    seconds = time.perf_counter() - start
    data = PreparedData(args.out)
    print(f"prepared {args.out} in {seconds:.1f}s ({vocabulary_line(data, meta)})")
    print(
        f"read {meta['pairs_read']} examples; dropped while reading: "
        f"{meta['dropped_while_reading'] or 'none'}"
    )
    for corpus in meta.get("corpora", []):
        where = corpus.get("path") or corpus.get("pair")
        print(
            f"  {where} ({corpus['name']}): read {corpus['pairs_read']}, kept "
            f"{corpus['kept']}, dropped {corpus['dropped'] or 'none'}"
        )
    if meta.get("languages", {}).get("forced"):
        told = len(meta["languages"]["tokens"])
        print(f"each source led by its language's token, each target by its own ({told} languages)")
    if "by_pair" in meta.get("languages", {}):
        record = meta["languages"]
        print(f"language pairs (token {record['token']}, temperature {record['temperature']}):")
        for name, found in record["by_pair"].items():
            print(
                f"  {name:<12} train {found['train']:>8} (x{found['weight']:.2f})  valid "
                f"{found['valid']:>6}  test {found['test']:>6}"
            )
    train = data.split("train")
    try:
        sampler = TokenBatchSampler(train.src_lengths, train.tgt_lengths, args.batch_tokens)
    except ValueError as error:  # the data is written; only the padding report cannot be made
        raise CliError(f"prepared {args.out}, but no padding report: {error}") from None
    for name, split in meta["splits"].items():
        ratio = split.get("filtered_length_ratio")
        print(
            f"  {name:<5} {split['pairs']:>9} examples  (filtered as too long: "
            f"{split['filtered_too_long']}{'' if ratio is None else f', length ratio: {ratio}'})"
            f"  {lengths_line(get_task(opts.task), split)}"
        )
    if "back_translated" in meta:
        record = meta["back_translated"]
        print(
            f"back-translated: {record['train_pairs']:,} training pairs, sources led by "
            f"{record['token']} (id {record['id']})"
        )
    if "word_alignments" in meta:
        record = meta["word_alignments"]
        print(
            f"word alignments: {record['links']:,} links in {record['pairs']:,} training pairs "
            f"({record['aligner']}, {record['seconds']} s): train.align"
        )
    print(
        f"padding with --batch-tokens {args.batch_tokens}: "
        f"{100 * sampler.padding_fraction():.1f}% over {len(sampler.batches(0))} batches"
    )
    return 0


def vocabulary_line(data: PreparedData, meta: dict) -> str:
    vocab, task = meta["tokenizer"]["vocab_size"], get_task(data.task)
    if task.parallel:
        shared = "shared" if meta["tokenizer"]["shared"] else "separate"
        return f"{shared} vocabulary: {vocab['src']} / {vocab['tgt']}"
    line = f"{task.kind}, vocabulary {vocab[task.sides[0]]}"
    if task.labelled:
        labels = data.tgt_tokenizer.labels
        line += f", {len(labels)} labels: {', '.join(labels)}"
    return line


def lengths_line(task: Task, split: dict) -> str:
    src, tgt = split["src_lengths"], split["tgt_lengths"]
    if task.parallel:
        line = (
            f"tokens/pair src {src['mean']:.1f} tgt {tgt['mean']:.1f}, "
            f"max {src['max']}/{tgt['max']}"
        )
    else:
        side = split[f"{task.sides[0]}_lengths"]
        line = f"tokens/text {side['mean']:.1f}, max {side['max']}"
    if "long_texts_cut" in split:
        line += f", long texts cut into pieces: {split['long_texts_cut']}"
    return line
