"""What `vaswani prepare` can be asked, in the order of its stages: the task and corpus, reading,
cleaning, splitting, the tokenizer, encoding (`PrepareOptions`: one flat dataclass, so that its
fields are the flags and the keys of a config file)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vaswani.config import one_of
from vaswani.config.settings_files import load_settings
from vaswani.data.builtin import DING_PATH
from vaswani.data.clean import DEDUPE
from vaswani.data.corpora import DEFAULT_MAX_LINE_BYTES
from vaswani.data.readers import FORMATS
from vaswani.data.readers.xml import MARKUP
from vaswani.errors import ConfigError
from vaswani.languages import LANGUAGE_TOKEN

MAX_NUMBER = 10**9
"""The largest numbers-de number: words for it are still a sentence."""


@dataclass
class PrepareOptions:
    """The options of `vaswani prepare`, grouped by the stage that reads them (each field is a
    flag of the command and a key of its config file)."""

    def __post_init__(self) -> None:
        if not 0 <= self.numbers_max <= MAX_NUMBER:
            raise ConfigError(f"numbers_max must be in 0 .. {MAX_NUMBER:,}")
        if not 1 <= self.numbers_size <= self.numbers_max + 1:
            raise ConfigError(
                f"numbers_size must be in 1 .. {self.numbers_max + 1:,} (there "
                f"are that many numbers up to numbers_max {self.numbers_max:,})"
            )
        if self.builtin_size < 1:
            raise ConfigError("builtin_size must be at least 1")

    @classmethod
    def from_file(cls, path: Path, **overrides: Any) -> PrepareOptions:
        """The options in YAML file `path` (the file `vaswani prepare --config` reads; its
        `inputs` and `out`, arguments of `prepare`, are left to the caller), then `overrides`."""
        return load_settings(cls, Path(path), ignore=("inputs", "out"), overrides=overrides)

    # --- The task and the corpus (`read.py`)
    task: str = "translate"
    """translate (encoder-decoder), lm (decoder-only language model), classify (encoder with a
    classification head)."""
    numbers_size: int = 30000
    """numbers-de: pairs."""
    numbers_max: int = 999_999
    """numbers-de: largest number."""
    builtin_size: int = 20000
    """grammar-en, sentiment-en: examples."""
    seed: int = 0
    """numbers-de, grammar-en, sentiment-en: random seed."""
    ding_path: Path = DING_PATH
    """ding-de-en: the dictionary file (Debian's trans-de-en package)."""
    pairs: tuple[str, ...] = ()
    """Several language pairs in one multilingual dataset, each SRC-TGT=FILE (a TSV, TMX, XLIFF,
    PO, MO or JSONL file, or two aligned files joined by a comma: de-en=corpus.de,corpus.en; a
    region after _: pt_BR-en). Each source gets a token that asks for its target language."""
    language_token: str = LANGUAGE_TOKEN
    """multilingual: the token put before every source to ask for its target language, {lang}
    standing for the target's code (<2fr>, as Johnson et al. 2017; OPUS-MT writes >>{lang}<<)."""

    # --- Reading files (`read.py`, `formats/`)
    format: str | None = one_of(None, FORMATS)
    """tsv, moses, tmx, xliff, po, mo or jsonl; none given: from each file's extension."""
    src_lang: str | None = None
    """The source language: tmx's to read (es matches es-ES, ES, es_MX; none given: the
    header's), --lang-id's, and recorded so that translating splits sentences by its rules."""
    tgt_lang: str | None = None
    """The target language (tmx, --lang-id)."""
    markup: str = one_of("strip", MARKUP)
    """tmx, xliff: inline codes (<bpt>, <ph>, ...) left out (strip) or kept as their text (keep)."""
    fields: str = "src,tgt"
    """jsonl: the keys of the source and the target."""
    skip_invalid: bool = False
    """Drop (and count) pairs with invalid UTF-8, NUL bytes, BOMs or bad TSV rows instead of
    stopping at the first."""
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    """Refuse any input line longer than this."""

    # --- Cleaning (`clean.py`, `split.py`)
    dedupe: str = one_of("normalised", DEDUPE)
    """Drop repeated pairs: normalised (case, spaces and punctuation ignored), exact, or none."""
    drop_copies: bool = True
    """Drop pairs whose target is a copy of the source (normalised)."""
    max_length_ratio: float = 3.0
    """Drop training pairs with one side over this many times longer than the other, in tokens
    (pairs under 10 tokens a side are kept); 0 keeps all."""
    lang_id: bool = False
    """Drop pairs with a side of 4+ words identified (lingua) as the other language of the pair:
    needs --src-lang and --tgt-lang; about 5,000 pairs of sentences a second on 2 cores."""
    drop_held_out: bool = True
    """Drop training pairs whose source or target (normalised) is in the valid or test split."""
    exclude: tuple[Path, ...] = ()
    """Files of sentences (an external test set; both columns of a TSV line) that no training pair
    may contain, as source or target."""

    # --- Splitting and weighting (`split.py`)
    valid_fraction: float | None = None
    """Share of pairs for validation (none given: the corpus's default)."""
    test_fraction: float | None = None
    """Share of pairs for test (none given: the corpus's default)."""
    weights: tuple[tuple[str, float], ...] = ()
    """(corpus, weight) pairs: each training pair of that corpus (a file given, or every file
    under a directory given) is used `weight` times: 2 doubles a small in-domain corpus, 0.5
    keeps half of a large one (which half: by a hash of each pair). Valid and test are not
    weighted."""
    back_translated: tuple[Path, ...] = ()
    """Synthetic pairs (`vaswani backtranslate`'s TSV, or any corpus file of synthetic sources):
    training pairs only, never valid or test, each source led by `back_translation_tag`
    (Caswell et al. 2019), their share set by --weight FILE=W. Decontaminated against the real
    held-out text like every training pair."""
    back_translation_tag: str = "<BT>"
    """The token put before every back-translated source: one special token of the vocabulary,
    never in a target, never in text given to translate."""
    temperature: float = 5.0
    """multilingual: training pairs are sampled in proportion to (pairs of the language
    pair)^(1/T) (Arivazhagan et al. 2019): 1 keeps the corpus as it is; 5 gives a pair 100 times
    smaller 40% of the larger one's share instead of 1%. Done by repeating the smaller pairs'
    examples (at most 100 times); valid and test are not repeated."""

    # --- The tokenizer (`vocab.py`)
    vocab_size: int | None = None
    """BPE vocabulary size; None (auto): from the training split's word count (`auto_vocab_size`),
    e.g. 3,000 for 20k short sentence pairs, 8,000 for a million words a side."""
    shared_vocab: bool = True
    """One tokenizer for both languages (paper §3.4)."""
    min_frequency: int = 2
    tokenizer_sample: int = 1_000_000
    """Learn the BPE from at most this many training pairs, evenly spread; 0: all of them. A
    million pairs hold every frequent merge (on 1M pairs of ding-de-en phrases a 200k sample gave
    the same tokens per pair as all of them) and take about a minute on 2 cores."""
    tokenizer_from: Path | None = None
    """A run directory whose tokenizer to use instead of learning one (to fine-tune that run
    with train --init)."""

    # --- Encoding (`encode.py`)
    max_example_len: int = 256
    """Drop pairs longer than this many tokens (with BOS/EOS) on either side; a language model's
    longer texts are cut into pieces instead."""
    word_alignments: bool = False
    """Align the words of every training pair with eflomal (pip install 'vaswani[align]') into
    train.align, for `vaswani train --guided-alignment` (`wordalign.py`)."""
    progress: bool = True


MAX_WEIGHT = 100.0


LABELS_FILE = "labels.json"


ENCODE_CHUNK = 10_000
