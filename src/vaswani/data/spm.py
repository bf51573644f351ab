"""SentencePiece tokenization with a separate piece -> id vocabulary, as Marian / OPUS-MT models use.

A Marian model's ids are not the SentencePiece model's: text is cut into pieces by `source.spm` (or
`target.spm`), and each piece is looked up in `vocab.json`, shared by both sides (or in
`target_vocab.json` for the target side when the model has separate vocabularies). A piece missing
from the vocabulary becomes `<unk>`. A leading language code such as `>>fra<<` (multilingual models)
is kept as one token. Decoding drops the special ids, joins the pieces and turns the word-boundary
mark back into spaces.

The object has the interface of `SubwordTokenizer` (encode, encode_batch, decode, tokens,
vocab_size, pad_id / bos_id / eos_id / unk_id), so translation, evaluation, serving and plotting
use it unchanged. bos_id is the pad id: Marian starts decoding from padding.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from vaswani.safe_io import DamagedFileError, read_json

WORD_BOUNDARY = "\u2581"  # "▁", SentencePiece's mark for a space before a piece
PAD, EOS, UNK = "<pad>", "</s>", "<unk>"


def read_vocab(path: Path) -> dict[str, int]:
    """A Marian vocabulary file: a JSON object from piece to id (ids distinct, from 0)."""
    try:
        vocab = read_json(path, "vocabulary")
    except DamagedFileError as error:
        raise ValueError(f"{path}: cannot read the vocabulary ({error})") from None
    if not isinstance(vocab, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in vocab.items()
    ):
        raise ValueError(f"{path}: a vocabulary must be a JSON object from piece to id >= 0")
    if len(set(vocab.values())) != len(vocab):
        raise ValueError(f"{path}: two pieces share an id")
    for token in (PAD, EOS, UNK):
        if token not in vocab:
            raise ValueError(f"{path}: the vocabulary has no {token}")
    return vocab


class SentencePieceTokenizer:
    """Text <-> ids of one side of a Marian model: a SentencePiece model plus a vocabulary."""

    def __init__(self, model_file: Path, vocab: dict[str, int]) -> None:
        import sentencepiece

        self.processor = sentencepiece.SentencePieceProcessor()
        try:
            self.processor.Load(str(model_file))
        except (OSError, RuntimeError) as error:
            raise ValueError(f"{model_file}: not a SentencePiece model ({error})") from None
        self.vocab = vocab
        self.pieces = {i: piece for piece, i in vocab.items()}
        self.pad_id, self.eos_id, self.unk_id = vocab[PAD], vocab[EOS], vocab[UNK]
        self.bos_id = self.pad_id
        self.special_ids = {self.pad_id, self.eos_id, self.unk_id}
        self._size = max(vocab.values()) + 1

    @property
    def vocab_size(self) -> int:
        return self._size

    def encode(self, text: str) -> list[int]:
        """Ids of `text` without the end-of-sentence id (the batching adds it)."""
        code: list[str] = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[: end + 2]], text[end + 2 :]
        pieces = code + self.processor.encode(text, out_type=str)
        return [self.vocab.get(piece, self.unk_id) for piece in pieces]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def token_id(self, token: str) -> int | None:
        """The id of a whole piece of the vocabulary (e.g. ">>fra<<"), or None."""
        return self.vocab.get(token)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; special ids and ids outside the vocabulary are dropped."""
        pieces = [self.pieces[i] for i in ids if i in self.pieces and i not in self.special_ids]
        return self.processor.decode_pieces(pieces).replace(WORD_BOUNDARY, " ").strip()

    def vocabulary(self) -> list[str]:
        """Every id's piece (ids the vocabulary skips get a placeholder): unique."""
        return [self.pieces.get(i, f"<unused{i}>") for i in range(self._size)]

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """Each id's piece with the word-boundary mark shown as a space (for attention plots)."""
        return [self.pieces.get(i, UNK).replace(WORD_BOUNDARY, " ") for i in ids]
