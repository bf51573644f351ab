"""The precision a translation model decodes in, chosen by measuring it: with `--precision auto`,
`translate`, `evaluate`, `serve` and `calibrate` translate up to 200 of the run's own validation
sentences in fp32, in bf16 (where the device computes it natively), with int8 weights (on a
CPU) and in fp32 on oneDNN's matrix kernels instead of MKL's (on a CPU; see `vaswani.kernels`),
and take the fastest whose BLEU is within 0.5 of fp32's. Training's rule (bf16 wherever the
hardware has it) is not decoding's: a small model's beam search can be bound by its Python steps
and memory, not its matmuls, and int8 weights pay on every CPU.

The measurement is made once per machine and run: the choice, with its times and BLEU, is kept in
the run as `decoding.json`, under the machine's name (CPU and vector ISA and cores, or the GPU),
PyTorch's version and the thread count.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from vaswani import kernels
from vaswani.config import DecodeConfig
from vaswani.decoding.quantize import quantize
from vaswani.decoding.text import Segments, TextModel, translate_segments
from vaswani.device import Hardware, Placement, autocast, machine_name
from vaswani.errors import VaswaniError
from vaswani.metrics import score
from vaswani.run import validation_pairs
from vaswani.safe_io import is_number, member, read_json, write_atomic


class Run(Protocol):
    """What measuring needs of an engine: its model and tokenizers, and the run they came from."""

    path: Path
    info: dict
    model: nn.Module
    src_tokenizer: Any
    tgt_tokenizer: Any
    shortlist: Any


FILE = "decoding.json"
SENTENCES = 200
TOLERANCE = 0.5
"""BLEU a faster precision may lose against fp32 and still be taken."""


@dataclass(frozen=True)
class Choice:
    precision: str
    """fp32, bf16 or fp16: what decoding autocasts to."""
    quantize: str
    """none or int8: the linear layers' weights."""
    reason: str
    onednn: bool = False
    """float32 linear layers on oneDNN (`vaswani.kernels.decode_with_onednn`)."""


def candidates(placement: Placement, hw: Hardware) -> list[tuple[str, str]]:
    """(precision, how) pairs worth measuring on this device; how: the weights ("none", "int8")
    or "onednn" (float32 weights, oneDNN's kernels)."""
    found = [("fp32", "none")]
    if placement.device.type == "cpu":
        if hw.cpu_bf16()[0]:
            found.append(("bf16", "none"))
        found.append(("fp32", "int8"))
        if kernels.onednn_available():
            found.append(("fp32", "onednn"))
    elif placement.device.type == "cuda":
        major = hw.cuda[placement.device.index or 0][1][0] if hw.cuda else 0
        found.append(("bf16" if major >= 8 else "fp16", "none"))
    return found


def name_of(precision: str, how: str) -> str:
    return {"int8": "int8", "onednn": "fp32-onednn"}.get(how, precision)


def choice_of(found: dict, reason: str) -> Choice:
    """The `Choice` a record (`measure`'s result) names."""
    return Choice(found["precision"], found["quantize"], reason, found.get("onednn", False))


def decoding_choice(loaded: Run, placement: Placement, hw: Hardware | None = None) -> Choice | None:
    """The measured choice for `loaded` (a translation engine) on this machine,
    from the run's record or measured now (and recorded); None where there is nothing to
    measure on (no validation text, or one candidate only): training's rule stands."""
    hw = hw or Hardware.detect()
    options = candidates(placement, hw)
    if len(options) < 2:
        return None
    key = f"{machine_name(placement.device, hw)}, torch {torch.__version__}, {torch.get_num_threads()} threads"
    record = known(loaded.path)
    names = {name_of(*o) for o in options}
    if key in record and names <= set(record[key].get("seconds", {})):  # else: measured fewer
        found = record[key]
        return choice_of(
            found, f"auto for decoding: {summary(found)}, measured before on this machine"
        )
    texts = validation_text(loaded)
    if texts is None:
        return None
    print(
        f"precision: measuring {', '.join(name_of(*o) for o in options)} on {len(texts[0])} validation sentences (once per machine)",
        file=sys.stderr,
    )
    found = measure(loaded, placement, options, *texts)
    record[key] = found
    with contextlib.suppress(OSError, VaswaniError):  # a read-only run: measured next time
        write_atomic(loaded.path / FILE, (json.dumps(record, indent=1) + "\n").encode())
    return choice_of(found, f"auto for decoding: {summary(found)}")


