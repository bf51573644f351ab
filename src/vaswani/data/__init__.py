"""Data: parallel text readers, built-in corpora, the BPE tokenizer, prepared datasets and
batching. It imports nothing above it; preparing a dataset, which asks the tasks, is
`vaswani.prepare`."""

from vaswani.data.batching import Batch, Position, TokenBatchSampler, collate
from vaswani.data.builtin import german_number, parse_ding_line
from vaswani.data.corpora import DataError
from vaswani.data.dataset import ParallelSplit, PreparedData
from vaswani.data.options import PrepareOptions
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
]
