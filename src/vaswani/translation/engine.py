"""The engine: one loaded model with everything decided about it once (its weights, tokenizers,
languages, shortlist, calibration, device, precision, int8 weights, matrix kernels), typed, what
Python users, the CLI, evaluation, back-translation, distillation and every server worker hold.

    engine = Engine.load("runs/de-en")          # decided as `vaswani translate` decides
    engine.translate(["Das Haus ist klein."])   # ["The house is small."]

`load_run` gives the run's model as it was trained (CPU, fp32, nothing measured), for looking
inside it or training from it."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from vaswani import kernels
from vaswani.config import ModelConfig, Sampling
from vaswani.decoding.confidence import Calibration
from vaswani.decoding.quantize import quantize
from vaswani.decoding.shortlist import FILE as SHORTLIST
from vaswani.decoding.shortlist import Shortlist
from vaswani.decoding.text import (
    Classification,
    Generation,
    Segments,
    TextModel,
    Translation,
    classify,
    generate,
    split_prefix,
    translate_segments,
)
from vaswani.device import Placement, autocast, place
from vaswani.errors import VaswaniError
from vaswani.languages import LanguageError, Languages
from vaswani.run import CONFIDENCE, DATA_INFO, RunError, load_trained
from vaswani.safe_io import member, read_json
from vaswani.tasks import Task, task_of_model
from vaswani.translation import pipeline
from vaswani.translation import precision as measured
from vaswani.translation.align import Alignment, AlignSettings, align
from vaswani.translation.files import translate_file
from vaswani.translation.pipeline import Split
from vaswani.translation.request import Request


class EngineError(VaswaniError):
    """A choice an engine cannot make (a precision its weights do not compute in, a shortlist
    for a model that does not translate)."""


@dataclass
class Engine(TextModel):
    """A trained model, in eval mode on its device, with what it needs to read and write text and
    the decoding choices made for it (`Engine.load`)."""

    path: Path | None = None
    """The run directory it came from (None: built in Python from a model and tokenizers)."""
    info: dict = field(default_factory=dict)
    """The run's data.json: where the data came from, its meta.json, its fingerprint."""
    precision: str = "fp32"
    """What decoding computes in (autocast): fp32, bf16 or fp16."""
    weights: str = "none"
    """Its weights as loaded ("none") or quantized ("int8")."""
    notes: list[str] = field(default_factory=list)
    """The choices made, one line each (device, precision, kernels, weights, shortlist): what
    the CLI prints."""
    decided: bool = False
    """Whether device and precision were decided (`Engine.load`), or are as loaded (CPU, fp32)."""

    @property
    def task(self) -> Task:
        """The task its model does (`vaswani.tasks`)."""
        return task_of_model(self.model)

    @property
    def config(self) -> ModelConfig:
        return self.model.cfg

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def languages(self) -> Languages | None:
        """The language pairs of a multilingual model; None for a model of one pair. Read once
        per data record (NLLB-200's 200 languages make 39,800 pairs)."""
        meta = self.info.get("meta")
        if meta is None:
            return None
        kept = self.__dict__.get("_languages")
        if kept is not None and kept[0] is meta:
            return kept[1]
        try:
            found = Languages.from_meta(meta)
        except LanguageError as error:
            raise RunError(f"{self.path / DATA_INFO}: {error}") from None
        self.__dict__["_languages"] = (meta, found)
        return found

    def prefixes(
        self,
        targets: str | list[str] | tuple[str, ...] | None,
        count: int,
        sources: str | list[str | None] | None = None,
    ) -> list[list[int]] | None:
        """What to put before each of `count` sources to ask a multilingual model for `targets`
        (one language for all, or one per source); None for a model of one pair. RunError when
        a multilingual model is not told its target, or is asked for one it does not know. A
        model that is told its source language too (`Languages.forced`) reads it from
        `sources` (one for all, or one per source)."""
        languages = self.languages
        if languages is not None and languages.forced:
            return self.forced_prefixes(languages, targets, count, sources)
        if languages is None:
            if targets is not None:
                raise RunError(
                    f"{self.path} translates one language pair; leave out Request.target"
                )
            return None
        if targets is None and len(languages.targets) == 1:
            targets = languages.targets[0]  # many sources, one target: nothing to choose
        if targets is None:
            raise RunError(
                f"{self.path} translates into {', '.join(languages.targets)}: give "
                "the target language (Request.target)"
            )
        asked = [targets] * count if isinstance(targets, str) else list(targets)
        if len(asked) != count:
            raise ValueError(f"{len(asked)} target languages for {count} texts")
        try:
            return languages.prefixes([languages.target(t) for t in asked], self.src_tokenizer)
        except ValueError as error:
            raise RunError(str(error)) from None

    def forced_prefixes(
        self,
        languages: Languages,
        targets: str | list[str] | tuple[str, ...] | None,
        count: int,
        sources: str | list[str | None] | None,
    ) -> list[list[int]]:
        """`prefixes` of a model told both languages: [source token, target token] each."""
        if targets is None or sources is None:
            missing = " and ".join(
                flag
                for flag, given in (("Request.language", sources), ("Request.target", targets))
                if given is None
            )
            raise RunError(
                f"{self.path} translates between {len(languages.targets)} languages "
                f"({', '.join(languages.targets[:8])}, ...): give {missing}"
            )
        asked = [targets] * count if isinstance(targets, str) else list(targets)
        given = [sources] * count if isinstance(sources, str) else list(sources)
        if len(asked) != count or len(given) != count:
            raise ValueError(f"{len(asked)} targets, {len(given)} sources for {count} texts")
        if None in given:
            raise RunError(
                f"{self.path} is told each text's source language: give Request.language"
            )
        try:
            found = [languages.target(t) for t in asked], [languages.source(s) for s in given]
            return languages.prefixes(found[0], self.src_tokenizer, found[1])
        except ValueError as error:
            raise RunError(str(error)) from None

    def pair_language(self, side: str) -> str | None:
        """The language the model translates from ("source") or into ("target"), when its data
        says (`prepare --src-lang`, a built-in corpus, a multilingual model of one such
        language): a source language's rules split text into sentences."""
        languages = self.languages
        if languages is not None:
            found = languages.sources if side == "source" else languages.targets
            return found[0] if len(found) == 1 else None
        return self.info.get("meta", {}).get("pair", {}).get(side)

    @property
    def source_language(self) -> str | None:
        return self.pair_language("source")

    @property
    def target_language(self) -> str | None:
        return self.pair_language("target")

    @contextlib.contextmanager
    def computing(self) -> Iterator[None]:
        """Inside: no gradients, and the engine's precision."""
        with torch.no_grad(), autocast(self.device, self.precision):
            yield

    def segments(
        self,
        segments: Segments,
        request: Request | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> list[list[Translation]]:
        """The n-best translations of each segment, as `request` asks (search, long input)."""
        request = request or Request()
        with self.computing():
            return translate_segments(self, segments, request.decoding, request.too_long, progress)

    def align(
        self, sources: Segments, translations: list[str], settings: AlignSettings | None = None
    ) -> list[Alignment]:
        """The word alignment of each source with its translation (`vaswani.translation.align`)."""
        with self.computing():
            return align(self, sources, translations, settings)

    def attention_records(
        self, texts: list[str], translations: list[str], prefixes: list[list[int]] | None = None
    ) -> list[dict[str, Any]]:
        """For each text (after its prefix) and its translation: both texts' tokens and the
        encoder-decoder attention of the last decoder layer, averaged over heads, a row per
        translation token and end-of-sentence, a column per source token (what the server's
        /attention answers). One teacher-forced pass (`attention`), in the engine's precision."""
        cfg = self.model.cfg
        rows = []
        for k, (text, translation) in enumerate(zip(texts, translations, strict=True)):
            before, start = split_prefix(prefixes[k] if prefixes else None, self.forces_target)
            src_ids = [*[*before, *self.src_tokenizer.encode(text)][: cfg.max_len - 1], cfg.eos_id]
            out_ids = self.tgt_tokenizer.encode(translation)[: cfg.max_len - 2]
            rows.append((src_ids, [cfg.bos_id, *start, *out_ids], len(start), out_ids))
        with self.computing():
            maps = self.attention([r[0] for r in rows], [r[1] for r in rows])
        records = []
        for k, (src_ids, tgt_ids, lead, out_ids) in enumerate(rows):
            cross = maps.cross[-1][k, :, lead : len(tgt_ids), : len(src_ids)]
            weights = cross.float().mean(dim=0)  # (T, S): heads averaged
            records.append(
                {
                    "translation": translations[k],
                    "source_tokens": self.src_tokenizer.tokens(src_ids),
                    "target_tokens": [*self.tgt_tokenizer.tokens(out_ids), "</s>"],
                    "weights": [[round(w, 4) for w in row] for row in weights.tolist()],
                }
            )
        return records

    def generate(self, prompts: list[str], sampling: Sampling | None = None) -> list[Generation]:
        """A language model's continuation of each prompt (`vaswani.decoding.text.generate`)."""
        with self.computing():
            return generate(self.model, self.src_tokenizer, prompts, sampling)

    def classify(self, texts: list[str], batch_tokens: int = 8192) -> list[Classification | None]:
        """A classifier's label of each text (`vaswani.decoding.text.classify`)."""
        with self.computing():
            labels = self.tgt_tokenizer.labels
            return classify(self.model, self.src_tokenizer, labels, texts, batch_tokens)

    def translate(self, texts: str | list[str], request: Request | None = None) -> str | list[str]:
        """The best translation of a text, or of each of a list, as `request` asks (by default:
        into the model's one target, sentence by sentence in the source language's rules, beam 4);
        "" for a blank text. Everything else a translation carries: `translate_nbest`."""
        if isinstance(texts, str):
            return self.translate([texts], request)[0]
        return pipeline.best_texts(self.translate_nbest(texts, request).found)

    def translate_nbest(
        self,
        texts: list[str] | Split,
        request: Request | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> pipeline.Finished:
        """Each text's n-best `Translation`s (confidence, origin, glossary terms, fuzzy match)
        and, with `request.align`, its word alignment (`vaswani.translation.pipeline`)."""
        return pipeline.translate(self, texts, request, progress)

    def translate_file(
        self, source: str | Path, output: str | Path | None = None, request: Request | None = None
    ) -> bytes:
        """The file `source` translated whole in its format (by its extension), with the request's
        aids, written to `output` when given (atomically: never half-written); its bytes."""
        return translate_file(self, source, output, request)

    def load_shortlist(self) -> Shortlist:
        """RUN/shortlist.safetensors, written by `vaswani shortlist`, checked against the model."""
        if self.path is None or not (self.path / SHORTLIST).exists():
            raise RunError(
                f"{self.path} has no {SHORTLIST}; build it with `vaswani shortlist {self.path}`"
            )
        path = member(self.path, SHORTLIST, "the shortlist")
        cfg = self.config
        self.shortlist = Shortlist.load(path, cfg.vocab_size, cfg.target_vocab_size)
        return self.shortlist

    @classmethod
    def load(
        cls,
        run: str | Path,
        weights: str = "best",
        placement: Placement | None = None,
        choices: Choices | None = None,
    ) -> Engine:
        """The run's model with everything decided as `vaswani translate` decides it: on the
        device and in the precision `placement` resolved (by default: the fastest here), with
        `--precision auto` measured on the run's own sentences once per machine
        (`vaswani.translation.precision`), int8 weights and a shortlist as `choices` say."""
        return decide(load_run(run, weights), placement or place(), choices or Choices())


@dataclass(frozen=True)
class Choices:
    """What a user may ask of an engine besides its device and precision."""

    quantize: str = "none"
    """int8 weights ("int8"), or as trained ("none")."""
    shortlist: bool = False
    """Load the run's lexical shortlist (`vaswani shortlist`)."""
    auto: bool = True
    """The precision was asked as "auto": the decoding choice may be measured."""


def decide(engine: Engine, placement: Placement, choices: Choices) -> Engine:
    """`engine` on `placement`'s device, with the measured decoding choice (where `choices.auto`),
    int8 weights and a shortlist as `choices` say; its notes say what was chosen."""
    engine.model.to(placement.device)
    how, notes = choices.quantize, []
    if choices.auto and how == "none" and engine.task.parallel:
        choice = measured.decoding_choice(engine, placement)
        if choice is not None:
            placement = dataclasses.replace(
                placement, precision=choice.precision, precision_reason=choice.reason
            )
            how = choice.quantize
            kernels.decode_with_onednn(engine.model, choice.onednn)
            if choice.onednn:
                notes.append("matrix kernels: oneDNN for float32 (--precision auto)")
    if how != "none":
        if placement.precision != "fp32":  # dynamic int8 layers take and give float32
            if not choices.auto:
                raise EngineError(
                    f"quantize={how!r} computes in fp32 (int8 weights, float32 activations); "
                    f"leave out precision={placement.precision!r}"
                )
            placement = dataclasses.replace(
                placement, precision="fp32", precision_reason=f"{how} weights compute in fp32"
            )
        engine.model = quantize(engine.model, how, placement.device)
        engine.weights = how
        reason = "--quantize" if how == choices.quantize else "--precision auto"
        notes.append(f"weights: {how} ({reason})")
    if choices.shortlist:
        if not engine.task.parallel:
            raise EngineError("shortlist=True is for translation models")
        engine.load_shortlist()
        notes.append(
            f"shortlist: {engine.shortlist.frequent.numel()} frequent tokens + "
            f"{engine.shortlist.per_token.size(1)} per source token"
        )
    engine.precision, engine.decided = placement.precision, True
    engine.notes = [*notes, *placement.lines()]
    return engine


def load_run(run: str | Path, weights: str = "best") -> Engine:
    """The trained model of run directory `run` as it was trained (eval mode, CPU, fp32), with
    its tokenizers, data record and confidence calibration.

    `weights`: "best" (best validation figure; the latest checkpoint when there is no best/),
    "latest", or "averaged" (written by `vaswani average`).
    """
    run = Path(run)
    model, src_tok, tgt_tok, info = load_trained(run, weights)
    engine = Engine(model, src_tok, tgt_tok, assess=calibration(run), path=run, info=info)
    engine.forces_target = engine.languages is not None and engine.languages.forced
    return engine


def calibration(run: Path) -> Calibration | None:
    """How a run's translations are assessed: its calibration (RUN/confidence.json, fitted on its
    validation split); None without one: a translation's confidence is then the mean
    probability per token that search gives."""
    if not (run / CONFIDENCE).exists():
        return None
    where = member(run, CONFIDENCE, "the confidence calibration")
    record = read_json(where, "confidence calibration", dict, limit=1 << 20)
    try:
        return Calibration.from_record(record)
    except (KeyError, TypeError, ValueError) as error:
        raise RunError(
            f"{run / CONFIDENCE}: not a calibration ({error}); "
            f"refit it with `vaswani calibrate --checkpoint {run}`"
        ) from None
