"""Back-translation (Sennrich et al. 2016): text in the target language made into training pairs by
a reverse model, which translates it into synthetic sources. `vaswani backtranslate` writes them
as `synthetic source TAB real target` lines for `vaswani prepare --back-translated`.

The monolingual text is read line by line, split into sentences by the rules of its language (the
reverse model's source language) and cleaned as `prepare` cleans a corpus: invalid and empty lines
and sentences repeated (after normalisation) are left out, and so are sentences over the model's
position limit (a cut source would pair half a sentence with all of it). Chunks of CHUNK sentences
are translated by beam search, by sampling, or by beam search with noise put into its output
(Edunov et al. 2018: sampled and noised sources teach more than the beam's most likely ones when
there is much of them). A pair whose synthetic source is empty, not valid text (`UNUSABLE`) or a
copy of its target is dropped; with `lang_id`, so is one with either side identified as the other
language.

Resuming: after each chunk the output is flushed to disk and a progress record beside it
(OUTPUT.progress.json) notes the sentences done and the output's length in bytes. A later call with
the same input and settings cuts the output back to that length (a chunk half written when the
process died) and goes on from the next sentence: nothing is lost or written twice.

Under torchrun each of the WORLD_SIZE processes translates its contiguous share of the sentences
into OUTPUT.part-RANK-of-WORLD (resumable in the same way), and rank 0 joins the parts, in order,
into OUTPUT.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from vaswani.config import DecodeConfig
from vaswani.data.clean import KeySet, normalised, text_key
from vaswani.data.corpora import DataError, numbered_lines, read_lines
from vaswani.decoding.text import Segments, TextModel, translate_segments
from vaswani.errors import VaswaniError
from vaswani.safe_io import not_a_link, open_no_follow, read_json, write_atomic
from vaswani.translation.engine import Engine
from vaswani.translation.segment import split_sentences

METHODS = ("beam", "sample", "noised")
UNUSABLE = ("\x00", "\ufeff", "\ufffd")
"""Characters no synthetic source may hold: a NUL and a BOM, which `prepare` refuses in any text,
and the replacement character, which stands for bytes that were not UTF-8 (a byte-level model
can sample such a sequence of bytes)."""
CHUNK = 512
"""Sentences translated between two saves of the progress record."""


class BackTranslationError(VaswaniError):
    """Back-translation cannot start or go on; the message says why and what to do."""


@dataclass(frozen=True)
class BackTranslation:
    """How synthetic sources are made."""

    method: str = "beam"
    """beam: beam search's best translation; sample: each token drawn from the model's
    distribution (at `temperature`, among its `top_k` most probable tokens); noised: beam search,
    then words deleted (`deletion`) and moved up to `distance` places (Edunov et al. 2018)."""
    beam_size: int = 4
    temperature: float = 1.0
    top_k: int = 0
    deletion: float = 0.1
    distance: int = 3
    seed: int = 0
    batch_tokens: int = 4096
    lang_id: bool = False
    max_line_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise BackTranslationError(f"method {self.method!r}: choose {', '.join(METHODS)}")

    def decoding(self, seed: int) -> DecodeConfig:
        """The search of one chunk (sampling draws with that chunk's `seed`)."""
        if self.method == "sample":
            return DecodeConfig(
                beam_size=1,
                temperature=self.temperature,
                top_k=self.top_k,
                seed=seed,
                batch_tokens=self.batch_tokens,
            )
        return DecodeConfig(beam_size=self.beam_size, batch_tokens=self.batch_tokens)

    def fingerprint(self, inputs: list[Path], run: Path) -> dict:
        """What a resumed call must share with the one that began the output."""
        return {
            "run": str(Path(run).resolve()),
            "inputs": [str(Path(p).resolve()) for p in inputs],
            "settings": {k: v for k, v in dataclasses.asdict(self).items() if k != "batch_tokens"},
        }


@dataclass
class Report:
    """What a call did: sentences done before it and by it, pairs written in all, what was
    dropped (by reason), and whether its share of the text is complete."""

    done_before: int = 0
    done: int = 0
    written: int = 0
    dropped: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    complete: bool = False


def noised(text: str, rng: random.Random, deletion: float, distance: int) -> str:
    """`text` with each word deleted with probability `deletion` (one word always stays) and the
    words shuffled, none moved more than `distance` places (each word's position plus a uniform
    draw in [0, distance + 1) sorted: Lample et al. 2018's permutation)."""
    words = text.split()
    kept = [w for w in words if rng.random() >= deletion] or words[:1]
    keys = [i + rng.uniform(0, distance + 1) for i in range(len(kept))]
    return " ".join(w for _, w in sorted(zip(keys, kept, strict=True)))


def monolingual_sentences(
    paths: list[Path], language: str | None, max_line_bytes: int, dropped: Counter
) -> Iterator[str]:
    """The sentences of text files (gzip allowed) in order, each once: lines split into
    sentences by `language`'s rules, whitespace made single spaces; invalid lines, blank ones and
    sentences seen before (normalised: case, spaces, punctuation) are counted in `dropped`."""
    seen = KeySet()  # 8 bytes a sentence: millions of lines stay small
    for path in paths:
        for _, line in numbered_lines(read_lines(path, max_line_bytes), path):
            if isinstance(line, DataError):
                dropped["invalid text"] += 1
                continue
            if not line.strip():
                dropped["empty line"] += 1
                continue
            pieces = split_sentences(line, language).sentences if language else (line,)
            for piece in pieces:
                sentence = " ".join(piece.split())
                key = text_key(normalised(sentence))
                if key in seen or not key:
                    dropped["repeated sentence" if key else "no words"] += 1
                    continue
                seen.add(key)
                yield sentence


def part_path(output: Path, rank: int, world: int) -> Path:
    return output if world == 1 else output.with_name(f"{output.name}.part-{rank}-of-{world}")


def progress_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.progress.json")


def resume_point(path: Path, fingerprint: dict, force: bool) -> dict:
    """Where the output at `path` stands: its progress record, a fresh one, or an error where the
    output was begun with other settings (or is not vaswani's, or has lost its record)."""
    record_path = progress_path(path)
    not_a_link(path, "output")
    not_a_link(record_path, "progress record")
    fresh = {**fingerprint, "done": 0, "bytes": 0, "written": 0, "dropped": {}, "complete": False}
    if force or (not path.exists() and not record_path.exists()):
        return fresh
    if not record_path.exists():
        raise BackTranslationError(
            f"{path} exists and has no progress record ({record_path.name}) to resume from; "
            "choose another --output, or --force to start it again"
        )
    record = read_record(path)
    differs = [key for key in fingerprint if record.get(key) != fingerprint[key]]
    if differs:
        raise BackTranslationError(
            f"{path} was begun with a different {' and '.join(differs)}; run again as it was begun, "
            "choose another --output, or --force to start it again"
        )
    if not path.exists() or path.stat().st_size < record["bytes"]:
        raise BackTranslationError(
            f"{path} is shorter than its progress record says; --force starts it again"
        )
    return record


def read_record(path: Path) -> dict:
    """The progress record of the output `path`, after checking each field `save_point` writes."""
    record = read_json(progress_path(path), "progress record", dict, limit=1 << 20)

    def count(value: Any) -> bool:
        return type(value) is int and 0 <= value < 2**62

    problem = next(
        (
            f"{key!r} should be {what}"
            for key, what, ok in (
                ("done", "a count", count(record.get("done"))),
                ("bytes", "a count", count(record.get("bytes"))),
                ("written", "a count", count(record.get("written"))),
                ("complete", "true or false", isinstance(record.get("complete"), bool)),
                (
                    "dropped",
                    "an object of counts",
                    isinstance(record.get("dropped"), dict)
                    and all(count(v) for v in record["dropped"].values()),
                ),
            )
            if not ok
        ),
        None,
    )
    if problem is not None:
        raise BackTranslationError(
            f"{progress_path(path)}: damaged progress record: {problem}; --force starts it again"
        )
    return record


def save_point(path: Path, record: dict) -> None:
    write_atomic(progress_path(path), (json.dumps(record, indent=1) + "\n").encode())


@dataclass(frozen=True)
class Job:
    """What a back-translation reads and writes: monolingual `inputs` into `output` (replacing a
    file that is not one of its own only with `force`), this process's `shard` of it (rank,
    world size)."""

    inputs: list[Path]
    output: Path
    force: bool = False
    shard: tuple[int, int] = (0, 1)


def backtranslate(
    loaded: Engine,
    job: Job,
    settings: BackTranslation,
    max_minutes: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> Report:
    """Translate the sentences of the job's inputs with the reverse model `loaded` into its output
    (this process's shard of it), resuming where an earlier call stopped, until done or until
    `max_minutes` would be passed by one more chunk (one chunk is always done, so that every call
    gets on). `progress` gets the sentences each chunk finished."""
    start = time.perf_counter()
    inputs, output, force = job.inputs, job.output, job.force
    rank, world = job.shard
    if loaded.languages is not None:
        raise BackTranslationError(
            f"{loaded.path} is a multilingual model; back-translate with a model of one language pair"
        )
    read = partial(monolingual_sentences, inputs, loaded.source_language, settings.max_line_bytes)
    first, last = 0, None
    if world > 1:  # a share of the sentences, counted first: the same in every process
        total = sum(1 for _ in read(Counter()))
        first, last = rank * total // world, (rank + 1) * total // world
    dropped: Counter = Counter()
    sentences = read(dropped)
    fingerprint = settings.fingerprint(inputs, loaded.path)
    if world > 1 and progress_path(output).exists():  # the parts were joined: all done?
        joined = resume_point(output, fingerprint, force)
        if joined["complete"]:
            return Report(joined["done"], 0, joined["written"], Counter(joined["dropped"]), 0, True)
    path = part_path(output, rank, world)
    record = resume_point(path, fingerprint, force)
    report = Report(done_before=record["done"], dropped=Counter(record["dropped"]))
    mine = islice(sentences, first + record["done"], last)
    translate_chunk = chunk_translator(loaded, settings)
    fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)
    with os.fdopen(fd, "r+b") as out:
        out.truncate(record["bytes"])
        out.seek(record["bytes"])
        save_point(path, record)
        slowest = 0.0
        while chunk := list(islice(mine, CHUNK)):
            # Every call does one chunk at least; after it, none that the budget cannot hold.
            passed = time.perf_counter() - start + slowest
            if report.done and max_minutes is not None and passed > 60 * max_minutes:
                break
            began = time.perf_counter()
            pairs = translate_chunk(chunk, settings.seed + first + record["done"], report.dropped)
            out.write("".join(f"{src}\t{tgt}\n" for src, tgt in pairs).encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
            record.update(
                done=record["done"] + len(chunk),
                bytes=out.tell(),
                written=record["written"] + len(pairs),
                dropped=dict(sorted(report.dropped.items())),
            )
            save_point(path, record)
            report.done += len(chunk)
            if progress is not None:
                progress(len(chunk))
            slowest = max(slowest, time.perf_counter() - began)
        else:
            record["complete"] = True
            save_point(path, record)
    report.dropped.update(dropped)
    report.written, report.complete = record["written"], record["complete"]
    report.seconds = time.perf_counter() - start
    return report


def chunk_translator(
    loaded: Engine, settings: BackTranslation
) -> Callable[[list[str], int, Counter], list[tuple[str, str]]]:
    """A function from a chunk of sentences (and its seed) to its (synthetic source, sentence)
    pairs, counting what it drops."""
    cfg = loaded.model.cfg
    check = None
    if settings.lang_id:
        from vaswani.data.langid import LanguageFilter

        check = LanguageFilter(loaded.target_language, loaded.source_language)

    def translate_chunk(chunk: list[str], seed: int, dropped: Counter) -> list[tuple[str, str]]:
        ids = loaded.src_tokenizer.encode_batch(chunk)
        fit = [s for s, i in zip(chunk, ids, strict=True) if len(i) + 1 <= cfg.max_len]
        if len(fit) < len(chunk):
            dropped["over the model's position limit"] += len(chunk) - len(fit)
        # as trained: no shortlist, no assessing (the search's best is what is kept)
        plain = TextModel(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer)
        found = translate_segments(plain, Segments(fit), settings.decoding(seed))
        rng = random.Random(seed)
        pairs = []
        for sentence, best in zip(fit, found, strict=True):
            synthetic = " ".join(best[0].text.split()) if best else ""
            if settings.method == "noised" and synthetic:
                synthetic = noised(synthetic, rng, settings.deletion, settings.distance)
            if not synthetic:
                dropped["empty translation"] += 1
            elif any(char in synthetic for char in UNUSABLE):
                dropped["translation not valid text"] += 1
            elif normalised(synthetic) == normalised(sentence):
                dropped["translation is a copy"] += 1
            else:
                pairs.append((synthetic, sentence))
        return pairs if check is None else list(check.filter(iter(pairs), dropped))

    return translate_chunk


def join_parts(output: Path, world: int) -> tuple[int, bool]:
    """Join the parts of `output` written by `world` processes, in rank order, into `output`
    (atomically); the parts and their records are removed once every one is complete. Returns
    the pairs joined and whether all parts are complete."""
    parts = [part_path(output, rank, world) for rank in range(world)]
    records = [read_record(p) for p in parts]
    data = b"".join(p.read_bytes()[: r["bytes"]] for p, r in zip(parts, records, strict=True))
    write_atomic(output, data)
    written = sum(r["written"] for r in records)
    complete = all(r["complete"] for r in records)
    if complete:  # the joined output is then as one process would have left it
        dropped = sum((Counter(r["dropped"]) for r in records), Counter())
        fingerprint = {key: records[0][key] for key in ("run", "inputs", "settings")}
        save_point(
            output,
            {
                **fingerprint,
                "done": sum(r["done"] for r in records),
                "bytes": len(data),
                "written": written,
                "dropped": dict(sorted(dropped.items())),
                "complete": True,
            },
        )
        for p in parts:
            p.unlink()
            progress_path(p).unlink()
    return written, complete
