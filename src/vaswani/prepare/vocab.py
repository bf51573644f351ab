"""Stage 4 of `prepare`, the tokenizer: BPE learnt from a sample of the training split (shared or
one per side; a classifier's labels as a `LabelSet`), or copied from a run (--tokenizer-from), and a
multilingual dataset's target-language tokens."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from vaswani.data.corpora import DataError, Example
from vaswani.data.dataset import SIDES, SPLITS
from vaswani.data.options import LABELS_FILE, PrepareOptions
from vaswani.data.tokenizer import (
    SPECIAL_TOKENS,
    LabelSet,
    SubwordTokenizer,
    auto_vocab_size,
    iter_text_lines,
    load_tokenizers,
)
from vaswani.languages import Languages
from vaswani.prepare.encode import Prefix
from vaswani.prepare.split import KeptText, training_words
from vaswani.safe_io import UnsafeFileError, member, read_json
from vaswani.tasks import get_task


def dataset_tokenizers(
    work: Path,
    raw: dict[tuple[str, str], Path],
    records: Path,
    text: KeptText,
    opts: PrepareOptions,
) -> tuple[dict[str, Any], dict, Prefix | None]:
    """The dataset's tokenizers (learnt, or --tokenizer-from a run) and their meta.json record,
    and what goes before a pair's source and target ids, if anything (`Prefix`)."""
    if opts.tokenizer_from is None:
        sides = get_task(opts.task).sides
        learnt = sides if opts.shared_vocab else sides[:1]  # (both sides of a shared vocabulary)
        words = None if opts.vocab_size is not None else training_words(records, text.keep, learnt)
        tokenizers, tokenizer_meta = new_tokenizers(
            work, raw, partial(text.pairs, "train"), int(text.keep.sum()), words, opts
        )
    else:
        tokenizers, tokenizer_meta = copy_tokenizers(work, Path(opts.tokenizer_from))
    prefix = None
    file = work / tokenizer_meta["files"]["src"]
    forced = forced_languages(opts.tokenizer_from)
    if forced is not None:
        pairs = text.languages.pairs if text.languages is not None else [one_pair(opts)]
        ids = forced_ids(forced, pairs, tokenizers["src"], opts.tokenizer_from)
        prefix = partial(forced_tokens_of, ids)
    elif text.languages is not None:
        ids = language_token_ids(text.languages, tokenizers["src"], file, opts.tokenizer_from)
        prefix = partial(language_token_of, ids)
    if text.tagged_from is not None:
        tag = opts.back_translation_tag
        (tag_id,) = special_token_ids(
            [tag], tokenizers["src"], file, opts.tokenizer_from, f"back_translation_tag={tag!r}"
        )
        tokenizer_meta["back_translation_tag"] = {"token": tag, "id": tag_id}
        prefix = partial(tag_of, tag_id)
    tokenizer_meta["vocab_size"] = {side: tokenizers[side].vocab_size for side in SIDES}
    return tokenizers, tokenizer_meta, prefix


def forced_languages(run: Path | None) -> Languages | None:
    """The languages of the run a dataset takes its tokenizer from, where that model is told
    both (`Languages.forced`: NLLB-200, M2M-100, mBART-50); None otherwise."""
    if run is None:
        return None
    try:
        found = Languages.from_meta(read_json(Path(run) / "data.json", "run record", dict)["meta"])
    except (KeyError, TypeError, ValueError):
        return None  # copy_tokenizers has said what is wrong with the run
    return found if found is not None and found.forced else None


def one_pair(opts: PrepareOptions) -> tuple[str, str]:
    if not (opts.src_lang and opts.tgt_lang):
        raise DataError(
            f"tokenizer_from='{opts.tokenizer_from}': that model is told the source and target "
            "language of every pair; give src_lang=... and tgt_lang=..."
        )
    return opts.src_lang, opts.tgt_lang


