"""Data: parallel text readers, built-in corpora, the BPE tokenizer, preparation and batching."""

from vaswani.data.batching import Batch, Position, TokenBatchSampler, collate
from vaswani.data.corpora import DataError, german_number, parse_ding_line
from vaswani.data.dataset import ParallelSplit, PreparedData
from vaswani.data.prepare import PrepareOptions, prepare
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
