"""What `vaswani runs` shows of a run directory: one row per run, from the files it keeps.

    data          the corpus it was trained on (data.json)
    model         the preset chosen and the parameters (recipe.json, config.json)
    steps, minutes  updates made and training time (metrics.jsonl)
    precision, machine  environment.json of the latest (re)start
    valid chrF/BLEU   the best validation figures (metrics.jsonl; a weight average's count too)
    test chrF/BLEU    the latest `vaswani evaluate` of the run on its test split (evaluations.jsonl)
A file a run lacks (an imported model has no metrics) leaves its columns empty; a damaged one is a
one-line error naming it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

from vaswani.config import ModelConfig
from vaswani.data.dataset import task_of
from vaswani.run import CONFIG, DATA_INFO, ENVIRONMENT, METRICS, TRAIN_CONFIG, RunError
from vaswani.safe_io import UnsafeFileError, append_record, is_number, read_json, read_records
from vaswani.tasks import builtin_corpora, get_task
from vaswani.train.recipe import RECORD as RECIPE

EVALUATIONS = "evaluations.jsonl"
COLUMNS = (
    "run",
    "data",
    "model",
    "parameters",
    "steps",
    "minutes",
    "precision",
    "machine",
    "valid_chrf",
    "valid_bleu",
    "test_chrf",
    "test_bleu",
)


def is_run(path: Path) -> bool:
    return (path / CONFIG).is_file() and (path / DATA_INFO).is_file()


def find_runs(paths: list[Path]) -> list[Path]:
    """Each path that is a run directory, and the run directories directly inside the others."""
    found = []
    for path in paths:
        if is_run(path):
            found.append(path)
        elif path.is_dir():
            found += sorted(child for child in path.iterdir() if child.is_dir() and is_run(child))
        else:
            raise RunError(f"{path}: not a run directory, nor a directory of runs")
    if not found:
        raise RunError(f"no run directories in {', '.join(map(str, paths))}")
    return found


def best(records: list[dict], key: str) -> float | None:
    """The highest value of `key` or of a weight variant's (`ema_key`, `last_key`) over records."""
    values = [
        record[name]
        for record in records
        for name in (key, f"ema_{key}", f"last_{key}")
        if is_number(record.get(name))
    ]
    return max(values) if values else None


def text(value: Any) -> str | None:
    """A cell of the table from a JSON value of a run file (which anyone may have edited)."""
    return None if value is None else str(value)[:80]


def minutes(record: dict) -> float | None:
    seconds = record.get("elapsed_seconds")
    return round(seconds / 60, 1) if is_number(seconds) else None


def data_name(corpus: dict) -> str:
    """A built-in corpus's name, a file's name, or how many corpora."""
    if corpus.get("name") == "several":
        return f"{corpus.get('corpora')} corpora"
    if corpus.get("path") and corpus.get("name") not in builtin_corpora():
        return Path(corpus["path"]).name
    return str(corpus.get("name", "?"))


def optional_json(path: Path, what: str) -> dict:
    """A JSON object file a run may lack (an imported model has no training settings): {} then."""
    return read_json(path, what, dict) if path.is_file() else {}


def summary(run: Path) -> dict[str, Any]:
    """One row of `vaswani runs` for `run`."""
    info = read_json(run / DATA_INFO, "run record", dict)
    meta = info.get("meta") if isinstance(info.get("meta"), dict) else {}
    corpus = meta.get("corpus") if isinstance(meta.get("corpus"), dict) else {}
    cfg = ModelConfig.from_dict(read_json(run / CONFIG, "model settings", dict))
    with torch.device("meta"):
        model = get_task(task_of(meta)).build_model(cfg)
        parameters = sum(p.numel() for p in model.parameters())
    asked = optional_json(run / TRAIN_CONFIG, "training settings")
    recipe = optional_json(run / RECIPE, "recipe")
    environment = optional_json(run / ENVIRONMENT, "environment")
    records = read_records(run / METRICS) if (run / METRICS).is_file() else []
    steps = [r for r in records if is_number(r.get("loss"))]
    evaluations = read_records(run / EVALUATIONS) if (run / EVALUATIONS).is_file() else []
    tests = [r for r in evaluations if r.get("split") == "test"]
    choice = recipe.get("choice") if isinstance(recipe.get("choice"), dict) else {}
    return {
        "run": str(run),
        "data": data_name(corpus),
        "model": text(choice.get("preset")) or text(asked.get("preset")) or "imported",
        "parameters": parameters,
        "steps": steps[-1]["step"] if steps else None,
        "minutes": minutes(steps[-1]) if steps else None,
        "precision": text(environment.get("precision")),
        "machine": text(environment.get("machine")),
        "valid_chrf": best(records, "valid_chrf"),
        "valid_bleu": best(records, "valid_bleu"),
        "test_chrf": best(tests[-1:], "chrf"),
        "test_bleu": best(tests[-1:], "bleu"),
    }


def record_evaluation(run: Path, record: dict[str, Any]) -> bool:
    """Append an evaluation to the run's evaluations.jsonl (for `vaswani runs`); False where the
    run directory cannot be written (an imported model on a read-only disk)."""
    try:
        append_record(run / EVALUATIONS, {"step": 0, **record})  # read_records wants a step
    except UnsafeFileError as error:  # a link planted in the run: the scores stay printed only
        warnings.warn(f"{error}; the evaluation is not recorded", stacklevel=2)
        return False
    except OSError:
        return False
    return True
