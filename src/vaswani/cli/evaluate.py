"""Score a run on a split of the data it was trained on, or on files. A translation model:
translate the split (or --src/--ref files) and score it with sacreBLEU and chrF, printing their
signatures and the decoding speed. A language model: perplexity, exp(mean cross-entropy per token)
(or of --input, a text file). A classifier: accuracy and the confusion matrix, also drawn to
--plot (or of --input, a TSV of text<TAB>label)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from vaswani.cli.common import (
    CliError,
    add_aid_flags,
    add_decoding_flags,
    add_split_flags,
    aids_of,
    decode_config,
    load_for_inference,
    request_of,
    writable_file,
)
from vaswani.data.corpora import read_parallel_files
from vaswani.data.dataset import EncodedSplit, ParallelSplit
from vaswani.evaluate import (
    by_pair,
    classification_report,
    encode_labelled_file,
    encode_text_file,
    evaluate_translation,
    perplexity,
)
from vaswani.languages import parse_pair
from vaswani.progress import progress_bar
from vaswani.run import training_data
from vaswani.run_table import is_run, record_evaluation
from vaswani.safe_io import write_output
from vaswani.tasks import TASKS_BY_NAME
from vaswani.translation import pipeline
from vaswani.translation.engine import Engine

Split = ParallelSplit | EncodedSplit
HELP = "score a trained model on a split of its data: BLEU, perplexity or accuracy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--split", choices=("valid", "test"), default="test")
    parser.add_argument("--src", type=Path, help="translation: source file instead of a split")
    parser.add_argument("--ref", type=Path, help="translation: reference file for --src")
    parser.add_argument("--output", type=Path, help="translation: also write translations here")
    parser.add_argument(
        "--input", type=Path, help="lm: a text file; classify: a TSV of text<TAB>label"
    )
    parser.add_argument(
        "--plot",
        type=Path,
        help="classify: where to draw the confusion matrix (default RUN_DIR/confusion-SPLIT.png)",
    )
    add_decoding_flags(parser)
    add_split_flags(parser)
    add_aid_flags(parser, memory=False)


def run(args: argparse.Namespace) -> int:
    reads = {"--src": args.src, "--ref": args.ref, "the run": args.checkpoint}
    writable_file(args.output, reads={k: v for k, v in reads.items() if v is not None})
    if (args.src is None) != (args.ref is None):
        raise CliError("--src and --ref go together")
    loaded = load_for_inference(args, *TASKS_BY_NAME.values())
    if loaded.task.parallel:
        if args.input is not None:
            raise CliError(
                "a translation model is evaluated with --src FILE --ref FILE, not --input"
            )
        with loaded.computing():
            return translation(args, loaded)
    if args.src is not None:
        raise CliError(
            f"--src/--ref are for translation; give {loaded.task.described} --input FILE"
        )
    if args.input is None:
        data = training_data(loaded.info, "--input FILE")
        part, what = data.split(args.split), f"the {args.split} split of {data.directory}"
    else:
        part, what = encoded_input(args, loaded), str(args.input)
    if len(part) == 0:
        raise CliError(f"nothing to evaluate: {what} has no examples")
    if loaded.task.labelled:
        return classifier(args, loaded, part, what)
    return language_model(args, loaded, part, what)


def encoded_input(args: argparse.Namespace, loaded: Engine) -> EncodedSplit:
    """--input read like a prepared split: a language model's text file, a classifier's TSV."""
    max_len = loaded.config.max_len
    if not loaded.task.labelled:
        return encode_text_file(args.input, loaded.src_tokenizer, max_len, args.max_line_bytes)
    return encode_labelled_file(
        args.input,
        loaded.src_tokenizer,
        loaded.tgt_tokenizer,
        max_len,
        args.too_long,
        args.max_line_bytes,
    )


def translation(args: argparse.Namespace, loaded: Engine) -> int:
    targets: str | list[str] | None = args.target
    pairs: list[str] | None = None  # a multilingual split: each line's language pair
    if args.src is not None:
        loaded.prefixes(targets, 0, args.source_lang)  # wrong or missing: said before reading
        # The training data's reader: same errors for bad text, counts, and empty pairs dropped.
        read = list(read_parallel_files(args.src, args.ref, max_line_bytes=args.max_line_bytes))
        sources, references = [s for s, _ in read], [r for _, r in read]
        what = f"{args.src}"
    else:
        data = training_data(loaded.info, "--src FILE --ref FILE")
        sources, references = data.text(args.split)
        what = f"the {args.split} split of {data.directory}"
        if data.languages is not None:
            if args.target is not None:
                raise CliError(
                    "--target is for --src/--ref files: a split of a multilingual "
                    "dataset holds each line's target language"
                )
            pairs, targets = data.pair_names(args.split), data.targets(args.split)
    if not sources:
        raise CliError(f"nothing to evaluate: {what} has no non-empty sentence pairs")
    dc = decode_config(args)
    languages = [parse_pair(pair)[0] for pair in pairs] if pairs is not None else None
    # a wrong or missing --target: said before decoding
    loaded.prefixes(targets, len(sources), args.source_lang or languages)
    request = dataclasses.replace(
        request_of(args, dc, aids_of(args, loaded)),
        target=targets,
        language=args.source_lang or languages,
    )
    sentences = pipeline.sentences_of(sources, request, loaded.source_language)
    with progress_bar(total=len(sentences.flat), unit="sent", desc="translating") as bar:
        report = evaluate_translation(loaded, sentences, references, request, bar.update)
    scores, seconds, n = report.scores, report.seconds, len(references)
    search = "greedy" if dc.beam_size == 1 else f"beam {dc.beam_size}, alpha {dc.alpha}"
    print(f"{len(sources)} sentences from {what}")
    print(f"BLEU = {scores.bleu:.2f}   ({scores.bleu_signature})")
    print(f"chrF = {scores.chrf:.2f}   ({scores.chrf_signature})")
    print(f"exact match: {report.exact}/{n} ({100 * report.exact_fraction:.1f}%)")
    calibrated = "calibrated" if loaded.assess is not None else "mean token probability"
    print(
        f"confidence: Spearman {report.confidence_spearman:.3f} with sentence chrF "
        f"({calibrated}; mean {sum(report.confidences) / n:.3f})"
    )
    if report.terms is not None:
        placed = sum(p for _, _, p in report.terms)
        print(f"glossary: {placed} of {len(report.terms)} terms put in")
    per_pair = by_pair(report.hypotheses, report.references, pairs) if pairs is not None else None
    if per_pair is not None:
        print(f"{'pair':<14} {'sentences':>9} {'BLEU':>7} {'chrF':>7} {'exact':>7}")
        for name, found in per_pair.items():
            count = found.get("sentences", "")
            print(
                f"{name:<14} {count:>9} {found['bleu']:>7.2f} {found['chrf']:>7.2f} "
                f"{100 * found['exact']:>6.1f}%"
            )
    print(
        f"decoding: {seconds:.1f}s, {n / seconds:.1f} sentences/s, "
        f"{report.output_tokens / seconds:.0f} tokens/s ({search}, {loaded.precision}, "
        f"{next(loaded.model.parameters()).device})"
    )
    if args.output:
        write_output(args.output, "".join(h + "\n" for h in report.hypotheses).encode("utf-8"))
    if args.src is None and is_run(loaded.path):  # the run's own split: for `vaswani runs`
        record_evaluation(
            loaded.path,
            {
                "split": args.split,
                "bleu": scores.bleu,
                "chrf": scores.chrf,
                "exact": report.exact_fraction,
                "sentences": n,
                "search": search,
                **({"by_pair": per_pair} if per_pair else {}),
            },
        )
    return 0


def language_model(args: argparse.Namespace, loaded: Engine, part: Split, what: str) -> int:
    report = perplexity(loaded.model, part, args.batch_tokens, loaded.precision)
    print(f"{len(part)} texts ({report.tokens} tokens, end-of-text included) from {what}")
    print(f"perplexity = {report.perplexity:.3f}   (mean loss {report.loss:.4f} nats per token)")
    print(
        f"scoring: {report.seconds:.1f}s, {report.tokens / report.seconds:.0f} tokens/s "
        f"({loaded.precision})"
    )
    return 0


def classifier(args: argparse.Namespace, loaded: Engine, part: Split, what: str) -> int:
    from vaswani import plot  # matplotlib, for classifiers only

    labels = loaded.tgt_tokenizer
    report = classification_report(
        loaded.model, part, labels.labels, args.batch_tokens, loaded.precision
    )
    print(f"{report.examples} texts from {what}")
    print(
        f"accuracy = {100 * report.accuracy:.2f}%   ({report.correct}/{report.examples}; "
        f"mean loss {report.loss:.4f})"
    )
    print("confusion matrix (rows: true label, columns: predicted label):")
    print("\n".join(report.table()))
    name = args.split if args.input is None else "input"
    out = args.plot or Path(args.checkpoint) / f"confusion-{name}.png"
    plot.confusion_matrix(
        report.confusion, labels.labels, out, f"{Path(args.checkpoint).name} on {what}"
    )
    print(f"wrote {out}")
    return 0