def known(run: Path) -> dict:
    """The run's measured choices, by machine: an entry that is not one `measure` writes (edited,
    damaged, of another version) is left out, so that it is measured again; so is the whole file
    where it cannot be read as a regular JSON file inside the run."""
    if not (run / FILE).exists() and not (run / FILE).is_symlink():
        return {}
    try:
        record = read_json(member(run, FILE, "the decoding precision record"), limit=1 << 20)
    except (OSError, VaswaniError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    return {key: entry for key, entry in record.items() if well_formed(entry)}


def well_formed(entry: Any) -> bool:
    """Whether `entry` is a measurement as `measure` writes it."""
    if not isinstance(entry, dict):
        return False
    figures = [entry.get("seconds"), entry.get("bleu")]
    return (
        entry.get("precision") in ("fp32", "bf16", "fp16")
        and entry.get("quantize") in ("none", "int8")
        and isinstance(entry.get("onednn", False), bool)
        and type(entry.get("sentences")) is int
        and all(isinstance(f, dict) for f in figures)
        and all(is_number(v) and math.isfinite(v) for f in figures for v in f.values())
        and set(figures[0]) == set(figures[1])
    )


def validation_text(loaded: Run) -> tuple[list[str], list[str]] | None:
    """Up to SENTENCES of the run's validation pairs; None without 20 of them."""

    try:
        sources, references, _ = validation_pairs(loaded.info, SENTENCES, "")
    except (OSError, VaswaniError):
        return None
    return (sources, references) if len(sources) >= 20 else None


def measure(
    loaded: Run,
    placement: Placement,
    options: list[tuple[str, str]],
    sources: list[str],
    references: list[str],
) -> dict:
    """Each option's seconds and BLEU on `sources`, and the fastest within TOLERANCE of fp32."""
    seconds, bleu = {}, {}
    for precision, how in options:
        model = quantize(loaded.model, "int8" if how == "int8" else "none", placement.device)
        name = name_of(precision, how)
        with kernels.onednn_decoding(model, how == "onednn"):
            timed_translation(loaded, model, placement, precision, warm_up(sources, placement))
            seconds[name], found = timed_translation(loaded, model, placement, precision, sources)
        bleu[name] = score(found, references).bleu
    fine = [o for o in options if bleu[name_of(*o)] >= bleu["fp32"] - TOLERANCE]
    precision, how = min(fine, key=lambda o: seconds[name_of(*o)])
    return {
        "precision": precision,
        "quantize": "int8" if how == "int8" else "none",
        "onednn": how == "onednn",
        "seconds": seconds,
        "bleu": bleu,
        "sentences": len(sources),
    }


def warm_up(sources: list[str], placement: Placement) -> list[str]:
    """What to translate once before timing: on a CPU 8 sentences; on a GPU all of them, as
    each batch shape's kernels are chosen and loaded on first use (on an H100 the first bf16 pass
    over 200 sentences took 6.3 s, the next 0.40 s; fp32 0.87 s, then 0.44-0.50 s)."""
    return sources if placement.device.type == "cuda" else sources[:8]


def timed_translation(
    engine: Run, model: nn.Module, placement: Placement, precision: str, texts: list[str]
) -> tuple[float, list[str]]:
    """Seconds for `model` (the engine's, or its int8 copy) to translate `texts` with beam
    search's defaults, and the translations."""
    tm = TextModel(model, engine.src_tokenizer, engine.tgt_tokenizer, engine.shortlist)
    start = time.perf_counter()
    with torch.no_grad(), autocast(placement.device, precision):
        found = translate_segments(tm, Segments(texts), DecodeConfig(), "truncate")
    return time.perf_counter() - start, [mine[0].text if mine else "" for mine in found]


def summary(found: dict) -> str:
    how = "onednn" if found.get("onednn") else found["quantize"]
    chosen = name_of(found["precision"], how)
    figures = ", ".join(
        f"{name} {found['seconds'][name]:.2f} s BLEU {found['bleu'][name]:.2f}"
        for name in found["seconds"]
    )
    return f"{chosen} fastest within {TOLERANCE} BLEU of fp32 on {found['sentences']} validation sentences ({figures})"
