"""Subword tokenization: byte-level BPE trained with the Hugging Face `tokenizers` library.

Policy for any input text: the tokenizer works on UTF-8 bytes (all 256 are in the base vocabulary),
so every string encodes without an unknown token and every id sequence decodes. Text is normalised to
Unicode NFC first. Digits are split into single characters before BPE, so that numbers are spelled
digit by digit and an unseen number is made of seen pieces.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, trainers
from tokenizers.models import BPE

from vaswani.data.tokenizer_file import TokenizerFile
from vaswani.safe_io import member, read_json

# Their ids are 0..3, matching ModelConfig's pad_id, bos_id, eos_id defaults.
PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]
HUB_KINDS = ("hub", "m2m", "mbart")  # imported models' own tokenizers


# Vocabulary sizes found best for a corpus size, in training words: ~100k -> 2,000 (Sennrich &
# Zhang 2019, IWSLT subsets), ~5M -> 5,000 to 8,000 (FLoRes baselines), ~200M -> 32,000-37,000
# (WMT, the paper's 37,000). A power law through the two ends: 24 * words^0.384.
VOCAB_FACTOR, VOCAB_EXPONENT = 24.0, 0.384
VOCAB_RANGE = (1000, 32000)


def auto_vocab_size(words: int) -> int:
    """The BPE vocabulary for a training split of `words` whitespace-separated words (both sides
    of a shared vocabulary), rounded to 500, within VOCAB_RANGE."""
    size = VOCAB_FACTOR * max(words, 1) ** VOCAB_EXPONENT
    return int(min(max(round(size / 500) * 500, VOCAB_RANGE[0]), VOCAB_RANGE[1]))


class SubwordTokenizer(TokenizerFile):
    """Text <-> token ids, with the special ids a `ModelConfig` needs (0..3)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        ids = [tokenizer.token_to_id(token) for token in SPECIAL_TOKENS]
        if ids != [0, 1, 2, 3]:
            raise ValueError(f"tokenizer must hold {SPECIAL_TOKENS} as ids 0..3, got {ids}")
        super().__init__(tokenizer, SPECIAL_TOKENS)

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        min_frequency: int = 2,
        length: int | None = None,
    ) -> SubwordTokenizer:
        """Learn BPE merges from `texts` until the vocabulary reaches `vocab_size` entries."""
        base = len(SPECIAL_TOKENS) + 256
        if vocab_size < base:
            raise ValueError(f"vocab_size must be at least {base} (specials + 256 bytes)")
        tokenizer = Tokenizer(BPE(unk_token=UNK))
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=SPECIAL_TOKENS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tokenizer.train_from_iterator(texts, trainer, length=length)
        return cls(tokenizer)

    @classmethod
    def load(cls, path: Path) -> SubwordTokenizer:
        try:
            return cls(Tokenizer.from_file(str(path)))
        except Exception as error:  # tokenizers raises bare Exceptions for bad files
            raise ValueError(f"{path}: not a vaswani tokenizer file ({error})") from None

    def save(self, path: Path) -> None:
        # Re-serialised with sorted keys and fixed indentation so equal tokenizers give equal bytes.
        data = json.loads(self.tokenizer.to_str())
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n")

    def add_special_tokens(self, tokens: list[str]) -> None:
        """Append `tokens` (e.g. target-language tokens) to the vocabulary as special tokens: BPE
        never makes them from text, text that spells one stays text, decoding drops them."""
        self.tokenizer.add_special_tokens(tokens)

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """Each id as readable text (for attention plots): bytes decoded, not 'Ġ'-marked."""
        return [self.tokenizer.decode([i], skip_special_tokens=False) for i in ids]


