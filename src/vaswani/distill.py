"""Sequence-level knowledge distillation (Kim and Rush 2016): a dataset whose training targets are a
teacher's translations of its training sources, on which a smaller, faster student learns what
the teacher learnt from the references, in a form easier to learn (one consistent translation
of each source instead of the references' many).

The new dataset is the old one but for train.tgt.{bin,idx}: the same tokenizer, the same valid and
test splits with their references, the same training sources (a back-translated pair keeps its
tag). The teacher may be any run of the language pair, trained on this data or not (an imported
OPUS-MT model): each training source is decoded to text with the dataset's tokenizer, translated
as text by the teacher, and the translation encoded with the dataset's tokenizer. Where the
teacher gives nothing, or more than the dataset's length limit, the reference stays. Several
teachers of one vocabulary translate as an ensemble (`vaswani.decoding.ensemble`): their
log-probabilities averaged at every step of the beam.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vaswani.config import DecodeConfig
from vaswani.data import PreparedData
from vaswani.data.corpora import DataError
from vaswani.data.ids import IdsWriter
from vaswani.decoding.ensemble import Ensemble
from vaswani.decoding.text import Segments, TextModel, translate_segments
from vaswani.errors import VaswaniError
from vaswani.prepare.encode import length_stats
from vaswani.safe_io import built_in_place
from vaswani.tasks import TRANSLATE, get_task
from vaswani.translation.engine import Engine

CHUNK = 2048
"""Training sources translated at a time (progress, and memory for millions of pairs)."""
LEFT_BEHIND = ("train.tgt.bin", "train.tgt.idx", "train.align")
"""The files of the old dataset the new one does not copy: its training targets, and the word
alignments made from them."""


class DistillError(VaswaniError):
    """A distilled dataset cannot be made; the message says why and what to do."""


@dataclass
class Distilled:
    """What `distill` did: training pairs, those whose target is now the teacher's, and those
    that kept their reference (the teacher gave nothing, or too much), and sources over the
    teacher's position limit (translated from their beginning, so their reference stays)."""

    pairs: int
    replaced: int
    kept_reference: int
    too_long: int


@dataclass
class Teacher(TextModel):
    """The model that translates (one run's, or an `Ensemble` of several runs' models), its
    tokenizers, and the runs it is made of."""

    runs: list[Engine] = field(default_factory=list)

    @classmethod
    def of(cls, runs: list[Engine]) -> Teacher:
        """One run as it is; several as an ensemble, which needs one vocabulary."""
        first = runs[0]
        for other in runs[1:]:
            for side in ("src_tokenizer", "tgt_tokenizer"):
                if getattr(other, side).vocabulary() != getattr(first, side).vocabulary():
                    raise DistillError(
                        f"the teachers {first.path} and {other.path} have different "
                        "vocabularies; an ensemble's runs must be trained on the same data"
                    )
        model = first.model if len(runs) == 1 else Ensemble([run.model for run in runs])
        return cls(model, first.src_tokenizer, first.tgt_tokenizer, runs=runs)


def check_teacher(data: PreparedData, teacher: Engine) -> None:
    """Refuse a multilingual dataset or teacher, and a teacher of another language pair."""
    if data.languages is not None or teacher.languages is not None:
        raise DistillError(
            "distillation works on one language pair: the dataset and the teacher must not be "
            "multilingual"
        )
    pair = data.meta.get("pair", {})
    ours = (pair.get("source"), pair.get("target"))
    theirs = (teacher.source_language, teacher.target_language)
    if None not in ours and None not in theirs and ours != theirs:
        raise DistillError(
            f"the teacher {teacher.path} translates {theirs[0]} to {theirs[1]}, the data "
            f"{ours[0]} to {ours[1]}"
        )


def distill(
    teachers: list[Engine],
    data_dir: Path,
    out: Path,
    dc: DecodeConfig,
    progress: Callable[[int], None] | None = None,
) -> Distilled:
    """Write to `out` the dataset `data_dir` with its training targets translated by `teachers`
    (one run, or several as an ensemble; searched as `dc` says), put in place of `out` once
    complete. Returns the counts, also kept in meta.json's "distilled"."""
    data = PreparedData(data_dir)
    for run in teachers:
        check_teacher(data, run)
    teacher = Teacher.of(teachers)
    if get_task(data.task) is not TRANSLATE:
        raise DistillError(f"{data_dir} holds --task {data.task} data; distill translation data")
    with built_in_place(out) as work:
        for entry in data.directory.iterdir():
            if entry.is_file() and not entry.is_symlink() and entry.name not in LEFT_BEHIND:
                shutil.copyfile(entry, work / entry.name)
        result, record = _translate_targets(teacher, data, work, dc, progress)
        meta = dict(data.meta)
        meta.pop("word_alignments", None)
        meta["splits"]["train"].update(record)
        meta["distilled"] = {
            "from": str(data.directory),
            "teachers": [str(run.path) for run in teachers],
            "beam_size": dc.beam_size,
            "replaced": result.replaced,
            "kept_reference": result.kept_reference,
            "too_long_for_teacher": result.too_long,
        }
        (work / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return result


def _translate_targets(
    teacher: Teacher,
    data: PreparedData,
    work: Path,
    dc: DecodeConfig,
    progress: Callable[[int], None] | None,
) -> tuple[Distilled, dict]:
    """Write work/train.tgt.* from the teacher's translations; returns the counts and the
    training split's new target statistics for meta.json."""
    train = data.split("train")
    room = int(data.meta["max_example_len"]) - 1  # the BOS/EOS the batch adds
    writer = IdsWriter(work / "train.tgt", data.dtype)
    lengths, replaced, too_long = [], 0, 0
    for start in range(0, len(train), CHUNK):
        indices = range(start, min(start + CHUNK, len(train)))
        pairs = [train.pair(i) for i in indices]
        sources = [data.src_tokenizer.decode(src.tolist()) for src, _ in pairs]
        # A source over the teacher's position limit is left to its reference (blank here).
        limit = teacher.model.cfg.max_len
        fits = [len(ids) < limit for ids in teacher.src_tokenizer.encode_batch(sources)]
        too_long += fits.count(False)
        sources = [text if fit else "" for text, fit in zip(sources, fits, strict=True)]
        found = translate_segments(teacher, Segments(sources), dc)
        texts = [best[0].text if best else "" for best in found]
        encoded = data.tgt_tokenizer.encode_batch(texts)
        targets = []
        for (_, reference), text, ids in zip(pairs, texts, encoded, strict=True):
            fits = text.strip() and 0 < len(ids) <= room
            targets.append(ids if fits else reference.tolist())
            replaced += bool(fits)
        lengths.append(writer.add(targets))
        if progress is not None:
            progress(len(indices))
    sha = writer.close()
    if not len(train):
        raise DataError(f"{data.directory}: the training split is empty")
    every = np.concatenate(lengths)
    record = {
        "tgt_lengths": length_stats(every),
        "sha256": {**data.meta["splits"]["train"]["sha256"], "tgt": sha},
    }
    return Distilled(len(train), replaced, len(train) - replaced, too_long), record
