"""A run directory: its layout, in one place, and loading a trained model from it.

`vaswani train` writes one, `vaswani import-marian` makes one from a Hugging Face model, and every
command that runs a model reads one. Inference code imports this module, never the training loop.

A run directory holds everything `translate` needs and everything `--resume` needs:
    config.json, train_config.json      the model and the training settings (as asked)
    config.yaml                         the same settings as a `vaswani train --config` file
    recipe.json                         what `auto` chose and the schedule's plan (kept on resume)
    tokenizer.json (or src./tgt.)       the tokenizer(s), copied from the data
    data.json                           where the data came from, its meta.json and fingerprint
    environment.json                    the device, precision and threads of the latest (re)start
    confidence.json                     the calibration of translations' confidence (`vaswani calibrate`)
    metrics.jsonl                       one JSON record per logged step and per evaluation
    time.json                           where the latest session's time went (start-up, updates,
                                        validation, saving, calibration, ...)
    checkpoints/step-NNNNNNNN/, latest  weights, optimizer, RNG, data position (last K kept)
    best/                               the weights with the best validation figure (`vaswani.tasks`)
    shortlist.safetensors               a lexical shortlist for faster decoding (`vaswani shortlist`)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from torch import nn

from vaswani import checkpoint as ckpt
from vaswani.config import ModelConfig, TrainConfig
from vaswani.data import PreparedData
from vaswani.data.dataset import task_of
from vaswani.data.tokenizer import load_tokenizers, vocab_mismatch
from vaswani.errors import VaswaniError
from vaswani.safe_io import append_record, read_json, read_records, write_atomic
from vaswani.tasks import get_task

CONFIG = "config.json"
TRAIN_CONFIG = "train_config.json"
CONFIG_YAML = "config.yaml"
DATA_INFO = "data.json"
METRICS = "metrics.jsonl"
ENVIRONMENT = "environment.json"
CONFIDENCE = "confidence.json"
CHECKPOINTS = "checkpoints"
BEST = "best"
AVERAGED = "averaged"
WEIGHTS = ("best", "latest", AVERAGED)
"""Which weights of a run to load: the best validation figure's, the latest checkpoint's, or those
`vaswani average` wrote."""


class RunError(VaswaniError):
    """A run directory that cannot be used; the message names the file and what to do."""


def weights_path(run: Path, weights: str) -> Path:
    """The checkpoint directory of `run` that `weights` (best, latest, averaged) names."""
    if weights == "best" and not (run / BEST).is_dir():
        weights = "latest"
    if weights == "latest":
        path = ckpt.latest_valid(run / CHECKPOINTS)
        if path is None:
            raise RunError(f"{run}: no valid checkpoint")
        return path
    if weights not in ("best", AVERAGED):
        raise RunError(f"weights={weights!r}: choose best, latest or averaged")
    path = run / (BEST if weights == "best" else AVERAGED)
    if path.is_symlink() or (path.exists() and path.resolve().parent != run.resolve()):
        raise RunError(f"{path}: leads outside {run}; refusing to load weights from it")
    if not path.is_dir():
        raise RunError(f"{run}: no {path.name}/ weights (for averaged: run `vaswani average`)")
    return path


def load_trained(run: Path, weights: str = "best") -> tuple[nn.Module, Any, Any, dict]:
    """The trained model of run directory `run` (in eval mode, on the CPU), its source and target
    tokenizers (a classifier's `LabelSet` for the target) and its data record (data.json).

    `weights`: "best" (best validation figure; the latest checkpoint when there is no best/),
    "latest", or "averaged" (written by `vaswani average`). `vaswani.translation.load_run` makes
    an engine of it.
    """
    run = Path(run)
    if not run.is_dir():
        raise RunError(f"{run}: no such run directory")
    for name in (CONFIG, DATA_INFO):
        if not (run / name).is_file() and not (run / name).is_symlink():  # a link: read_json says
            raise RunError(
                f"{run}: not a complete run directory (no {name}); give a directory written by "
                "`vaswani train`"
            )
    try:
        cfg = ModelConfig.from_dict(read_json(run / CONFIG, "model settings", dict))
        info = read_json(run / DATA_INFO, "data record", dict)
        tokenizer_meta = info["meta"]["tokenizer"]
        if not {"src", "tgt"} <= set(tokenizer_meta["files"]):
            raise KeyError("tokenizer files")
    except (ValueError, KeyError, TypeError) as error:
        raise RunError(
            f"{run}: cannot use {CONFIG} / {DATA_INFO}, damaged or written by an incompatible "
            f"version of vaswani ({type(error).__name__}: {error})"
        ) from None
    path = weights_path(run, weights)
    try:
        task = get_task(task_of(info["meta"]))
        model = task.build_model(cfg)
    except ValueError as error:
        raise RunError(f"{run}: cannot build its model: {error}") from None
    ckpt.load_checkpoint_weights(model, path)
    try:
        src_tok, tgt_tok = load_tokenizers(run, tokenizer_meta)
    except ValueError as error:
        raise RunError(f"{run}: incomplete run directory: {error}") from None
    mismatch = vocab_mismatch(src_tok, tgt_tok, cfg.vocab_size, task.output_size(cfg))
    if mismatch:
        raise RunError(f"{run}: {mismatch}")
    return model.eval(), src_tok, tgt_tok, info


def data_fingerprint(meta: dict) -> str:
    """Identifies the training data and tokenizer: resume refuses data that changed under it."""
    basis = {"train": meta["splits"]["train"]["sha256"], "tokenizer": meta["tokenizer"]}
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()


def config_yaml(tc: TrainConfig, run: Path) -> str:
    """The run's settings as a `vaswani train --config` file: every key, as asked (with --preset
    auto the choice made is in recipe.json). Adam's betas and epsilon are the paper's constants,
    not settings, and are left out."""
    import yaml

    settings = {k: v for k, v in tc.to_dict().items() if k not in ("adam_betas", "adam_eps")}
    return (
        f"# The settings of the run {run}, as asked. Repeat it with\n"
        f"#   vaswani train --config {run / CONFIG_YAML} --out NEW_RUN\n"
        + yaml.safe_dump(settings, sort_keys=False, allow_unicode=True)
    )


def create_run_dir(tc: TrainConfig, cfg: ModelConfig, data: PreparedData) -> Path:
    """A new run directory `tc.out`: its settings, the data's tokenizer files and data record."""
    run = Path(tc.out)
    if (run / CHECKPOINTS).exists():
        raise RunError(f"{run} already holds a training run; continue it with --resume {run}")
    run.mkdir(parents=True, exist_ok=True)
    write_atomic(run / CONFIG, json.dumps(cfg.to_dict(), indent=2).encode())
    write_atomic(run / TRAIN_CONFIG, json.dumps(tc.to_dict(), indent=2).encode())
    write_atomic(run / CONFIG_YAML, config_yaml(tc, run).encode())
    for name in sorted(set(data.meta["tokenizer"]["files"].values())):
        write_atomic(run / name, (data.directory / name).read_bytes())  # never through a link
    info = {
        "path": str(data.directory.resolve()),  # evaluate may run from elsewhere
        "fingerprint": data_fingerprint(data.meta),
        "meta": data.meta,
    }
    write_atomic(run / DATA_INFO, json.dumps(info, indent=2).encode())
    return run


