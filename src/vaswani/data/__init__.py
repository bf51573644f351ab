"""Data: parallel text readers, built-in corpora, the BPE tokenizer, preparation and batching."""

from vaswani.data.batching import Batch, Position, TokenBatchSampler, collate
from vaswani.data.builtin import german_number, parse_ding_line
from vaswani.data.corpora import DataError
from vaswani.data.dataset import ParallelSplit, PreparedData
from vaswani.data.tokenizer import SubwordTokenizer

__all__ = [
    "Batch",
    "DataError",
    "ParallelSplit",
    "Position",
    "PrepareOptions",
    "PreparedData",
    "SubwordTokenizer",
    "TokenBatchSampler",
    "collate",
    "german_number",
    "parse_ding_line",
    "prepare",
]


def __getattr__(name: str) -> object:
    """`prepare` and `PrepareOptions`, imported when first asked for: preparation asks the tasks
    (`vaswani.tasks`), which read this package's datasets, so this package cannot import it
    before them."""
    if name in ("prepare", "PrepareOptions"):
        from vaswani.data import pipeline as module

        return getattr(module, name)
    raise AttributeError(f"module 'vaswani.data' has no attribute {name!r}")
