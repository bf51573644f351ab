"""The language pairs a server translates: each pair's worker, the pairs two models chain
through a middle language, the other spellings of the codes of models that know many languages
(NLLB-200's "spa_Latn" is es), and the languages' names, for /languages and /translate."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vaswani.languages import Languages, lingua_language
from vaswani.serve.refusals import Refused
from vaswani.serve.worker import Pivot, Route


class NotServed(Refused):
    """A request for a pair (or a target) no model here translates, even through a pivot."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid", message)


@dataclass
class Routed:
    """Where a translation request goes: the worker (a model's, one pair of a multilingual
    model's, or a `Pivot` chain), the pair as the server spells it, the middle language of a
    pivot, and the detection that chose the source where it was "auto"."""

    worker: Route
    source: str | None  # None: the one model's own (a server of one model, no pair named)
    target: str | None
    middle: str | None = None
    detected: dict | None = None


@dataclass
class Pairs:
    """The translation models served, by (source, target) language code (a multilingual model
    serves several, as `Targeted` views of one worker), and with `pivot` the pairs that two of
    them chain through a middle language (de->en then en->fr for de->fr)."""

    workers: dict[tuple[str, str], Any]
    pivot: bool = True
    spelling: Callable[[str], str | None] | None = None
    """A served language's code from another spelling of it ("spa_Latn", "es-MX" -> "es"):
    `vaswani.languages.Languages.known` for the models that know many."""

    def spelt(self, code: Any) -> Any:
        """`code` as the pairs spell it, where `spelling` knows it."""
        if not isinstance(code, str) or self.spelling is None or code == "auto":
            return code
        return self.spelling(code) or code

    def listed(self, limit: int = 12) -> str:
        """The pairs served, for a message: the first `limit` and how many more."""
        names = [f"{s}:{t}" for s, t in self.workers]
        more = f" and {len(names) - limit:,} more" if len(names) > limit else ""
        return (", ".join(names[:limit]) or "none") + more

    def route(self, source: Any, target: Any) -> tuple[Any, str | None]:
        """The worker that translates source -> target and the middle language it goes
        through: a model's own pair (middle None) before a chain of two (`Pivot`, the middle
        language first in alphabetical order); (None, None) when there is neither."""
        direct = self.workers.get((source, target))
        if direct is not None or not self.pivot:
            return direct, None
        for (first_source, middle), first in sorted(self.workers.items()):
            second = self.workers.get((middle, target))
            if first_source == source and second is not None:
                return Pivot(first, second, middle), middle
        return None, None

    def resolve(
        self, source: Any, target: Any, texts: list[str], detect: Callable | None = None
    ) -> Routed:
        """The one routing of every translation request (both APIs' /translate, streaming,
        /translate_file, /attention, the web page): the codes read in any spelling a served
        model knows, a source "auto" (or none) detected by `detect(text, candidates)` among the
        sources that reach `target` (on the texts' first 10,000 characters), then `route`.
        NotServed names what is served."""
        target, source = self.spelt(target), self.spelt(source or "auto")
        candidates = self.sources_for(target) if isinstance(target, str) else []
        if not candidates:
            raise NotServed(f"{target!r} is not a target language served here ({self.listed()})")
        detected = None
        if source == "auto":
            if detect is None:
                raise NotServed(f'give "source" and "target" of a pair served: {self.listed()}')
            detected = detect(" ".join(texts)[:10_000], candidates)[0]
            source = detected["language"]
        worker, middle = self.route(source, target)
        if worker is None:
            raise NotServed(f"{source}:{target} is not served; see /languages ({self.listed()})")
        return Routed(worker, source, target, middle, detected)

    def reachable(self) -> list[tuple[str, str]]:
        """Every (source, target) translated here: the models' pairs, and with `pivot` the
        chained ones."""
        return [(s, t) for s, targets in self.targets.items() for t in targets]

    @functools.cached_property
    def targets(self) -> dict[str, list[str]]:
        """Each source language's targets, sorted (`reachable`), worked out once: the workers
        are fixed when the server is made, and NLLB-200's 40,602 pairs took 15 ms to go
        through on every LibreTranslate request. A source that reaches every language directly
        (NLLB-200: 199 others) needs no chains looked for."""
        direct: dict[str, set[str]] = {}
        for s, t in self.workers:
            direct.setdefault(s, set()).add(t)
        every = {language for pair in self.workers for language in pair}
        found = {}
        for source, targets in direct.items():
            reached = set(targets)
            if self.pivot and len(reached) < len(every) - 1:
                for middle in targets:
                    reached |= direct.get(middle, set())
                reached.discard(source)
            found[source] = sorted(reached)
        return dict(sorted(found.items()))

    def languages(self) -> list[dict]:
        return [
            {"code": source, "name": language_name(source), "targets": targets}
            for source, targets in self.targets.items()
        ]

    @functools.cached_property
    def sources(self) -> dict[str, list[str]]:
        """Each target language's sources, sorted (`targets` turned round)."""
        found: dict[str, list[str]] = {}
        for source, targets in self.targets.items():  # sources in order, so each list is sorted
            for target in targets:
                found.setdefault(target, []).append(source)
        return found

    def sources_for(self, target: str) -> list[str]:
        return self.sources.get(target, [])


def spelling(languages: list[Languages | None]) -> Callable[[str], str | None] | None:
    """What reads the other spellings of the languages of the models that know many (NLLB-200's
    "spa_Latn" and "spa" are es), for `Pairs`; None where no model does."""
    known = list(
        {id(lang): lang for lang in languages if lang is not None and lang.forced}.values()
    )
    if not known:
        return None
    return lambda code: next((found for lang in known if (found := lang.known(code))), None)


def language_name(code: str) -> str:
    """A language's English name by CLDR (babel): "de" German, "zh_hant" Chinese (Traditional),
    "pt_br" Portuguese (Brazil); lingua's, or the code itself, for a code CLDR lacks."""
    from babel import Locale

    english = Locale("en")
    base, _, rest = code.partition("_")
    name = english.languages.get(base)
    if name is not None:
        detail = english.scripts.get(rest.title()) or english.territories.get(rest.upper())
        return f"{name} ({detail})" if detail else name
    try:
        return lingua_language(code).name.title()
    except (ImportError, ValueError):
        return code
