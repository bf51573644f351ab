"""One `Task` per kind of model: everything that differs between translation, language modelling
and classification, in one place, so that the training loop and the CLI ask the task instead of
comparing strings.

    task        model              a batch feeds it      loss over              best/ chosen by
    translate   Transformer        src -> tgt_in         target tokens          validation chrF
    lm          DecoderOnly        tgt_in (no source)    target tokens          validation loss
    classify    EncoderClassifier  src                   examples (one label)   validation accuracy

A prepared dataset records its task in meta.json; a run inherits it. Nothing outside this module
compares a task's name (a source rule checks it): the rest of vaswani asks the `Task` its traits
(`parallel`, `labelled`, `cuts_long_texts`, `sides`, its corpora) or keys its own tables by the
`Task` objects. To add a task, subclass `Task` here and list it in `TASKS_BY_NAME`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from vaswani.config import DecodeConfig, ModelConfig, Sampling
from vaswani.data.batching import Batch, TokenBatchSampler, collate
from vaswani.data.corpora import DataError, Pair, read_text_files, read_tsv
from vaswani.data.dataset import EncodedSplit, ParallelSplit, PreparedData
from vaswani.decoding.sampling import sample
from vaswani.decoding.text import Segments, TextModel, translate
from vaswani.device import autocast
from vaswani.languages import parse_pair
from vaswani.loss import LossHead, classification_loss, label_smoothed_cross_entropy
from vaswani.metrics import perplexity_of, score
from vaswani.model import DecoderOnly, EncoderClassifier, Transformer


@contextlib.contextmanager
def evaluation_mode(model: nn.Module) -> Iterator[nn.Module]:
    """The model in evaluation mode (no dropout) inside; back in the mode it was in after."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


@dataclass(frozen=True)
class Validation:
    """How a task validates during training: the batch size and precision of its passes, how
    many sentences a translation model decodes (before `deadline`, on `time.perf_counter`, if
    given), the seed a language model samples with."""

    batch_tokens: int
    precision: str
    eval_sentences: int = 200
    seed: int = 0
    deadline: float | None = None


class Task:
    """What a kind of model is trained on and judged by. The base class is translation's shape
    (a source and a target sequence, loss over target tokens); the others override."""

    name = ""
    model_class: type[nn.Module] = nn.Module
    kind = ""
    """The model in words, for messages ("translation model")."""
    command = ""
    """The command that uses a run of this task."""
    selection = ("valid_loss", False)
    """The validation figure that picks best/, and whether higher is better."""
    former_selection: str | None = None
    """The figure that picked best/ in a state.json written before `selection` (None: the same)."""
    sides: tuple[str, ...] = ("src", "tgt")
    """The sides of a pair that hold text: the tokenizer learns them, their lengths are reported."""
    parallel = False
    """Pairs of texts in two languages: copies of the source, length ratios, language
    identification, several language pairs, shortlists and export apply."""
    labelled = False
    """The target side is one label of a `LabelSet` (labels.json), not text."""
    cuts_long_texts = False
    """Texts longer than the model's positions are cut into pieces rather than dropped, and the
    evaluation splits keep no text (they are judged by loss)."""
    corpora: tuple[str, ...] = ()
    """The built-in corpora prepared for this task."""
    default_corpus: str | None = None
    """The built-in corpus `prepare` reads when given none."""

    def __str__(self) -> str:
        return self.name

    @property
    def described(self) -> str:
        """The model in words with its article ("a translation model")."""
        return f"a {self.kind}"

    def build_model(self, cfg: ModelConfig) -> nn.Module:
        """This task's model family, freshly initialised."""
        return self.model_class(cfg)

    def output_size(self, cfg: ModelConfig) -> int:
        """The size of the model's output: the target vocabulary (a classifier: its labels)."""
        return cfg.target_vocab_size

    def read_files(self, paths: list[Path], read: dict[str, Any]) -> tuple[dict, Iterator[Pair]]:
        """A non-parallel task's corpus from its files: a description for meta.json and the
        pairs (`read`: the readers' keyword arguments)."""
        raise NotImplementedError(f"{self.name} reads its files through the parallel readers")

    def model_fields(self, vocab: dict[str, int], shared: bool) -> dict[str, Any]:
        """ModelConfig fields from the data: the vocabulary sizes, and what the family leaves out."""
        fields: dict[str, Any] = {"vocab_size": vocab["src"]}
        if not shared:
            fields.update(tgt_vocab_size=vocab["tgt"], tie_embeddings="decoder")
        return fields

    extra_positions = 0
    """Positions the model adds to the longest sequence of the data (a classifier's start token)."""

    def forward(self, net: nn.Module, batch: Batch, head: Any = None) -> Any:
        """The model's logits for a batch, or what `head` makes of its last states."""
        return net(batch.src, batch.tgt_in, head=head)

    def loss(
        self, logits: Tensor, batch: Batch, pad_id: int, smoothing: float
    ) -> tuple[Tensor, Tensor]:
        """Summed loss and what it sums over."""
        return label_smoothed_cross_entropy(logits, batch.tgt_out, pad_id, smoothing)

    def training_loss(
        self, net: nn.Module, batch: Batch, pad_id: int, smoothing: float
    ) -> tuple[Tensor, Tensor]:
        """`loss(forward(...))` of a training step, through DDP's `forward` when `net` is wrapped.
        Here the model's output projection and its loss are one step that never holds the logits
        of every position (`LossHead`): the same values and gradients in less time."""
        model = net.module if isinstance(net, DistributedDataParallel) else net
        head = LossHead(model.output_projection, batch.tgt_out, pad_id, smoothing)
        return self.forward(net, batch, head)

    def batch_size(self, split: ParallelSplit, indices: Any) -> tuple[int, int]:
        """What a micro-batch's loss is averaged over (target tokens with EOS, here), and the
        tokens it processes."""
        tokens = len(indices) + int(split.tgt_lengths[indices].sum())
        return tokens, tokens

    def validate(self, model: nn.Module, data: PreparedData, how: Validation) -> dict:
        """Validation figures of a model in evaluation mode: loss and perplexity here."""
        loss, _ = split_loss(model, data.split("valid"), self, how.batch_tokens, how.precision)
        return {"valid_loss": loss, "valid_ppl": perplexity_of(loss)}

    def best_line(self, value: float) -> str:
        """The best validation figure in words, for the end of `vaswani train`."""
        return f"loss {value:.3f}"