def forced_ids(
    languages: Languages, pairs: list[tuple[str, str]], tokenizer: Any, run: Path
) -> list[list[int]]:
    """The source and target language tokens of each pair, for a model told both."""
    try:
        sources = [languages.source(s) for s, _ in pairs]
        targets = [languages.target(t) for _, t in pairs]
        return languages.prefixes(targets, tokenizer, sources)
    except ValueError as error:
        raise DataError(f"tokenizer_from='{run}': {error}") from None


def language_token_of(ids: list[int], pair: Example) -> tuple[list[int], list[int]]:
    """A multilingual pair's prefixes (`Prefix`): the token of its target language, before the
    source."""
    return [ids[pair.language_pair]], []


def tag_of(tag_id: int, pair: Example) -> tuple[list[int], list[int]]:
    """A back-translated pair's prefixes: the tag, before the source."""
    return [tag_id] if pair.tagged else [], []


def forced_tokens_of(ids: list[list[int]], pair: Example) -> tuple[list[int], list[int]]:
    """The prefixes of a pair for a model that forces its target (`Languages.forced`): its source
    language's token before the source, its target's before the target (`ids` by pair)."""
    source, target = ids[pair.language_pair or 0]
    return [source], [target]


def new_tokenizers(
    work: Path,
    raw: dict[tuple[str, str], Path],
    train_pairs: Callable[[], Iterator[Example]],
    n_train: int,
    words: int | None,
    opts: PrepareOptions,
) -> tuple[dict[str, SubwordTokenizer], dict]:
    """Tokenizers learnt from the `n_train` training pairs, and their meta.json record. `words`:
    the words of the text they learn, to size the vocabulary from (--vocab-size auto); None when
    the size is given."""
    requested = opts.vocab_size
    if words is not None:
        opts = dataclasses.replace(opts, vocab_size=auto_vocab_size(words))
    tokenizers, files = train_tokenizers(work, raw, train_pairs, n_train, opts)
    meta = {
        "shared": files["src"] == files["tgt"],
        "requested_vocab_size": requested if requested is not None else "auto",
        **({"auto_vocab_size": {"words": words}} if words is not None else {}),
        "min_frequency": opts.min_frequency,
        "sample_pairs": min(opts.tokenizer_sample or n_train, n_train),
        "files": files,
    }
    if get_task(opts.task).labelled:
        meta["labels"] = True
    return tokenizers, meta


def train_tokenizers(
    work: Path,
    raw: dict[tuple[str, str], Path],
    train_pairs: Callable[[], Iterator[Example]],
    n_train: int,
    opts: PrepareOptions,
) -> tuple[dict[str, SubwordTokenizer], dict[str, str]]:
    """BPE learned from the training split only: one shared tokenizer (§3.4), or one per side.
    A language model's text is all on the target side; a classifier's labels get a `LabelSet`
    made from every split (a label seen only in the test split is still a class)."""
    sample = min(opts.tokenizer_sample or n_train, n_train)

    def text_of(*sides: str) -> Iterator[str]:  # those sides of `sample` pairs, evenly spread
        columns = [SIDES.index(side) for side in sides]
        for i, pair in enumerate(train_pairs()):
            if (i * sample) % n_train < sample:
                yield from (pair[k] for k in columns)

    task = get_task(opts.task)
    if task.labelled:
        texts = text_of(*task.sides)
        labels = sorted(set(iter_text_lines(*(raw[split, "tgt"] for split in SPLITS))))
        if len(labels) < 2:
            raise DataError(f"a classification dataset needs at least 2 labels, found {labels}")
        tokenizers = {
            "src": SubwordTokenizer.train(texts, opts.vocab_size, opts.min_frequency, sample),
            "tgt": LabelSet(labels),
        }
        files = {"src": "tokenizer.json", "tgt": LABELS_FILE}
    elif opts.shared_vocab or not task.parallel:  # a language model's one side is shared too
        texts = text_of(*task.sides)
        shared = SubwordTokenizer.train(
            texts, opts.vocab_size, opts.min_frequency, len(task.sides) * sample
        )
        tokenizers = {"src": shared, "tgt": shared}
        files = {"src": "tokenizer.json", "tgt": "tokenizer.json"}
    else:
        tokenizers = {
            side: SubwordTokenizer.train(text_of(side), opts.vocab_size, opts.min_frequency, sample)
            for side in SIDES
        }
        files = {side: f"{side}.tokenizer.json" for side in SIDES}
    for side in SIDES:
        tokenizers[side].save(work / files[side])
    return tokenizers, files  # type: ignore[return-value]


