"""Preparing a dataset (`vaswani prepare`): the stages that read a corpus, clean and split it,
learn the tokenizer and write the ids (`stages.prepare`). It sits above `vaswani.tasks`, which
says what each task's examples are, and `vaswani.data`, whose readers and datasets it uses."""

from vaswani.data.options import PrepareOptions
from vaswani.prepare.stages import prepare

__all__ = ["PrepareOptions", "prepare"]
