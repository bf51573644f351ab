"""Checkpoints that survive kills and refuse tampering.

A checkpoint is a directory written under a temporary name and renamed into place, so it either
exists complete or not at all; a `manifest.json` of SHA-256 digests is written last and checked on
load (neither torch nor safetensors notices a flipped byte in tensor data); the `latest` pointer is
replaced atomically and only ever names a complete checkpoint. Weights are safetensors, metadata is
JSON, and the few torch files (optimizer state, RNG state) load with `weights_only=True`, so nothing
in a run directory can run code.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from vaswani.errors import VaswaniError
from vaswani.safe_io import (
    DamagedFileError,
    UnsafeFileError,
    fsync,
    inner_directory,
    member,
    read_json,
    write_atomic,
)

WEIGHTS = "model.safetensors"
OPTIMIZER = "optimizer.pt"
RNG = "rng.pt"
STATE = "state.json"
MANIFEST = "manifest.json"
LATEST = "latest"
# The files a checkpoint may hold; a manifest naming anything else is refused, not followed.
AVERAGE = "ema.safetensors"
"""The moving average of the weights (`vaswani.train.average.WeightAverage`), when kept."""
FILES = (WEIGHTS, OPTIMIZER, RNG, STATE, AVERAGE)
_STEP_DIR = re.compile(r"^step-(\d{8,})$")


class CheckpointError(VaswaniError):
    """A checkpoint that cannot be used; the message names the file."""


def unique_state(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The model's tensors with each shared (tied) tensor once, and the names that alias it.

    Returns ({name: tensor}, {alias: name}); `state_dict()` order decides which name is kept.
    """
    tensors: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple[int, int, tuple], str] = {}
    for name, tensor in model.state_dict().items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key in seen:
            aliases[name] = seen[key]
        else:
            seen[key] = name
            tensors[name] = tensor
    return tensors, aliases


def save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(path))


def save_weights(model: nn.Module, path: Path) -> None:
    """The model's tensors, each tied (shared) tensor once."""
    save_tensors(unique_state(model)[0], path)


def load_checkpoint_weights(model: nn.Module, checkpoint: Path) -> None:
    """Verify a checkpoint directory against its manifest, then load its weights into `model`."""
    verify(checkpoint)
    load_weights(model, read_weights(checkpoint / WEIGHTS), checkpoint / WEIGHTS)


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors file; a file that is not one gives `checkpoint corrupt: FILE`."""
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"checkpoint corrupt: {path} ({error})") from None


# Weight names of files written by earlier versions -> today's.
OLD_NAMES = {
    "generator.weight": "output_projection.weight",
    "generator.bias": "output_projection.bias",
}


def load_weights(model: nn.Module, tensors: dict[str, torch.Tensor], source: Path | str) -> None:
    """Load `tensors` into `model`, or raise listing missing, extra and mis-shaped keys.

    Everything is checked before anything is copied, so a failed load leaves the model unchanged.
    """
    tensors = {OLD_NAMES.get(name, name): tensor for name, tensor in tensors.items()}
    expected, aliases = unique_state(model)
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    misshaped = sorted(
        f"{k} (checkpoint {tuple(tensors[k].shape)}, model {tuple(expected[k].shape)})"
        for k in set(expected) & set(tensors)
        if tensors[k].shape != expected[k].shape
    )
    if missing or extra or misshaped:
        parts = [
            f"{label}: {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''}"
            for label, keys in (("missing", missing), ("extra", extra), ("mis-shaped", misshaped))
            if keys
        ]
        raise CheckpointError(
            f"{source} does not fit this model (another architecture or vocabulary?); "
            + "; ".join(parts)
        )
    full = dict(tensors)
    full.update({alias: tensors[name] for alias, name in aliases.items()})
    model.load_state_dict(full, strict=True)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_checkpoint(
    directory: Path, name: str, writers: dict[str, Callable[[Path], None]]
) -> Path:
    """Write a checkpoint directory `name` under `directory` atomically; returns its path.

    `writers` maps file names to functions that write that file. The manifest comes last.
    """
    inner_directory(directory, "checkpoint directory")
    tmp = directory / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for filename, write in writers.items():
            write(tmp / filename)
            fsync(tmp / filename)
        manifest = {filename: sha256_file(tmp / filename) for filename in writers}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        fsync(tmp / MANIFEST)
        final = directory / name
        if final.is_symlink():  # a link planted where a checkpoint goes: replaced, not followed
            final.unlink()
        if final.exists():  # the same name saved again: move the old one aside, then replace it
            old = directory / f".tmp-old-{name}-{os.getpid()}"
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old)
        else:
            os.rename(tmp, final)
        fsync(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def verify(checkpoint: Path) -> None:
    """Raise `checkpoint corrupt: FILE` unless every file matches the manifest. The manifest must
    list the weights, and may name only a checkpoint's own files (`FILES`), inside it."""
    manifest_path = checkpoint / MANIFEST
    try:
        manifest = read_json(manifest_path, "checkpoint manifest", dict)
    except DamagedFileError:
        raise CheckpointError(
            f"checkpoint corrupt: {manifest_path} (missing or unreadable)"
        ) from None
    if not isinstance(manifest, dict) or WEIGHTS not in manifest:
        raise CheckpointError(f"checkpoint corrupt: {manifest_path} (does not list {WEIGHTS})")
    for filename, digest in manifest.items():
        if filename not in FILES:
            raise CheckpointError(
                f"checkpoint corrupt: {manifest_path} names {filename!r}, not a checkpoint file"
            )
        try:
            path = member(checkpoint, filename, str(manifest_path))
        except UnsafeFileError as error:
            raise CheckpointError(f"checkpoint corrupt: {error}") from None
        if sha256_file(path) != digest:
            raise CheckpointError(f"checkpoint corrupt: {path}")