def copy_tokenizers(work: Path, run: Path) -> tuple[dict[str, Any], dict]:
    """The tokenizer of run directory `run` (e.g. an imported OPUS-MT model), copied into `work`."""
    record = run / "data.json"  # vaswani.run.DATA_INFO (data cannot import run: run imports data)
    try:
        info = read_json(record, "run record", dict)
        tokenizer_meta = dict(info["meta"]["tokenizer"])
        files = tokenizer_meta["files"]
        for name in set(files.values()):
            # Read only inside the run; write only plain names inside the new dataset.
            source = member(run, name, str(record))
            if not isinstance(name, str) or Path(name).name != name or name.startswith("."):
                raise UnsafeFileError(f"{record} names {name!r}, which is not a plain file name")
            shutil.copyfile(source, work / name)
        src, tgt = load_tokenizers(work, tokenizer_meta)
    except UnsafeFileError as error:
        raise DataError(f"tokenizer_from='{run}': {error}") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise DataError(
            f"tokenizer_from='{run}': not a run directory with a usable tokenizer ({error})"
        ) from None
    kind = tokenizer_meta.get("kind", "bpe")
    # One vocabulary for both sides: Marian's vocab.json (unless a target_vocab.json is added), or
    # one BPE file.
    shared = "tgt_vocab" not in files if kind == "marian" else files["src"] == files["tgt"]
    # The record's own settings (an M2M-100 tokenizer's codes, a model's larger vocabulary) too.
    return {"src": src, "tgt": tgt}, {
        **tokenizer_meta,
        "kind": kind,
        "shared": shared,
        "files": files,
        "from_run": str(run),
    }


def language_token_ids(
    languages: Languages, tokenizer: Any, file: Path, run: Path | None
) -> list[int]:
    """The id of the target-language token of each language pair: the tokens are added to a new
    tokenizer (and its file saved again); a tokenizer taken --tokenizer-from a run must have them."""
    tokens = [languages.token_of(target) for target in languages.targets]
    special_token_ids(
        tokens,
        tokenizer,
        file,
        run,
        f"language_token={languages.token!r}",
        "give the language_token=... form that model uses (OPUS-MT: >>{lang}<<)",
    )
    return [tokenizer.token_id(languages.token_of(target)) for _, target in languages.pairs]


def special_token_ids(
    tokens: list[str], tokenizer: Any, file: Path, run: Path | None, flag: str, hint: str = ""
) -> list[int]:
    """The ids of `tokens` (target-language tokens, the back-translation tag), added to a new
    tokenizer as special tokens (and its `file` saved again); a tokenizer taken --tokenizer-from
    a `run` must have them. `flag` names the setting that chose them in messages."""
    taken = sorted(set(tokens) & set(SPECIAL_TOKENS))
    if taken:
        raise DataError(
            f"{flag}: {', '.join(taken)} would be the tokenizer's own special token; choose "
            "another form"
        )
    if run is None:
        tokenizer.add_special_tokens(tokens)
        tokenizer.save(file)
    missing = [token for token in tokens if tokenizer.token_id(token) is None]
    if missing:
        raise DataError(
            f"tokenizer_from='{run}': its vocabulary has no {', '.join(missing)}; "
            f"{hint or 'prepare without tokenizer_from=..., or with a run that has it'}"
        )
    return [tokenizer.token_id(token) for token in tokens]
