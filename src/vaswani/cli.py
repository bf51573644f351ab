"""The `vaswani` command: thin subcommands that parse flags, call the Python API and print."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vaswani import __version__
from vaswani.config import PRECISIONS, PRESET_TRAINING, PRESETS, TASKS, ModelConfig
from vaswani.errors import VaswaniError
from vaswani.run import CONFIG
from vaswani.tasks import get_task

if TYPE_CHECKING:
    from vaswani.config import DecodeConfig
    from vaswani.decode import Translation


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


class CliError(VaswaniError):
    """A usage error to print as one line."""


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def port_number(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number in 1 .. 65535, got {text}")
    return value


def writable_file(path: Path | None, flag: str = "--output") -> None:
    """Refuse an output path that cannot be written as a file, before any work is done."""
    if path is None:
        return
    if path.is_dir():
        raise CliError(f"{flag} {path}: is a directory; give a file name")
    if not path.parent.is_dir():
        raise CliError(f"{flag} {path}: the directory {path.parent} does not exist")


def positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def cmd_prepare(args: argparse.Namespace) -> int:
    """Turn parallel text into a tokenizer, memory-mapped token ids and meta.json."""
    import time

    from vaswani.data import PreparedData, PrepareOptions, TokenBatchSampler, prepare

    opts = PrepareOptions(
        task=args.task,
        vocab_size=args.vocab_size,
        max_len=args.max_len,
        shared_vocab=not args.separate_vocab,
        valid_fraction=args.valid_fraction,
        test_fraction=args.test_fraction,
        skip_invalid=args.skip_invalid,
        max_line_bytes=args.max_line_bytes,
        numbers_size=args.numbers_size,
        numbers_max=args.numbers_max,
        builtin_size=args.size,
        seed=args.seed,
        ding_path=args.ding_path,
        tokenizer_from=args.tokenizer_from,
    )
    start = time.perf_counter()
    meta = prepare(args.inputs, args.out, opts, force=args.force)
    seconds = time.perf_counter() - start
    vocab = meta["tokenizer"]["vocab_size"]
    if args.task == "translate":
        shared = "shared" if meta["tokenizer"]["shared"] else "separate"
        what = f"{shared} vocabulary: {vocab['src']} / {vocab['tgt']}"
    elif args.task == "lm":
        what = f"language model, vocabulary {vocab['tgt']}"
    else:
        labels = PreparedData(args.out).tgt_tokenizer.labels
        what = f"classifier, vocabulary {vocab['src']}, {len(labels)} labels: {', '.join(labels)}"
    print(f"prepared {args.out} in {seconds:.1f}s ({what})")
    print(
        f"read {meta['pairs_read']} examples; dropped while reading: "
        f"{meta['dropped_while_reading'] or 'none'}"
    )
    train = PreparedData(args.out).split("train")
    try:
        sampler = TokenBatchSampler(train.src_lengths, train.tgt_lengths, args.max_tokens)
    except ValueError as error:  # the data is written; only the padding report cannot be made
        raise CliError(f"prepared {args.out}, but no padding report: {error}") from None
    for name, split in meta["splits"].items():
        src, tgt = split["src_lengths"], split["tgt_lengths"]
        if args.task == "translate":
            lengths = (
                f"tokens/pair src {src['mean']:.1f} tgt {tgt['mean']:.1f}, "
                f"max {src['max']}/{tgt['max']}"
            )
        else:
            side = tgt if args.task == "lm" else src
            lengths = f"tokens/text {side['mean']:.1f}, max {side['max']}"
        if "long_texts_cut" in split:
            lengths += f", long texts cut into pieces: {split['long_texts_cut']}"
        print(
            f"  {name:<5} {split['pairs']:>9} examples  (filtered as too long: "
            f"{split['filtered_too_long']})  {lengths}"
        )
    print(
        f"padding with --max-tokens {args.max_tokens}: {100 * sampler.padding_fraction():.1f}% "
        f"over {len(sampler.batches(0))} batches"
    )
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """Train a model for the data's task, or resume a run."""
    from vaswani.config import TrainConfig
    from vaswani.train.loop import resume_config, train

    if args.resume:
        tc = resume_config(args.resume, max_steps=args.max_steps, max_minutes=args.max_minutes)
    else:
        if args.data is None or args.out is None:
            raise CliError("--data and --out are required (or --resume RUN_DIR)")
        given = {
            name: getattr(args, name)
            for name in TRAIN_FLAGS
            if getattr(args, name, None) is not None
        }
        model = dict(parse_assignment(item) for item in args.model)
        tc = TrainConfig(data=str(args.data), out=str(args.out), model=model, **given)
    if tc.max_steps is None and tc.max_minutes is None:
        raise CliError("give a budget: --max-steps N and/or --max-minutes M")
    result = train(tc, resume=bool(args.resume), reset_data_position=args.reset_data_position)
    line = f"stopped by {result.stopped_by} at step {result.step}; run directory {result.run_dir}"
    if result.best is not None:
        line += f"; best validation {get_task(result.task).best_line(result.best)}"
    print(line)
    return 130 if result.stopped_by == "interrupt" else 0


def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0.0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def probability(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text}")
    return value


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    """Which run, which of its weights, where and in what precision to run them."""
    parser.add_argument(
        "--checkpoint", type=Path, required=True, metavar="RUN_DIR", help="a run directory"
    )
    parser.add_argument(
        "--weights",
        choices=("best", "latest", "averaged"),
        default="best",
        help="best validation figure (chrF, loss or accuracy), the latest checkpoint, or "
        "`vaswani average`'s",
    )
    add_placement_flags(parser)


PRECISION_HELP = (
    "auto: bf16 where the hardware computes it natively (CUDA compute capability >= 8.0, CPUs "
    "with AVX512-BF16 or AMX), fp16 with loss scaling on older CUDA GPUs, fp32 elsewhere; "
    "`vaswani env` shows the choice"
)
DEVICE_HELP = "auto (CUDA, then Apple MPS, then CPU), cpu, cuda, cuda:1, mps"