def step_dirs(directory: Path) -> list[Path]:
    """Checkpoint directories named step-NNNNNNNN, oldest first."""
    if not directory.is_dir():
        return []
    found = [
        p
        for p in directory.iterdir()
        if _STEP_DIR.match(p.name) and p.is_dir() and not p.is_symlink()  # no links elsewhere
    ]
    return sorted(found, key=lambda p: int(_STEP_DIR.match(p.name).group(1)))


def step_name(step: int) -> str:
    return f"step-{step:08d}"


def set_latest(directory: Path, checkpoint: Path) -> None:
    write_atomic(directory / LATEST, (checkpoint.name + "\n").encode())


def clean_leftovers(directory: Path) -> None:
    """Remove temporary files and directories left by a save that was killed."""
    if directory.is_dir():
        for path in directory.glob(".*tmp-*"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def latest_valid(directory: Path, clean: bool = False) -> Path | None:
    """The checkpoint `latest` names, or, if it is damaged, the newest one that verifies.

    clean: first remove what a killed save left behind; only for the run's writer (resume), since
    a reader could be deleting what a training run in progress is writing."""
    if clean:
        clean_leftovers(directory)
    candidates = step_dirs(directory)[::-1]
    pointer = directory / LATEST
    if pointer.is_file():
        name = pointer.read_bytes().decode("utf-8", "replace").strip()
        # `latest` names a step directory beside it, nothing else (not ../../other/best).
        if _STEP_DIR.match(name) and (directory / name).resolve().parent == directory.resolve():
            named = directory / name
            candidates = [named] + [c for c in candidates if c != named]
        else:
            warnings.warn(f"{pointer} names {name[:80]!r}, not a checkpoint here", stacklevel=2)
    for i, checkpoint in enumerate(candidates):
        try:
            verify(checkpoint)
        except CheckpointError as error:
            warnings.warn(f"{error}; trying an older checkpoint", stacklevel=2)
            continue
        if i:
            warnings.warn(
                f"resuming from {checkpoint.name}, the newest valid checkpoint", stacklevel=2
            )
        return checkpoint
    return None


def prune(directory: Path, keep_last: int) -> None:
    """Delete all but the newest `keep_last` step checkpoints; never the one `latest` names."""
    pointer = directory / LATEST
    protected = (
        pointer.read_bytes().decode("utf-8", "replace").strip() if pointer.is_file() else None
    )
    for old in step_dirs(directory)[:-keep_last] if keep_last > 0 else []:
        if old.name != protected:
            shutil.rmtree(old)


def torch_load(path: Path) -> Any:
    """`torch.load` restricted to tensors and plain containers: a pickle that would run code is refused."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # UnpicklingError, RuntimeError for truncated zip files, ...
        raise CheckpointError(
            f"checkpoint corrupt or unsafe: {path} ({type(error).__name__}); it was not loaded"
        ) from None