class LabelSet:
    """The classes of a classification dataset, as the target side's "tokenizer": a label is one
    token whose id is its index in the sorted list of labels (labels.json)."""

    def __init__(self, labels: list[str]) -> None:
        if len(labels) < 2 or len(set(labels)) != len(labels):
            raise ValueError(f"a label set needs at least 2 distinct labels, got {labels}")
        self.labels = list(labels)
        self.index = {label: i for i, label in enumerate(self.labels)}

    @property
    def vocab_size(self) -> int:
        return len(self.labels)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        unknown = sorted(set(texts) - set(self.index))
        if unknown:
            raise ValueError(f"unknown label(s) {', '.join(map(repr, unknown[:5]))}")
        return [[self.index[text]] for text in texts]

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.labels[i] for i in ids)

    def tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.labels[i] for i in ids]

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps({"labels": self.labels}, ensure_ascii=False, indent=1))

    @classmethod
    def load(cls, path: Path) -> LabelSet:
        try:
            return cls(read_json(path, "label set", dict, {"labels": list})["labels"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: not a vaswani label file ({error})") from None


def load_tokenizers(directory: Path, meta: dict) -> tuple[Any, Any]:
    """The source and target tokenizers a `tokenizer` record of meta.json / data.json names; one
    object when shared. kind "bpe" (vaswani's own, the default), "marian" (SentencePiece), "hub"
    (a Hugging Face tokenizer.json), "m2m" (M2M-100's SentencePiece and vocabulary) or "mbart"
    (mBART-50's SentencePiece alone); with
    "labels" set (classification), the target side is a `LabelSet`."""
    directory, files = Path(directory), meta["files"]

    def file(role: str) -> Path:  # every name must be a regular file inside `directory`
        return member(directory, files[role], f"the tokenizer record of {directory}")

    kind = meta.get("kind", "bpe")
    if kind == "marian":
        from vaswani.data.spm import SentencePieceTokenizer, read_vocab

        vocab = read_vocab(file("vocab"))
        tgt_vocab = read_vocab(file("tgt_vocab")) if "tgt_vocab" in files else vocab
        return (
            SentencePieceTokenizer(file("src"), vocab),
            SentencePieceTokenizer(file("tgt"), tgt_vocab),
        )
    if kind in HUB_KINDS:  # one tokenizer for both sides: `vaswani.data.hub_tokenizer`
        from vaswani.data import hub_tokenizer as hub

        ids = meta.get("ids")  # the model's vocabulary, where it is larger than the tokenizer's
        if kind == "hub":
            shared = hub.JsonTokenizer(file("src"), ids)
            return shared, shared
        codes = meta.get("codes")
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ValueError(f"a {kind} tokenizer record needs its language codes")
        if kind == "m2m":
            vocab, languages = hub.m2m_vocabulary(file("vocab"), codes), [f"__{c}__" for c in codes]
        else:
            vocab, languages = hub.mbart_vocabulary(file("src"), codes), codes
        shared = hub.FairseqTokenizer(file("src"), vocab, languages, ids)
        return shared, shared
    if kind != "bpe":
        raise ValueError(
            f"unknown tokenizer kind {kind!r} (this vaswani reads bpe, marian, "
            f"{', '.join(HUB_KINDS)})"
        )
    src = SubwordTokenizer.load(file("src"))
    if meta.get("labels"):
        return src, LabelSet.load(file("tgt"))
    tgt = src if files["tgt"] == files["src"] else SubwordTokenizer.load(file("tgt"))
    return src, tgt


def vocab_mismatch(src: Any, tgt: Any, vocab_size: int, target_vocab_size: int) -> str | None:
    """Why tokenizers `src` and `tgt` cannot serve a model with these vocabulary sizes, or None."""
    if (src.vocab_size, tgt.vocab_size) == (vocab_size, target_vocab_size):
        return None
    return (
        f"the tokenizers' vocabularies ({src.vocab_size}, {tgt.vocab_size}) do not match the "
        f"model's ({vocab_size}, {target_vocab_size})"
    )


def iter_text_lines(*paths: Path) -> Iterator[str]:
    """Lines of UTF-8 text files written by `vaswani prepare` (one segment per line)."""
    for path in paths:
        with open(path, encoding="utf-8", newline="\n") as handle:
            for line in handle:
                yield line.rstrip("\n")