def append_metrics(run: Path, record: dict) -> None:
    """One line of metrics.jsonl."""
    append_record(run / METRICS, record)


def truncate_metrics(run: Path, step: int) -> None:
    """Drop records a killed run logged after the checkpoint it resumes from (and torn ones)."""
    if (run / METRICS).exists():
        kept = [r for r in read_records(run / METRICS) if r["step"] <= step]
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept)
        write_atomic(run / METRICS, lines.encode())


def validation_pairs(
    info: dict, limit: int, alternative: str
) -> tuple[list[str], list[str], list[str] | None]:
    """The first `limit` sources and references of the validation split a run was trained on
    (from its data.json `info`), blank pairs left out, and for a multilingual dataset each one's
    language pair ("de-en"); a RunError (or OSError) where the data cannot be had, naming
    `alternative` as `training_data` does."""
    data = training_data(info, alternative)
    sources, references = data.text("valid")
    names = data.pair_names("valid") or [None] * len(sources)
    kept = [
        (s, r, n)
        for s, r, n in zip(sources, references, names, strict=True)
        if s.strip() and r.strip()
    ][:limit]
    pairs = [n for _, _, n in kept] if data.languages is not None else None
    return [s for s, _, _ in kept], [r for _, r, _ in kept], pairs


def training_data(info: dict, alternative: str) -> PreparedData:
    """The prepared data a run was trained on (from its data.json `info`), or a RunError
    saying why it cannot be had and to evaluate with `alternative` flags instead."""
    if info.get("path") is None:
        raise RunError(
            f"this run directory has no training data (it was imported); evaluate with {alternative}"
        )
    data_dir = Path(info["path"])
    if not (data_dir / "meta.json").is_file():
        raise RunError(
            f"the run's data directory {data_dir} is gone; prepare it again there, or evaluate "
            f"with {alternative}"
        )
    return PreparedData(data_dir)