def add_placement_flags(parser: argparse.ArgumentParser) -> None:
    """--precision and --device, the same for every command that runs a model."""
    parser.add_argument("--precision", choices=PRECISIONS, default="auto", help=PRECISION_HELP)
    parser.add_argument("--device", default="auto", help=DEVICE_HELP)


def add_decoding_flags(parser: argparse.ArgumentParser) -> None:
    """The flags `translate`, `evaluate` and `serve` share: the model, how to search and batch."""
    from vaswani.config import LENGTH_PENALTIES, DecodeConfig

    add_model_flags(parser)
    paper = DecodeConfig()
    parser.add_argument(
        "--beam-size",
        type=positive_int,
        default=paper.beam_size,
        help="hypotheses kept per sentence (paper: 4); 1 is greedy search",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=paper.alpha,
        help="length penalty strength (paper: 0.6); 0 ranks by log-probability alone",
    )
    parser.add_argument(
        "--length-penalty",
        choices=LENGTH_PENALTIES,
        default=paper.length_penalty,
        help="gnmt: divide log P by ((5 + length) / 6) ** alpha; plain: by length ** alpha",
    )
    parser.add_argument(
        "--max-extra",
        type=non_negative_int,
        default=paper.max_extra,
        help="an output stops after its source's length + this many tokens",
    )
    add_input_flags(parser, "batch budget: source tokens (padding included) times beam size")


def add_input_flags(parser: argparse.ArgumentParser, budget_help: str) -> None:
    """The batch budget and what to do with input over the model's limits."""
    from vaswani.config import DecodeConfig

    parser.add_argument(
        "--max-tokens", type=positive_int, default=DecodeConfig().max_tokens, help=budget_help
    )
    parser.add_argument(
        "--too-long",
        choices=("error", "truncate"),
        default="error",
        help="a line longer than the model's position limit: stop with an error, or translate "
        "its beginning and warn",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=positive_int,
        default=1 << 20,
        help="refuse any input line longer than this many bytes",
    )


def decode_config(args: argparse.Namespace, n_best: int = 1) -> DecodeConfig:
    from vaswani.config import DecodeConfig

    return DecodeConfig(
        beam_size=args.beam_size,
        alpha=args.alpha,
        length_penalty=args.length_penalty,
        n_best=n_best,
        max_extra=args.max_extra,
        max_tokens=args.max_tokens,
    )


def load_for_decoding(
    args: argparse.Namespace, tasks: tuple[str, ...] = ("translate",)
) -> tuple[Any, Any, Any, dict, Any]:
    """The model (on its device, in eval mode), tokenizers, data record and an autocast context;
    a run of a task other than `tasks` is refused, naming the command that uses it. The device
    and precision chosen (`--device` / `--precision auto` resolved) are printed to stderr and
    left in `args.precision`."""
    from vaswani.data.dataset import task_of
    from vaswani.device import place
    from vaswani.run import load_trained

    placement = place(args.device, args.precision)
    model, src_tok, tgt_tok, info = load_trained(args.checkpoint, args.weights)
    task = task_of(info["meta"])
    if task not in tasks:
        raise CliError(
            f"{args.checkpoint} holds {get_task(task).described} (task {task}); "
            f"use {get_task(task).command}"
        )
    model.to(placement.device)
    for line in placement.lines():
        print(line, file=sys.stderr)
    args.precision = placement.precision
    return model, src_tok, tgt_tok, info, placement.autocast()


def read_input_lines(path: Path | None, max_line_bytes: int) -> list[str]:
    """Every line of a UTF-8 file (or of stdin when `path` is None or "-")."""
    from vaswani.data.corpora import decode_lines, open_binary, split_lines

    if path is None or str(path) == "-":
        return list(
            decode_lines(split_lines(sys.stdin.buffer, "<stdin>", max_line_bytes), "<stdin>")
        )
    with open_binary(path) as handle:
        return list(decode_lines(split_lines(handle, path, max_line_bytes), path))


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Inside: warnings (a truncated line, a dropped metrics record, ...) print as one `warning:`
    line each, without source lines. The process's own hook is back afterwards."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ARG001
        print(f"warning: {message}", file=sys.stderr)

    previous = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


# Every character str.splitlines() breaks a line at: a byte-level vocabulary can produce any of
# them, and each output must stay on its own line.
LINE_BREAKS = str.maketrans(dict.fromkeys("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029", " "))


def one_line(text: str) -> str:
    """`text` with its line-break characters printed as spaces."""
    return text.translate(LINE_BREAKS)


def format_translations(
    first_line: int, translations: list[list[Translation]], n_best: int
) -> list[str]:
    """One line per input line; with --n-best, `LINE ||| TEXT ||| SCORE` per hypothesis."""
    from vaswani.decode import best_texts

    if n_best == 1:
        return [one_line(text) for text in best_texts(translations)]
    return [
        f"{first_line + i} ||| {one_line(t.text)} ||| {t.score:.4f}"
        for i, found in enumerate(translations)
        for t in found
    ]