class Translate(Task):
    name = "translate"
    model_class = Transformer
    kind = "translation model"
    command = "vaswani translate"
    parallel = True
    corpora = ("numbers-de", "ding-de-en", "numbers-multi")
    # chrF, not BLEU: word BLEU is 0 for every one-word target (numbers-de), so best/ would stay
    # the first evaluation; chrF scores characters and follows BLEU on sentence data.
    selection = ("valid_chrf", True)
    former_selection = "valid_bleu"

    def validate(self, model: nn.Module, data: PreparedData, how: Validation) -> dict:
        """Loss and perplexity, then sacreBLEU and chrF of greedy translations of the first
        `how.eval_sentences` validation pairs (a fixed sample); with a `how.deadline` (on
        `time.perf_counter`), of those decoded before it (`paced_slices`: no chunk starts
        that would end past it at the pace so far)."""
        result = super().validate(model, data, how)
        eval_sentences, deadline = how.eval_sentences, how.deadline
        batch_tokens, precision = how.batch_tokens, how.precision
        sources, references = data.text("valid")
        names, prefixes, languages = data.pair_names("valid"), None, data.languages
        if names is None:
            sources, references = sources[:eval_sentences], references[:eval_sentences]
        else:  # a multilingual model: a sample spread over the pairs (the split is by pair), each
            # source asking for its language (and saying its own, to a model told both)
            picked = sorted({i * len(sources) // eval_sentences for i in range(eval_sentences)})
            sources, references = [sources[i] for i in picked], [references[i] for i in picked]
            pairs = [parse_pair(names[i]) for i in picked]
            told = [s for s, _ in pairs] if languages.forced else None
            prefixes = languages.prefixes([t for _, t in pairs], data.src_tokenizer, told)
        forces = languages is not None and languages.forced
        device = next(model.parameters()).device
        hypotheses: list[str] = []
        began = time.perf_counter()
        for part in paced_slices(len(sources), deadline, FIRST_CHUNK, VALIDATION_CHUNK):
            with autocast(device, precision):
                hypotheses += translate(
                    TextModel(model, data.src_tokenizer, data.tgt_tokenizer, forces_target=forces),
                    Segments(sources[part], None if prefixes is None else prefixes[part]),
                    DecodeConfig(beam_size=1, batch_tokens=batch_tokens),
                )
        if len(hypotheses) < len(sources):  # fewer than asked: the budget ran out
            sources, references = sources[: len(hypotheses)], references[: len(hypotheses)]
            result["valid_sentences"] = len(hypotheses)
        scores = score(hypotheses, references)
        samples = [[s, r, h] for s, r, h in zip(sources[:3], references, hypotheses, strict=False)]
        found = {"valid_bleu": scores.bleu, "valid_chrf": scores.chrf, "samples": samples}
        return {**result, **found, DECODING: time.perf_counter() - began}

    def best_line(self, value: float) -> str:
        return f"chrF {value:.2f}"


class LanguageModel(Task):
    name = "lm"
    model_class = DecoderOnly
    kind = "language model"
    command = "vaswani generate"
    sides = ("tgt",)  # the text is on the target side: the model is a decoder without encoder
    cuts_long_texts = True
    corpora = ("grammar-en",)
    default_corpus = "grammar-en"

    def read_files(self, paths: list[Path], read: dict[str, Any]) -> tuple[dict, Iterator[Pair]]:
        return {"name": "text", "paths": [str(p) for p in paths]}, read_text_files(paths, **read)

    def model_fields(self, vocab: dict[str, int], shared: bool) -> dict[str, Any]:
        return {"vocab_size": vocab["src"], "n_encoder_layers": 0}  # the preset's decoder only

    def forward(self, net: nn.Module, batch: Batch, head: Any = None) -> Any:
        return net(batch.tgt_in, head=head)  # the text is on the target side; the source is empty

    def validate(self, model: nn.Module, data: PreparedData, how: Validation) -> dict:
        """Loss and perplexity, and one sampled text to read."""
        result = super().validate(model, data, how)
        with autocast(next(model.parameters()).device, how.precision):
            found = sample(model, [[]], Sampling(40, 0.8, seed=how.seed))
        return {**result, "samples": [data.tgt_tokenizer.decode(found[0].tokens)]}

    def best_line(self, value: float) -> str:
        return f"loss {value:.3f} (perplexity {perplexity_of(value):.2f})"


class Classify(Task):
    name = "classify"
    model_class = EncoderClassifier
    kind = "classifier"
    command = "vaswani classify"
    selection = ("valid_accuracy", True)
    extra_positions = 1  # the start token the classifier puts before its text
    sides = ("src",)
    labelled = True
    corpora = ("sentiment-en",)
    default_corpus = "sentiment-en"

    def output_size(self, cfg: ModelConfig) -> int:
        return cfg.n_labels

    def read_files(self, paths: list[Path], read: dict[str, Any]) -> tuple[dict, Iterator[Pair]]:
        if len(paths) != 1:
            raise DataError(
                f"--task classify reads one TSV file of text<TAB>label, got {len(paths)}"
            )
        pairs = read_tsv(paths[0], **read, column_names="text, label")
        return {"name": "tsv", "path": str(paths[0])}, pairs

    def model_fields(self, vocab: dict[str, int], shared: bool) -> dict[str, Any]:
        # The target "vocabulary" is the label set; the preset's encoder only.
        return {"vocab_size": vocab["src"], "n_decoder_layers": 0, "n_labels": vocab["tgt"]}

    def forward(self, net: nn.Module, batch: Batch, head: Any = None) -> Tensor:
        return net(batch.src)  # (B, n_labels); a classifier's head is its own

    def loss(
        self, logits: Tensor, batch: Batch, pad_id: int, smoothing: float
    ) -> tuple[Tensor, Tensor]:
        return classification_loss(logits, batch.tgt_out[:, 0], smoothing)  # tgt_out: label, EOS

    def training_loss(
        self, net: nn.Module, batch: Batch, pad_id: int, smoothing: float
    ) -> tuple[Tensor, Tensor]:
        return self.loss(self.forward(net, batch), batch, pad_id, smoothing)

    def batch_size(self, split: ParallelSplit, indices: Any) -> tuple[int, int]:
        """Examples (the loss is per example), and the text tokens processed."""
        return len(indices), len(indices) + int(split.src_lengths[indices].sum())

    def validate(self, model: nn.Module, data: PreparedData, how: Validation) -> dict:
        n_labels = model.cfg.n_labels
        confusion = torch.zeros(n_labels, n_labels, dtype=torch.long)
        split = data.split("valid")
        loss, n = split_loss(model, split, self, how.batch_tokens, how.precision, confusion)
        return {"valid_loss": loss, "valid_accuracy": confusion.trace().item() / max(n, 1)}

    def best_line(self, value: float) -> str:
        return f"accuracy {100 * value:.1f}%"


DECODING = "decode_seconds"
"""The key of a validation's seconds of decoding (a time budget's measure, not a figure: the
training loop takes it out before the record is written)."""
VALIDATION_CHUNK = 25
"""Sentences a validation under a deadline decodes between two looks at the clock (the first
look comes after `FIRST_CHUNK`, so that a late validation still ends soon)."""
FIRST_CHUNK = 5


def paced_slices(count: int, deadline: float | None, first: int, size: int) -> Iterator[slice]:
    """The slices of `count` sentences to decode in turn: all at once without a `deadline` (on
    `time.perf_counter`), else `first` and then `size` at a time, where no slice but the first
    starts that would end past the deadline at the pace of those before it (the caller decodes
    each before asking for the next)."""
    if deadline is None:
        yield slice(0, count)
        return
    began, start = time.perf_counter(), 0
    while start < count:
        end = min(start + (size if start else first), count)
        now = time.perf_counter()
        if start and now + (now - began) / start * (end - start) > deadline:
            return
        yield slice(start, end)
        start = end


TRANSLATE, LANGUAGE_MODEL, CLASSIFY = Translate(), LanguageModel(), Classify()
TASKS_BY_NAME: dict[str, Task] = {task.name: task for task in (TRANSLATE, LANGUAGE_MODEL, CLASSIFY)}
"""The one registry of tasks, by the name meta.json, flags and config files use."""
TASK_NAMES = tuple(TASKS_BY_NAME)


def task_of_model(model: nn.Module) -> Task:
    """The task a model instance serves, by its class."""
    for task in TASKS_BY_NAME.values():
        if isinstance(model, task.model_class):
            return task
    raise TypeError(f"{type(model).__name__} is not a model of any task")


def get_task(name: str | Task) -> Task:
    """The `Task` called `name` ("translate", "lm" or "classify"); a `Task` as it is."""
    if isinstance(name, Task):
        return name
    if name not in TASKS_BY_NAME:
        raise DataError(f"unknown task {name!r}; choose one of {', '.join(TASKS_BY_NAME)}")
    return TASKS_BY_NAME[name]


def task_for_corpus(name: str) -> Task | None:
    """The task a built-in corpus is for, or None when `name` is none of them."""
    return next((task for task in TASKS_BY_NAME.values() if name in task.corpora), None)


def builtin_corpora() -> list[str]:
    """Every built-in corpus, in the order of the tasks."""
    return [name for task in TASKS_BY_NAME.values() for name in task.corpora]


@torch.no_grad()
def split_loss(
    model: nn.Module,
    part: ParallelSplit | EncodedSplit,
    task: Task | str,
    batch_tokens: int,
    precision: str,
    confusion: Tensor | None = None,
) -> tuple[float, int]:
    """Mean loss (no label smoothing) over a whole split, and how many tokens (examples for a
    classifier) it averages over; exp of it is a language model's perplexity. For a classifier,
    `confusion` (n_labels, n_labels) gets each example counted at [true label, predicted label]."""
    task = get_task(task)
    if len(part) == 0:
        return float("nan"), 0
    cfg = model.cfg
    device = next(model.parameters()).device
    loss_sum, count = 0.0, 0
    sampler = TokenBatchSampler(part.src_lengths, part.tgt_lengths, batch_tokens, shuffle=False)
    with evaluation_mode(model):
        for indices in sampler.batches(0):
            batch = collate(part, indices, cfg.pad_id, cfg.bos_id, cfg.eos_id).to(device)
            with autocast(device, precision):
                logits = task.forward(model, batch)
            total, n = task.loss(logits, batch, cfg.pad_id, smoothing=0.0)
            loss_sum, count = loss_sum + total.item(), count + int(n)
            if confusion is not None:
                pairs = torch.stack([batch.tgt_out[:, 0], logits.argmax(dim=-1)], dim=1).cpu()
                ones = torch.ones(len(pairs), dtype=confusion.dtype)
                confusion.index_put_(tuple(pairs.T), ones, accumulate=True)
    return loss_sum / max(count, 1), count
