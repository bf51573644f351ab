"""What one translation call asks for, decided by its caller once: a frozen `Request` (the
target language, the search, what to do with long input, sentence splitting, alignment) and its
`Aids` (a glossary, a translation memory, a minimum confidence). The CLI builds one from its flags,
the server from a request body, Python users by hand; the pipeline reads nothing else."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vaswani.config import DecodeConfig
from vaswani.decoding.text import Translation
from vaswani.documents.spans import Protection
from vaswani.translation.align import AlignSettings
from vaswani.translation.glossary import Glossary
from vaswani.translation.memory import Memory


@dataclass(frozen=True)
class Aids:
    """What a translation may use beyond the model: a glossary whose terms the output must
    carry, a translation memory whose exact matches are taken as they are (and, with
    `fuzzy_threshold`, whose best fuzzy match is reported)."""

    glossary: Glossary | None = None
    memory: Memory | None = None
    fuzzy_threshold: float | None = None
    min_confidence: float | None = None
    """Documents: leave a text whose confidence is under it untranslated."""
    report: Callable[[list[list[Translation]]], None] | None = None
    """Told each batch's translations (e.g. to say which terms could not be placed)."""


@dataclass(frozen=True)
class Request:
    """How to translate texts: one object for every option, so that no function takes them as a
    list of loose parameters."""

    target: str | list[str] | None = None
    """A multilingual model's target language: one for all texts, or one per text."""
    decoding: DecodeConfig = field(default_factory=DecodeConfig)
    """The search: beam, length penalty, n-best, batch size, loop guard."""
    too_long: str = "error"
    """A text over the model's position limit: "error", or "truncate" (with a warning)."""
    split: bool = True
    """Translate each text sentence by sentence (joined back in its own spacing)."""
    language: str | list[str | None] | None = None
    """Whose rules split sentences: one language, or one per text; by default the model's
    source language."""
    align: bool = False
    """Also give each text's word alignment with its translation."""
    alignment: AlignSettings | None = None
    """Where word alignments are read from (by default the model's own choice)."""
    protect: Protection | list[Protection] = field(default_factory=Protection)
    """The code taken out of each text before translation and put back after (placeholders,
    markup, URLs, accelerators: `vaswani.documents.protect`): one for all texts, or one each."""
    aids: Aids = field(default_factory=Aids)