def cmd_translate(args: argparse.Namespace) -> int:
    """Translate arguments, a file, or stdin line by line."""
    from vaswani.decode import translate_nbest
    from vaswani.progress import progress_bar
    from vaswani.train.checkpoint import write_atomic

    if args.texts and args.input is not None:
        raise CliError("give TEXT arguments or --input FILE, not both")
    writable_file(args.output)
    dc = decode_config(args, args.n_best)
    interactive = not args.texts and args.input is None and sys.stdin.isatty()
    if args.texts:
        lines, name = args.texts, "the arguments"
    elif not interactive:
        lines = read_input_lines(args.input, args.max_line_bytes)
        name = "stdin" if args.input is None else str(args.input)
        if not lines:
            raise CliError(f"{name} is empty: nothing to translate")
    model, src_tok, tgt_tok, _, autocast = load_for_decoding(args)

    def run(texts: list[str], bar: Any = None) -> list[list[Translation]]:
        with autocast:
            return translate_nbest(
                model, src_tok, tgt_tok, texts, dc, args.too_long, bar.update if bar else None
            )

    if interactive:  # a person typing: answer each line as it comes
        print("type a sentence and press Enter; Ctrl-D ends", file=sys.stderr)
        for number, line in enumerate(sys.stdin):
            print("\n".join(format_translations(number, run([line.rstrip("\n")]), dc.n_best)))
            sys.stdout.flush()
        return 0
    with progress_bar(
        total=sum(1 for line in lines if line.strip()),
        unit="sent",
        desc="translating",
        enabled=args.input is not None,
    ) as bar:
        out = format_translations(0, run(lines, bar), dc.n_best)
    text = "".join(line + "\n" for line in out)
    if args.output is not None:
        write_atomic(args.output, text.encode("utf-8"))  # never a half-written file
        print(f"translated {len(lines)} lines of {name} into {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """sacreBLEU and chrF of a split's translations, or of --src against --ref; decoding speed."""
    import time

    from vaswani.data.corpora import read_parallel_files
    from vaswani.data.dataset import task_of
    from vaswani.decode import translate
    from vaswani.evaluate import score
    from vaswani.progress import progress_bar

    writable_file(args.output)

    if (args.src is None) != (args.ref is None):
        raise CliError("--src and --ref go together")
    model, src_tok, tgt_tok, info, autocast = load_for_decoding(args, TASKS)
    task = task_of(info["meta"])
    if task != "translate":
        if args.src is not None:
            raise CliError(
                f"--src/--ref are for translation; give {get_task(task).described} --input FILE"
            )
        return evaluate_single_stack(args, task, model, src_tok, tgt_tok, info)
    if args.input is not None:
        raise CliError("a translation model is evaluated with --src FILE --ref FILE, not --input")
    if args.src is not None:
        # The training data's reader: same errors for bad text, counts, and empty pairs dropped.
        pairs = list(read_parallel_files(args.src, args.ref, max_line_bytes=args.max_line_bytes))
        sources, references = [s for s, _ in pairs], [r for _, r in pairs]
        what = f"{args.src}"
    else:
        data = run_data(info, "--src FILE --ref FILE")
        sources, references = data.text(args.split)
        what = f"the {args.split} split of {data.directory}"
    if not sources:
        raise CliError(f"nothing to evaluate: {what} has no non-empty sentence pairs")
    dc = decode_config(args)
    search = "greedy" if dc.beam_size == 1 else f"beam {dc.beam_size}, alpha {dc.alpha}"
    start = time.perf_counter()
    with progress_bar(total=len(sources), unit="sent", desc="translating") as bar, autocast:
        hypotheses = translate(model, src_tok, tgt_tok, sources, dc, args.too_long, bar.update)
    seconds = time.perf_counter() - start
    scores = score(hypotheses, references)
    n_tokens = sum(len(ids) for ids in tgt_tok.encode_batch(hypotheses))
    device = next(model.parameters()).device
    print(f"{len(sources)} sentences from {what}")
    print(f"BLEU = {scores.bleu:.2f}   ({scores.bleu_signature})")
    print(f"chrF = {scores.chrf:.2f}   ({scores.chrf_signature})")
    exact = sum(h == r for h, r in zip(hypotheses, references, strict=True))
    print(f"exact match: {exact}/{len(references)} ({100 * exact / len(references):.1f}%)")
    print(
        f"decoding: {seconds:.1f}s, {len(sources) / seconds:.1f} sentences/s, "
        f"{n_tokens / seconds:.0f} tokens/s ({search}, {args.precision}, {device})"
    )
    if args.output:
        args.output.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    return 0


def run_data(info: dict, alternative: str) -> Any:
    """The prepared data a run was trained on (its data.json `info`), or a CliError saying why
    not and to use `alternative` flags instead."""
    from vaswani.data import PreparedData

    if info.get("path") is None:
        raise CliError(
            f"this run directory has no training data (it was imported); evaluate with {alternative}"
        )
    data_dir = Path(info["path"])
    if not (data_dir / "meta.json").is_file():
        raise CliError(
            f"the run's data directory {data_dir} is gone; prepare it again there, or evaluate "
            f"with {alternative}"
        )
    return PreparedData(data_dir)


def encoded_input(
    args: argparse.Namespace, task: str, model: Any, src_tok: Any, tgt_tok: Any
) -> Any:
    """`--input FILE` encoded like a prepared split: a language model's text file (long lines cut
    into pieces as `prepare` does), or a classifier's TSV of text<TAB>label."""
    from vaswani.data.corpora import read_text_files, read_tsv
    from vaswani.data.dataset import EncodedSplit
    from vaswani.data.prepare import cut_into_pieces
    from vaswani.decode import encode_sources

    max_len = model.cfg.max_len
    if task == "lm":
        texts = [
            text for _, text in read_text_files([args.input], max_line_bytes=args.max_line_bytes)
        ]
        pieces = cut_into_pieces(src_tok.encode_batch(texts), max_len - 1)
        return EncodedSplit([[] for _ in pieces], pieces)
    pairs = list(
        read_tsv(args.input, max_line_bytes=args.max_line_bytes, column_names="text, label")
    )
    # One position goes to the start token the classifier puts before each text.
    encoded = encode_sources(
        src_tok, [text for text, _ in pairs], max_len - 1, args.too_long, "line"
    )
    try:
        labels = tgt_tok.encode_batch([label for _, label in pairs])
    except ValueError as error:
        raise CliError(
            f"{args.input}: {error}; the model knows {', '.join(tgt_tok.labels)}"
        ) from None
    return EncodedSplit([encoded[i] for i in range(len(pairs))], labels)


def evaluate_single_stack(
    args: argparse.Namespace, task: str, model: Any, src_tok: Any, tgt_tok: Any, info: dict
) -> int:
    """Perplexity of a language model, or accuracy and a confusion matrix of a classifier, on a
    split of the run's data or on --input."""
    import time

    import torch

    from vaswani.tasks import split_loss

    if args.input is not None:
        part, what = encoded_input(args, task, model, src_tok, tgt_tok), str(args.input)
    else:
        data = run_data(info, "--input FILE")
        part, what = data.split(args.split), f"the {args.split} split of {data.directory}"
    if len(part) == 0:
        raise CliError(f"nothing to evaluate: {what} has no examples")
    n_labels = model.cfg.n_labels
    confusion = torch.zeros(n_labels, n_labels, dtype=torch.long) if task == "classify" else None
    start = time.perf_counter()
    try:
        loss, count = split_loss(model, part, task, args.max_tokens, args.precision, confusion)
    except ValueError as error:  # an example over the batch budget
        raise CliError(str(error)) from None
    seconds = time.perf_counter() - start
    if task == "lm":
        print(f"{len(part)} texts ({count} tokens, end-of-text included) from {what}")
        print(
            f"perplexity = {math.exp(min(loss, 50.0)):.3f}   (mean loss {loss:.4f} nats per token)"
        )
        print(f"scoring: {seconds:.1f}s, {count / seconds:.0f} tokens/s ({args.precision})")
        return 0
    from vaswani import plot

    labels = tgt_tok.labels
    correct = int(confusion.trace())
    print(f"{count} texts from {what}")
    print(f"accuracy = {100 * correct / count:.2f}%   ({correct}/{count}; mean loss {loss:.4f})")
    print("confusion matrix (rows: true label, columns: predicted label):")
    width = max(8, *(len(label) for label in labels))
    print(" " * (width + 2) + " ".join(f"{label:>{width}}" for label in labels))
    for label, row in zip(labels, confusion.tolist(), strict=True):
        print(f"  {label:<{width}}" + " ".join(f"{n:>{width}}" for n in row))
    out = (
        args.plot
        or Path(args.checkpoint) / f"confusion-{args.split if args.input is None else 'input'}.png"
    )
    plot.confusion_matrix(confusion, labels, out, f"{Path(args.checkpoint).name} on {what}")
    print(f"wrote {out}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """Continue prompts with a language model, by sampling."""
    import time

    from vaswani.decode import generate

    model, tokenizer, _, _, autocast = load_for_decoding(args, ("lm",))
    prompts = [prompt for prompt in args.prompt or [""] for _ in range(args.num_samples)]
    start = time.perf_counter()
    with autocast:
        found = generate(model, tokenizer, prompts, args.max_new_tokens, args.temperature,
                         args.top_k, args.top_p, args.seed, use_cache=not args.no_cache)  # fmt: skip
    seconds = time.perf_counter() - start
    for g in found:
        print(one_line(g.prompt + g.text))
    tokens = sum(g.tokens for g in found)
    print(
        f"{len(found)} texts, {tokens} new tokens in {seconds:.2f}s ({tokens / seconds:.0f} "
        f"tokens/s, KV cache {'off' if args.no_cache else 'on'})",
        file=sys.stderr,
    )
    return 0


def cmd_classify(args: argparse.Namespace) -> int:
    """Label texts with a classifier: arguments, a file, or stdin, one text a line."""
    from vaswani.decode import classify

    if args.texts and args.input is not None:
        raise CliError("give TEXT arguments or --input FILE, not both")
    texts = args.texts or read_input_lines(args.input, args.max_line_bytes)
    if not texts:
        raise CliError("nothing to classify: the input is empty")
    model, tokenizer, labels, _, autocast = load_for_decoding(args, ("classify",))
    with autocast:
        found = classify(model, tokenizer, labels.labels, texts, args.max_tokens, args.too_long)
    for result in found:
        print("" if result is None else f"{result.label}\t{result.probability:.4f}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve a run's model over HTTP until Ctrl-C or SIGTERM."""
    from vaswani.serve import ServeSettings, create_app, listen, serve

    model, src_tok, tgt_tok, _, _ = load_for_decoding(args, TASKS)
    settings = ServeSettings(
        max_body_bytes=args.max_body_bytes,
        max_texts=args.max_texts,
        max_chars=args.max_chars,
        max_beam_size=args.max_beam_size,
        beam_size=args.beam_size,
        max_length=args.max_length,
        timeout_s=args.timeout,
        max_queued_texts=args.max_queued_texts,
        batch_wait_ms=args.batch_wait_ms,
        batch_tokens=args.batch_tokens,
        dynamic_batching=not args.no_batching,
        precision=args.precision,
    )
    sock = listen(args.host, args.port)  # a taken port is an error before "serving on"
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {args.host}: reachable from other machines", file=sys.stderr)
    print(f"serving {args.checkpoint} on http://{args.host}:{args.port} (docs at /docs)")
    serve(create_app(model, src_tok, tgt_tok, settings), args.host, args.port, sock=sock)
    print("server stopped")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """Attention maps, the positional encoding, or training curves, as PNG or SVG."""
    from vaswani import plot

    try:
        if args.what == "attention":
            model, src_tok, tgt_tok, _, _ = load_for_decoding(args)
            out = args.out or Path("attention.png")
            plot.attention(model, src_tok, tgt_tok, args.sentence, out)
            for kind in ("encoder", "decoder", "cross"):
                print(f"wrote {out.with_name(f'{out.stem}-{kind}{out.suffix}')}")
            return 0
        if args.what == "positional-encoding":
            out = args.out or Path("positional-encoding.png")
            plot.positional_encoding(args.d_model, args.length, out)
        else:
            out = args.out or Path(args.run_dir) / "training.png"
            plot.training(args.run_dir, out)
    except ValueError as error:
        raise CliError(str(error)) from None
    print(f"wrote {out}")
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    """Average the weights of the last N checkpoints (paper §6.1)."""
    from vaswani.train.average import average_checkpoints

    path, names = average_checkpoints(args.run_dir, args.last)
    print(f"averaged {len(names)} checkpoints ({', '.join(names)}) into {path}")
    return 0


def cmd_import_marian(args: argparse.Namespace) -> int:
    """Convert a Hugging Face Marian / OPUS-MT model directory into a vaswani run directory."""
    from vaswani.marian import MarianImportError, import_marian

    try:
        run = import_marian(args.hf_dir, args.out)
    except MarianImportError as error:
        raise CliError(str(error)) from None
    cfg = ModelConfig.from_dict(json.loads((run / CONFIG).read_text()))
    print(
        f"imported {args.hf_dir} into {run}: {cfg.n_encoder_layers}+{cfg.n_decoder_layers} layers, "
        f"d_model {cfg.d_model}, {cfg.n_heads} heads, vocabulary {cfg.vocab_size}, "
        f"activation {cfg.activation}"
    )
    print(f'try: vaswani translate --checkpoint {run} "..."')
    return 0


def parse_assignment(text: str) -> tuple[str, object]:
    """KEY=VALUE with VALUE read as JSON when it is JSON (numbers, true/false), else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise CliError(f"--model expects KEY=VALUE (e.g. d_model=512 or norm=pre), got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def cmd_presets(args: argparse.Namespace) -> int:
    """Print each named model size with its shape and parameter count."""
    import torch

    from vaswani.model import Transformer

    print(
        f"{'preset':<8} {'d_model':>7} {'heads':>5} {'d_ff':>6} {'layers':>7} "
        f"{'vocab':>7} {'params':>9}"
    )
    for name in PRESETS:
        cfg = ModelConfig.from_preset(name)
        with torch.device("meta"):  # shapes only: no memory, no initialisation
            n_params = sum(p.numel() for p in Transformer(cfg).parameters())
        layers = f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers}"
        print(
            f"{name:<8} {cfg.d_model:>7} {cfg.n_heads:>5} {cfg.d_ff:>6} {layers:>7} "
            f"{cfg.vocab_size:>7} {n_params / 1e6:>8.1f}M"
        )
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    """The hardware as vaswani sees it and what --device / --precision auto pick (bug reports)."""
    from vaswani.device import environment

    report = environment()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    auto = report.pop("auto")
    width = max(map(len, report))
    for key, value in report.items():
        if isinstance(value, list):
            value = ", ".join(map(str, value)) or "none"
        print(f"{key:<{width}}  {value}")
    print("auto picks:")
    print(f"  device     {auto['device']} ({auto['device_reason']})")
    print(f"  precision  {auto['precision']} ({auto['precision_reason']})")
    print(f"  threads    {auto['threads']} ({auto['threads_reason']})")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Prepare numbers-de, train on it, evaluate, translate, draw: the whole system in minutes."""
    from vaswani.demo import run_demo

    print(
        f"vaswani demo: a Transformer learns to write numbers as German words "
        f"({args.steps} training steps); everything goes to {args.out}/"
    )
    try:
        result = run_demo(
            args.out, args.steps, args.precision, args.seed, args.device, numbers=args.numbers
        )
    except ValueError as error:
        if str(error).startswith("invalid "):
            raise
        raise CliError(str(error)) from None
    scores = result.scores
    print(f"\ntrained {result.steps} steps in {result.train_seconds:.0f}s ({result.precision})")
    print(
        f"held-out test numbers: exact match {100 * result.exact_match:.2f}%, "
        f"sacreBLEU {scores.bleu:.2f} ({scores.bleu_signature}), chrF {scores.chrf:.2f}"
    )
    print("translations of numbers it never saw (beam search, beam 4):")
    for source, reference, hypothesis in result.examples:
        mark = "ok" if hypothesis == reference else f"WRONG, expected {reference}"
        print(f"  {source:>7} -> {hypothesis}  ({mark})")
    run = result.directory / "run"
    print("\nwhere everything went:")
    print(f"  data (tokenizer, token ids, test split)  {result.directory / 'data'}")
    print(f"  run directory (checkpoints, metrics)      {run}")
    for picture in result.pictures:
        print(f"  picture                                   {picture}")
    print(f"\nnext: vaswani translate --checkpoint {run} 4711 123456")
    print(f"      vaswani serve --checkpoint {run}")
    if result.exact_match < args.min_accuracy:
        print(
            f"error: exact match {100 * result.exact_match:.2f}% is below the target "
            f"{100 * args.min_accuracy:.1f}%",
            file=sys.stderr,
        )
        return 1
    return 0


def train_default(name: str) -> object:
    from vaswani.config import TrainConfig

    field = next(f for f in dataclasses.fields(TrainConfig) if f.name == name)
    return field.default


# flag name -> (type, help); defaults come from TrainConfig, the single source of them
TRAIN_FLAGS: dict[str, tuple[object, str]] = {
    "preset": (str, "model size: tiny, small, base, big"),
    "task": (TASKS, "refuse data prepared for another task (none given: the data's task)"),
    "init": (str, "fine-tune: start from this run directory's model and weights"),
    "max_tokens": (None, "tokens per micro-batch and side, padding included"),
    "accumulate": (None, "micro-batches per update (gradient accumulation)"),
    "warmup": (None, "warm-up steps of the learning-rate schedule (§5.3)"),
    "lr_scale": (float, "factor on the schedule's learning rate"),
    "label_smoothing": (float, "label smoothing (§5.4)"),
    "clip_norm": (float, "clip gradients to this global norm; 0 = off"),
    "precision": (PRECISIONS, PRECISION_HELP),
    "seed": (int, "random seed (initialisation, dropout, data order)"),
    "max_steps": (None, "stop after this many updates"),
    "max_minutes": (float, "stop after this much training time"),
    "eval_every": (None, "validate every N steps"),
    "eval_sentences": (None, "validation pairs translated for BLEU"),
    "save_every": (None, "checkpoint every N steps"),
    "keep_last": (None, "checkpoints kept"),
    "log_every": (None, "append to metrics.jsonl every N steps"),
    "nan_policy": (("stop", "skip"), "on a non-finite loss: stop, or skip the update and count it"),
    "device": (str, DEVICE_HELP),
}


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train",
        help="train a model on a prepared dataset (or --resume a run)",
        description=(
            "Train a Transformer with the paper's recipe: Adam (0.9, 0.98, 1e-9), warm-up then "
            "inverse-square-root learning rate, label smoothing 0.1, dropout. The data's task "
            "picks the model: translate an encoder-decoder (validated by loss, perplexity, "
            "sacreBLEU), lm a decoder-only language model (loss, perplexity, a sample), classify "
            "an encoder with a pooled classification head (loss, accuracy; --model pooling=first "
            "or mean). Checkpoints as it goes. For several processes: torchrun --nproc_per_node N "
            "-m vaswani.cli train ..."
        ),
    )
    train.add_argument("--data", type=Path, help="directory written by `vaswani prepare`")
    train.add_argument("--out", type=Path, help="run directory to create")
    train.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue this run")
    train.add_argument(
        "--reset-data-position",
        action="store_true",
        help="with --resume: accept changed data and start it from its beginning",
    )
    train.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a model setting of the preset, e.g. --model norm=pre --model d_ff=2048",
    )
    for name, (kind, text) in TRAIN_FLAGS.items():
        flag = "--" + name.replace("_", "-")
        default = train_default(name)
        if default is None and name in PRESET_TRAINING["small"]:
            by_preset = ", ".join(f"{p}: {v[name]}" for p, v in PRESET_TRAINING.items())
            shown = f"{text} (default by preset: {by_preset})"
        else:
            shown = f"{text} (default: {default})"
        if isinstance(kind, tuple):
            train.add_argument(flag, choices=kind, help=shown)
        else:
            train.add_argument(flag, type=kind or positive_int, help=shown)
    train.set_defaults(func=cmd_train)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vaswani",
        description='The Transformer of "Attention Is All You Need": train, translate, inspect.',
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"vaswani {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    presets = sub.add_parser(
        "presets",
        help="list the named model sizes and their parameter counts",
        description="List the named sizes (tiny, small, base, big) and their parameter counts.",
    )
    presets.set_defaults(func=cmd_presets)

    env = sub.add_parser(
        "env",
        help="show the hardware as vaswani sees it and what --precision/--device auto pick",
        description=(
            "Print the CPU (its PyTorch capability and bf16 support), usable cores, CUDA and MPS "
            "devices, versions, and the device, precision and thread count that `auto` picks "
            "here, with the reason for each. Paste it into bug reports."
        ),
    )
    env.add_argument("--json", action="store_true", help="print it as JSON")
    env.set_defaults(func=cmd_env)

    prep = sub.add_parser(
        "prepare",
        help="turn text into a dataset for training (tokenizer, token ids, meta.json)",
        description=(
            "Read the text of a task, drop empty and duplicate examples, split train/valid/test by "
            "a hash of each example, train a byte-level BPE tokenizer on the training split, and "
            "write memory-mappable token ids and meta.json to --out. Plain or gzip-compressed "
            "UTF-8. CORPUS_OR_PATHS by --task: translate: a built-in corpus (numbers-de, "
            "ding-de-en), one TSV file of source<TAB>target lines, or two aligned files (source, "
            "then target); lm: text files, one text (sentence, paragraph) a line, or the built-in "
            "grammar-en (the default); classify: one TSV file of text<TAB>label lines, or the "
            "built-in sentiment-en (the default)."
        ),
        formatter_class=HelpFormatter,
    )
    prep.add_argument("inputs", nargs="*", metavar="CORPUS_OR_PATHS")
    prep.add_argument("--out", type=Path, required=True, help="directory to write")
    prep.add_argument(
        "--task",
        choices=TASKS,
        default="translate",
        help="translate (encoder-decoder), lm (decoder-only language model), classify "
        "(encoder with a classification head)",
    )
    prep.add_argument("--vocab-size", type=positive_int, default=8000, help="BPE vocabulary size")
    prep.add_argument(
        "--max-len",
        type=positive_int,
        default=256,
        help="drop pairs longer than this many tokens (with BOS/EOS) on either side",
    )
    prep.add_argument(
        "--tokenizer-from",
        type=Path,
        metavar="RUN_DIR",
        help="use this run's tokenizer instead of learning one (to fine-tune it with train --init)",
    )
    prep.add_argument(
        "--separate-vocab",
        action="store_true",
        help="one tokenizer per language instead of a shared one (paper §3.4 shares)",
    )
    prep.add_argument(
        "--valid-fraction", type=fraction, help="share of pairs for validation (corpus default)"
    )
    prep.add_argument(
        "--test-fraction", type=fraction, help="share of pairs for test (corpus default)"
    )
    prep.add_argument(
        "--skip-invalid",
        action="store_true",
        help="drop (and count) pairs with invalid UTF-8, NUL bytes, BOMs or bad TSV rows "
        "instead of stopping at the first",
    )
    prep.add_argument(
        "--max-line-bytes",
        type=positive_int,
        default=1 << 20,
        help="refuse any input line longer than this",
    )
    prep.add_argument(
        "--max-tokens",
        type=positive_int,
        default=4096,
        help="token budget per batch side, for the padding report",
    )
    prep.add_argument("--numbers-size", type=positive_int, default=30000, help="numbers-de: pairs")
    prep.add_argument(
        "--numbers-max", type=positive_int, default=999_999, help="numbers-de: largest number"
    )
    prep.add_argument(
        "--size", type=positive_int, default=20000, help="grammar-en, sentiment-en: examples"
    )
    prep.add_argument(
        "--seed", type=int, default=0, help="numbers-de, grammar-en, sentiment-en: random seed"
    )
    prep.add_argument(
        "--ding-path", type=Path, default=Path("/usr/share/trans/de-en"), help="ding-de-en: file"
    )
    prep.add_argument("--force", action="store_true", help="replace --out if it exists")
    prep.set_defaults(func=cmd_prepare)

    add_train_parser(sub)

    translate = sub.add_parser(
        "translate",
        help="translate text with a trained model (arguments, a file, or stdin)",
        description=(
            "Translate TEXT arguments, or --input FILE, or stdin, one sentence per line, with beam "
            "search (or greedy search with --beam-size 1). Output has one line per input line, in "
            "order; an empty line gives an empty line. Lines are batched by length for speed."
        ),
        formatter_class=HelpFormatter,
    )
    translate.add_argument("texts", nargs="*", metavar="TEXT", help="sentences to translate")
    translate.add_argument("--input", type=Path, help="file of sentences, one per line (- = stdin)")
    translate.add_argument("--output", type=Path, help="write translations here instead of stdout")
    translate.add_argument(
        "--n-best",
        type=positive_int,
        default=1,
        help="hypotheses per line (at most --beam-size); more than 1 prints LINE ||| TEXT ||| SCORE",
    )
    add_decoding_flags(translate)
    translate.set_defaults(func=cmd_translate)

    evaluate = sub.add_parser(
        "evaluate",
        help="score a trained model on a split of its data: BLEU, perplexity or accuracy",
        description="Score a run on a split of the data it was trained on, or on files. A "
        "translation model: translate the split (or --src/--ref files) and score it with "
        "sacreBLEU and chrF, printing their signatures and the decoding speed. A language model: "
        "perplexity, exp(mean cross-entropy per token) (or of --input, a text file). A "
        "classifier: accuracy and the confusion matrix, also drawn to --plot (or of --input, a "
        "TSV of text<TAB>label).",
        formatter_class=HelpFormatter,
    )
    evaluate.add_argument("--split", choices=("valid", "test"), default="test")
    evaluate.add_argument("--src", type=Path, help="translation: source file instead of a split")
    evaluate.add_argument("--ref", type=Path, help="translation: reference file for --src")
    evaluate.add_argument("--output", type=Path, help="translation: also write translations here")
    evaluate.add_argument(
        "--input", type=Path, help="lm: a text file; classify: a TSV of text<TAB>label"
    )
    evaluate.add_argument(
        "--plot",
        type=Path,
        help="classify: where to draw the confusion matrix (default RUN_DIR/confusion-SPLIT.png)",
    )
    add_decoding_flags(evaluate)
    evaluate.set_defaults(func=cmd_evaluate)

    generate = sub.add_parser(
        "generate",
        help="continue prompts with a trained language model (sampling, KV cache)",
        description="Sample continuations of --prompt texts (none: start from nothing) from a "
        "language model trained with --task lm. Each prompt and sample has its own random "
        "generator, seeded with --seed + its index: the same command gives the same text. Text "
        "goes to stdout (prompt and continuation, one a line), speed to stderr.",
        formatter_class=HelpFormatter,
    )
    generate.add_argument(
        "--prompt", action="append", metavar="TEXT", help="text to continue (repeatable)"
    )
    generate.add_argument(
        "--num-samples", type=positive_int, default=1, help="continuations per prompt"
    )
    generate.add_argument("--max-new-tokens", type=positive_int, default=100)
    generate.add_argument(
        "--temperature",
        type=non_negative_float,
        default=1.0,
        help="divides the logits: < 1 sharper, > 1 flatter; 0 takes the most probable token",
    )
    generate.add_argument(
        "--top-k", type=non_negative_int, default=0, help="draw from the k most probable; 0 = all"
    )
    generate.add_argument(
        "--top-p",
        type=probability,
        default=1.0,
        help="draw from the smallest set of tokens holding this much probability (nucleus)",
    )
    generate.add_argument("--seed", type=int, default=0, help="random seed")
    generate.add_argument(
        "--no-cache",
        action="store_true",
        help="re-run the whole text at each step instead of using the KV cache (same output)",
    )
    add_model_flags(generate)
    generate.set_defaults(func=cmd_generate)

    classify = sub.add_parser(
        "classify",
        help="label texts with a trained classifier (arguments, a file, or stdin)",
        description="Print the most probable label of each text and its probability "
        "(LABEL<TAB>PROBABILITY), one line per input line, an empty line for an empty one.",
        formatter_class=HelpFormatter,
    )
    classify.add_argument("texts", nargs="*", metavar="TEXT", help="texts to classify")
    classify.add_argument("--input", type=Path, help="file of texts, one per line (- = stdin)")
    add_model_flags(classify)
    add_input_flags(classify, "batch budget: tokens, padding included")
    classify.set_defaults(func=cmd_classify)

    from vaswani.serve import ServeSettings

    limits = ServeSettings()
    serve = sub.add_parser(
        "serve",
        help="serve a trained model over HTTP (POST /translate, /generate or /classify, GET /health)",
        description=(
            'An HTTP API over a run\'s model. A translation model: POST /translate with {"text": '
            '...} or {"texts": [...]} and optional beam_size and max_length. A language model: '
            'POST /generate with {"prompt": ...} or {"prompts": [...]} and optional '
            "max_new_tokens, temperature, top_k, top_p, seed. A classifier: POST /classify with "
            '{"text": ...} or {"texts": [...]}. GET /health; the OpenAPI '
            "schema at /openapi.json and /docs. Requests arriving together are batched into one "
            "model call. Every limit below is answered with a clear 4xx (413 body, 422 request) "
            "or 503 (queue full) or 504 (timeout). Ctrl-C or SIGTERM finishes requests in flight."
        ),
        formatter_class=HelpFormatter,
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to bind; 0.0.0.0 exposes it to the network"
    )
    serve.add_argument("--port", type=port_number, default=8000, help="1 .. 65535")
    serve.add_argument("--max-body-bytes", type=positive_int, default=limits.max_body_bytes)
    serve.add_argument(
        "--max-texts", type=positive_int, default=limits.max_texts, help="per request"
    )
    serve.add_argument("--max-chars", type=positive_int, default=limits.max_chars, help="per text")
    serve.add_argument("--max-beam-size", type=positive_int, default=limits.max_beam_size)
    serve.add_argument(
        "--max-length",
        type=positive_int,
        default=limits.max_length,
        help="largest max_length (translate) or max_new_tokens (generate)",
    )
    serve.add_argument(
        "--timeout", type=positive_float, default=limits.timeout_s, help="seconds before a 504"
    )
    serve.add_argument(
        "--max-queued-texts",
        type=positive_int,
        default=limits.max_queued_texts,
        help="sentences waiting or in translation; more get 503",
    )
    serve.add_argument(
        "--batch-wait-ms",
        type=float,
        default=limits.batch_wait_ms,
        help="how long to wait for more requests to batch with one (0: no dynamic batching)",
    )
    serve.add_argument(
        "--batch-tokens",
        type=positive_int,
        default=limits.batch_tokens,
        help="token budget of one model call (source tokens x beam size)",
    )
    serve.add_argument(
        "--no-batching", action="store_true", help="one request per model call (for comparison)"
    )
    add_decoding_flags(serve)
    serve.set_defaults(func=cmd_serve)

    plot = sub.add_parser(
        "plot",
        help="draw attention maps, the positional encoding or training curves (PNG or SVG)",
        description="Pictures of a model: `attention` (every head of every layer for one "
        "sentence and its translation), `positional-encoding` (§3.5), `training` (loss, "
        "learning rate, validation BLEU, tokens/s from a run's metrics.jsonl).",
        formatter_class=HelpFormatter,
    )
    kinds = plot.add_subparsers(dest="what", metavar="WHAT", required=True)
    attention = kinds.add_parser(
        "attention",
        help="attention maps of one sentence: OUT-encoder, OUT-decoder, OUT-cross",
        formatter_class=HelpFormatter,
    )
    attention.add_argument("sentence", help="source sentence to translate and draw")
    attention.add_argument(
        "--out", type=Path, help="file name stem and type (default attention.png)"
    )
    add_model_flags(attention)
    positions = kinds.add_parser(
        "positional-encoding",
        help="the sinusoidal encoding as a heat map",
        formatter_class=HelpFormatter,
    )
    positions.add_argument("--d-model", type=positive_int, default=256)
    positions.add_argument("--length", type=positive_int, default=100, help="positions")
    positions.add_argument("--out", type=Path, help="default positional-encoding.png")
    curves = kinds.add_parser(
        "training", help="training curves from RUN_DIR/metrics.jsonl", formatter_class=HelpFormatter
    )
    curves.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    curves.add_argument("--out", type=Path, help="default RUN_DIR/training.png")
    plot.set_defaults(func=cmd_plot)

    average = sub.add_parser(
        "average",
        help="average the weights of a run's last checkpoints (paper §6.1)",
        description="Average the weights of the last N checkpoints of RUN_DIR into RUN_DIR/averaged "
        "(tied weights counted once); translate with --weights averaged.",
        formatter_class=HelpFormatter,
    )
    average.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    average.add_argument("--last", type=positive_int, default=5, help="how many checkpoints")
    average.set_defaults(func=cmd_average)

    marian = sub.add_parser(
        "import-marian",
        help="turn a Hugging Face Marian / OPUS-MT model into a run directory",
        description=(
            "Convert a MarianMTModel directory on disk (config.json, model.safetensors or "
            "pytorch_model.bin, source.spm, target.spm, vocab.json) into a vaswani run directory "
            "that translate, evaluate, serve and plot accept. Nothing is downloaded, and nothing in "
            "the checkpoint is executed. A model vaswani cannot compute exactly is refused, with "
            "the field that stands in the way."
        ),
        formatter_class=HelpFormatter,
    )
    marian.add_argument("hf_dir", type=Path, metavar="HF_DIR", help="the Hugging Face model folder")
    marian.add_argument(
        "--out", type=Path, required=True, help="new run directory (must not exist or be empty)"
    )
    marian.set_defaults(func=cmd_import_marian)

    demo = sub.add_parser(
        "demo",
        help="the whole system on built-in data: prepare, train, evaluate, translate, plot",
        description=(
            "Prepare the built-in numbers-de corpus (digits -> German number words), train a small "
            "Transformer on it with the paper's recipe (under 2 minutes on a 2-core CPU; a GPU is "
            "used when present), evaluate it on held-out numbers (exact match, sacreBLEU, chrF), "
            "show translations of numbers it never saw, and draw attention maps and training "
            "curves. Exits with status 1 below --min-accuracy."
        ),
        formatter_class=HelpFormatter,
    )
    demo.add_argument(
        "--out", type=Path, default=Path("demo"), help="directory for data, run and pictures"
    )
    demo.add_argument("--steps", type=positive_int, default=2000, help="training steps")
    demo.add_argument(
        "--numbers",
        type=positive_int,
        default=30_000,
        help="pairs of the numbers-de corpus to make (1%% held out for the test)",
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed (data and training)")
    add_placement_flags(demo)
    demo.add_argument(
        "--min-accuracy",
        type=float,
        default=0.99,
        help="exit with status 1 when exact match (0-1) is below this",
    )
    demo.set_defaults(func=cmd_demo)
    return parser


def os_error_line(error: OSError) -> str:
    """An OSError as one line naming the file: `out/x: Permission denied`."""
    where = error.filename if error.filename is not None else ""
    if error.filename2 is not None:
        where = f"{where} -> {error.filename2}"
    reason = error.strerror or str(error)
    return f"{where}: {reason}" if where else reason


def undecodable_argument(argv: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python keeps such bytes as lone surrogates)."""
    for i, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return f"argument {i} ({arg.encode('utf-8', 'replace').decode()!r}) is not valid UTF-8"
    return None


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand. Exit status: 0 done, 1 the demo missed its accuracy target, 2 an error
    the user can fix (one line on stderr), 3 a bug in vaswani (a traceback and where to report it),
    130 interrupted."""
    argv = sys.argv[1:] if argv is None else argv
    problem = undecodable_argument(argv)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    try:
        with warnings_as_lines():
            return args.func(args)
    except VaswaniError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # stdout closed early (`vaswani translate ... | head -1`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as error:  # permission denied, a directory where a file belongs, disk full, ...
        print(f"error: {os_error_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        print(
            f"error: this is a bug in vaswani {__version__}, not something you did wrong; please "
            "report it on the project's issue tracker with the traceback above and the output of "
            "`vaswani env`",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
