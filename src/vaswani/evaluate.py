"""How good a trained model is, as the field reports it, for each task:

- translation: corpus sacreBLEU and chrF of detokenised output, exact match, decoding speed
  (`evaluate_translation`);
- language model: perplexity, exp(mean cross-entropy per token) (`perplexity`);
- classifier: accuracy and the confusion matrix (`classification_report`).

`vaswani evaluate` prints these reports; nothing here prints.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from vaswani.config import DecodeConfig
from vaswani.data.corpora import read_text_files, read_tsv
from vaswani.data.dataset import EncodedSplit, ParallelSplit
from vaswani.data.tokenizer import LabelSet
from vaswani.decoding.confidence import Calibration, fit, mean_probability, spearman
from vaswani.decoding.text import Segments, Tokenizer, Translation, encode_each, encode_sources
from vaswani.errors import VaswaniError
from vaswani.languages import parse_pair
from vaswani.metrics import Scores, perplexity_of, score, sentence_chrf
from vaswani.prepare.encode import cut_into_pieces
from vaswani.run import CONFIDENCE
from vaswani.safe_io import write_atomic
from vaswani.tasks import CLASSIFY, LANGUAGE_MODEL, paced_slices, split_loss
from vaswani.translation.engine import Engine
from vaswani.translation.pipeline import Split, best_texts, sentences_of
from vaswani.translation.request import Request


class EvaluationError(VaswaniError):
    """Nothing to evaluate, or the data to evaluate on is missing or does not fit the model."""


@dataclass
class TranslationReport:
    hypotheses: list[str]
    references: list[str]
    scores: Scores
    exact: int
    """Hypotheses equal to their reference, character for character."""
    seconds: float
    """Decoding time (translation only, not scoring)."""
    output_tokens: int
    confidences: list[float] | None = None
    """Each translation's confidence."""
    confidence_spearman: float | None = None
    """Spearman's correlation of `confidences` with the translations' sentence chrF."""
    terms: list[tuple[str, str, bool]] | None = None
    """With a glossary: every term found in the sources, and whether its target was put in."""

    @property
    def exact_fraction(self) -> float:
        return self.exact / len(self.references)


def evaluate_translation(
    engine: Engine,
    sources: list[str] | Split,
    references: list[str],
    request: Request | None = None,
    progress: Callable[[int], None] | None = None,
) -> TranslationReport:
    """Translate `sources` with `engine` as `request` asks (texts, or `Sentences` to translate
    sentence by sentence, `vaswani.translation.pipeline.sentences_of`; each into the request's target, a multilingual model's) and score them
    against `references`, and how the translations' confidences rank against their sentence
    chrF."""
    if not references:
        raise EvaluationError("nothing to evaluate: no non-empty sentence pairs")
    request = request or Request()
    if not isinstance(sources, Split):
        whole = dataclasses.replace(request, split=False)
        sources = sentences_of(sources, whole, engine.source_language)
    start = time.perf_counter()
    found = engine.translate_nbest(sources, request, progress).found
    seconds = time.perf_counter() - start
    hypotheses = best_texts(found)
    confidences = [f[0].confidence if f else 1.0 for f in found]
    return TranslationReport(
        hypotheses=hypotheses,
        references=references,
        scores=score(hypotheses, references),
        exact=sum(h == r for h, r in zip(hypotheses, references, strict=True)),
        seconds=seconds,
        output_tokens=sum(len(ids) for ids in engine.tgt_tokenizer.encode_batch(hypotheses)),
        confidences=confidences,
        confidence_spearman=spearman(confidences, sentence_chrf(hypotheses, references)),
        terms=[term for f in found if f for term in f[0].terms] if request.aids.glossary else None,
    )


# Under a deadline, calibration translates CALIBRATION_FIRST sentences, then this many at a time
# while the next slice would end before the deadline, and fits on those translated. Smaller
# slices batch worse: 1,000 ding sentences took 3.0 s whole, 3.4 s in slices of 250 and 3.7 s in
# slices of 100. A first slice of 250 took 10 s beside two busy processes, ending a 5-minute
# run 6 s late.
CALIBRATION_SLICE = 250
CALIBRATION_FIRST = 50


def calibrate(
    engine: Engine,
    sources: list[str],
    references: list[str],
    pairs: list[str] | None = None,
    progress: Callable[[int], None] | None = None,
    deadline: float | None = None,
) -> Calibration:
    """Fit `engine`'s confidence calibration on its translations of `sources` (its validation
    split; of a multilingual model, each of language pair `pairs`, "de-en") and their sentence
    chrF against `references`, and store it in the run (confidence.json), where translation
    reads it. With a `deadline` (on `time.perf_counter`), no slice but the first starts that
    would end after it (`paced_slices`)."""
    # Signals are read wherever a translation is assessed: by the mean probability here.
    assessing = dataclasses.replace(engine, assess=mean_probability)
    found: list[list[Translation]] = []
    for part in paced_slices(len(sources), deadline, CALIBRATION_FIRST, CALIBRATION_SLICE):
        request = _calibration_request(None if pairs is None else pairs[part])
        found += assessing.translate_nbest(sources[part], request, progress).found
    kept = [i for i, f in enumerate(found) if f and f[0].signals is not None]
    if len(kept) < 20:
        raise EvaluationError(
            f"{len(kept)} validation translations: too few to fit a confidence calibration (20 at least)"
        )
    chrf = sentence_chrf([found[i][0].text for i in kept], [references[i] for i in kept])
    calibration = fit([found[i][0].signals for i in kept], chrf)
    record = json.dumps(calibration.record(), indent=1) + "\n"
    write_atomic(engine.path / CONFIDENCE, record.encode())
    engine.assess = calibration
    return calibration


