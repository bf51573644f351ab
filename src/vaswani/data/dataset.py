"""Reading a prepared directory: memory-mapped token ids and the tokenizer(s)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vaswani.data.corpora import DataError
from vaswani.data.tokenizer import load_tokenizers
from vaswani.languages import LanguageError, Languages, pair_name, parse_pair
from vaswani.safe_io import check_keys, read_json, read_text

FORMAT_VERSION = 1
"""The layout of a prepared directory that `prepare` writes and this module reads."""
SPLITS = ("train", "valid", "test")
SIDES = ("src", "tgt")


def _map(path: Path, dtype: np.dtype) -> np.ndarray:
    if not path.is_file():
        raise DataError(f"{path}: missing; the prepared directory is incomplete, run prepare again")
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


class ParallelSplit:
    """One split of a prepared dataset; pairs are read from disk on demand, never loaded whole.

    `src_lengths`, `tgt_lengths`: (N,) subword counts without BOS/EOS.
    `pair(i)`: the source and target ids of pair i as numpy arrays.
    """

    def __init__(self, directory: Path, split: str, dtype: np.dtype) -> None:
        self.name = split
        self.ids = {side: _map(directory / f"{split}.{side}.bin", dtype) for side in SIDES}
        self.offsets = {
            side: _map(directory / f"{split}.{side}.idx", np.dtype("<i8")) for side in SIDES
        }
        counts = {len(self.offsets[side]) - 1 for side in SIDES}
        if len(counts) != 1:
            raise DataError(f"{directory}: {split} source and target hold different pair counts")
        self.src_lengths = np.diff(self.offsets["src"])
        self.tgt_lengths = np.diff(self.offsets["tgt"])

    def __len__(self) -> int:
        return len(self.src_lengths)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        src_off, tgt_off = self.offsets["src"], self.offsets["tgt"]
        return (
            self.ids["src"][src_off[i] : src_off[i + 1]],
            self.ids["tgt"][tgt_off[i] : tgt_off[i + 1]],
        )


def task_of(meta: dict) -> str:
    """The task a meta.json record was prepared for."""
    return meta.get("task", "translate")


class EncodedSplit:
    """Pairs of token ids held in memory, read like a `ParallelSplit` (e.g. a file to evaluate on).

    src, tgt: one id sequence per pair, without BOS/EOS (for a language model, src is empty).
    """

    def __init__(self, src: list[list[int]], tgt: list[list[int]]) -> None:
        if len(src) != len(tgt):
            raise ValueError(f"{len(src)} sources for {len(tgt)} targets")
        self.src = [np.asarray(ids, dtype=np.int64) for ids in src]
        self.tgt = [np.asarray(ids, dtype=np.int64) for ids in tgt]
        self.src_lengths = np.array([len(ids) for ids in src], dtype=np.int64)
        self.tgt_lengths = np.array([len(ids) for ids in tgt], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.src)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.src[i], self.tgt[i]


class PreparedData:
    """A directory written by `vaswani prepare`."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        meta_path = self.directory / "meta.json"
        if not meta_path.is_file():
            raise DataError(
                f"{self.directory}: not a prepared dataset (no meta.json); "
                "create one with `vaswani prepare CORPUS --out DIR`"
            )
        self.meta = read_json(meta_path, "dataset record", dict)
        version = self.meta.get("format_version")
        if version != FORMAT_VERSION:
            raise DataError(
                f"{self.directory}: prepared with format {version}, this vaswani reads format "
                f"{FORMAT_VERSION}; run prepare again"
            )
        check_keys(self.meta, meta_path, "dataset record", {"tokenizer": dict, "dtype": str})
        if self.meta["dtype"] not in ("<u2", "<u4"):
            raise DataError(f"{meta_path}: damaged dataset record: dtype {self.meta['dtype']!r}")
        self.src_tokenizer, self.tgt_tokenizer = load_tokenizers(
            self.directory, self.meta["tokenizer"]
        )
        self.dtype = np.dtype(self.meta["dtype"])

    @property
    def task(self) -> str:
        """translate, lm or classify (data prepared before tasks existed is translation)."""
        return task_of(self.meta)

    @property
    def languages(self) -> Languages | None:
        """The language pairs of a multilingual dataset; None for one of one pair."""
        try:
            return Languages.from_meta(self.meta)
        except LanguageError as error:
            raise DataError(f"{self.directory / 'meta.json'}: {error}") from None

    def pair_names(self, split: str) -> list[str] | None:
        """The language pair ("de-en") of each line of an evaluation split of a multilingual
        dataset; None for a dataset of one pair."""
        languages = self.languages
        if languages is None:
            return None
        path = self.directory / f"{split}.pair.txt"
        pair = self.meta.get("pair")
        if languages.forced and not path.exists() and isinstance(pair, dict):
            # one pair, for a model told every pair's languages (prepare --tokenizer-from)
            try:
                name = pair_name(languages.source(pair["source"]), languages.target(pair["target"]))
            except (KeyError, TypeError, ValueError) as error:
                raise DataError(f"{self.directory / 'meta.json'}: pair: {error}") from None
            return [name] * len(self.text(split)[0])
        names = read_text(path, f"{split} split").split("\n")[:-1]
        known = {pair_name(*pair) for pair in languages.pairs}
        lines = len(self.text(split)[0])
        if len(names) != lines:
            raise DataError(f"{path}: damaged: {len(names)} language pairs for {lines} sentences")
        for number, name in enumerate(names, 1):
            if name not in known:
                raise DataError(
                    f"{path}:{number}: damaged: {name[:40]!r} is not a pair of "
                    f"this dataset ({', '.join(sorted(known))})"
                )
        return names

    def targets(self, split: str) -> list[str] | None:
        """The target language of each line of an evaluation split of a multilingual dataset."""
        names = self.pair_names(split)
        return None if names is None else [parse_pair(name)[1] for name in names]

    def split(self, name: str) -> ParallelSplit:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; choose one of {', '.join(SPLITS)}")
        return ParallelSplit(self.directory, name, self.dtype)

    def text(self, split: str) -> tuple[list[str], list[str]]:
        """Source and reference text of an evaluation split (valid or test)."""
        if split == "train":
            raise ValueError("the training split keeps ids only; evaluate on valid or test")
        return tuple(  # type: ignore[return-value]
            # Bytes, not text mode: only "\n" ends a line (a segment may hold a "\r").
            read_text(self.directory / f"{split}.{side}.txt", f"{split} split").split("\n")[:-1]
            for side in SIDES
        )