def _calibration_request(pairs: list[str] | None) -> Request:
    """Calibration's request: the default decoding, each source whole, into each of `pairs`."""
    request = Request(decoding=DecodeConfig(), too_long="truncate", split=False)
    if pairs is None:
        return request
    named = [parse_pair(name) for name in pairs]
    return dataclasses.replace(
        request, target=[t for _, t in named], language=[s for s, _ in named]
    )


def by_pair(hypotheses: list[str], references: list[str], pairs: list[str]) -> dict[str, dict]:
    """A multilingual evaluation's figures for each language pair (`pairs`: each line's), and
    their unweighted mean over the pairs under "mean"."""
    found: dict[str, dict] = {}
    for name in dict.fromkeys(pairs):
        lines = [i for i, pair in enumerate(pairs) if pair == name]
        mine = [hypotheses[i] for i in lines]
        theirs = [references[i] for i in lines]
        scores = score(mine, theirs)
        exact = sum(h == r for h, r in zip(mine, theirs, strict=True))
        found[name] = {
            "sentences": len(lines),
            "bleu": scores.bleu,
            "chrf": scores.chrf,
            "exact": exact / len(lines),
        }
    found["mean"] = {
        key: sum(f[key] for f in found.values()) / len(found) for key in ("bleu", "chrf", "exact")
    }
    return found


@dataclass
class PerplexityReport:
    loss: float
    """Mean cross-entropy in nats per token, end-of-text tokens included."""
    tokens: int
    seconds: float

    @property
    def perplexity(self) -> float:
        return perplexity_of(self.loss)


def perplexity(
    model: nn.Module, part: ParallelSplit | EncodedSplit, batch_tokens: int, precision: str
) -> PerplexityReport:
    """A language model's perplexity on `part` (a prepared split or `encode_text_file`'s)."""
    if len(part) == 0:
        raise EvaluationError("nothing to evaluate: no texts")
    start = time.perf_counter()
    loss, tokens = _split_loss(model, part, LANGUAGE_MODEL, batch_tokens, precision)
    return PerplexityReport(loss, tokens, time.perf_counter() - start)


@dataclass
class ClassificationReport:
    labels: list[str]
    confusion: Tensor
    """(n_labels, n_labels) counts: row = true label, column = predicted label."""
    loss: float
    seconds: float

    @property
    def examples(self) -> int:
        return int(self.confusion.sum())

    @property
    def correct(self) -> int:
        return int(self.confusion.trace())

    @property
    def accuracy(self) -> float:
        return self.correct / self.examples

    def table(self) -> list[str]:
        """The confusion matrix as aligned text lines, a header of predicted labels first."""
        width = max(8, *(len(label) for label in self.labels))
        lines = [" " * (width + 2) + " ".join(f"{label:>{width}}" for label in self.labels)]
        for label, row in zip(self.labels, self.confusion.tolist(), strict=True):
            lines.append(f"  {label:<{width}}" + " ".join(f"{n:>{width}}" for n in row))
        return lines


def classification_report(
    model: nn.Module,
    part: ParallelSplit | EncodedSplit,
    labels: list[str],
    batch_tokens: int,
    precision: str,
) -> ClassificationReport:
    """A classifier's accuracy and confusion matrix on `part` (a prepared split or
    `encode_labelled_file`'s)."""
    if len(part) == 0:
        raise EvaluationError("nothing to evaluate: no examples")
    confusion = torch.zeros(len(labels), len(labels), dtype=torch.long)
    start = time.perf_counter()
    loss, _ = _split_loss(model, part, CLASSIFY, batch_tokens, precision, confusion)
    return ClassificationReport(labels, confusion, loss, time.perf_counter() - start)


def _split_loss(model, part, task, batch_tokens, precision, confusion=None):  # noqa: ANN001, ANN202
    try:
        return split_loss(model, part, task, batch_tokens, precision, confusion)
    except ValueError as error:  # an example over the batch budget
        raise EvaluationError(str(error)) from None


def encode_text_file(path: Path, tokenizer: Tokenizer, max_len: int, max_line_bytes: int):  # noqa: ANN201
    """A text file (one text a line) encoded like a prepared language-model split: texts longer
    than the model's `max_len` positions are cut into pieces, as `prepare` does."""
    texts = [text for _, text in read_text_files([path], max_line_bytes=max_line_bytes)]
    pieces = cut_into_pieces(encode_each(tokenizer, texts, f"{path}: text"), max_len - 1)
    return EncodedSplit([[] for _ in pieces], pieces)


def encode_labelled_file(  # noqa: ANN201
    path: Path,
    tokenizer: Tokenizer,
    labels: LabelSet,
    max_len: int,
    too_long: str,
    max_line_bytes: int,
):
    """A TSV of text<TAB>label lines encoded like a prepared classification split."""
    pairs = list(read_tsv(path, max_line_bytes=max_line_bytes, column_names="text, label"))
    # One position goes to the start token the classifier puts before each text.
    texts = Segments([text for text, _ in pairs])
    encoded = encode_sources(tokenizer, texts, max_len - 1, too_long)
    try:
        label_ids = labels.encode_batch([label for _, label in pairs])
    except ValueError as error:
        raise EvaluationError(
            f"{path}: {error}; the model knows {', '.join(labels.labels)}"
        ) from None
    return EncodedSplit([encoded[i] for i in range(len(pairs))], label_ids)
