"""What every tokenizer held in a `tokenizers.Tokenizer` (a tokenizer.json) does: vaswani's own
byte-level BPE (`vaswani.data.tokenizer`) and an imported model's (`vaswani.data.hub_tokenizer`).
Text is encoded without the special tokens (the batching and the languages place them), decoded
with them dropped, and text that spells a special token is text."""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer


class TokenizerFile:
    """A `tokenizers.Tokenizer` with the ids of its padding, start, end and unknown tokens
    (`specials`, by their strings)."""

    def __init__(self, tokenizer: Tokenizer, specials: list[str]) -> None:
        self.tokenizer = tokenizer
        # Text that spells a special token ("</s>") is ordinary text, not that token: otherwise a
        # user's "</s>" would end the sentence early. (A run-time setting; tokenizer.json omits it.)
        tokenizer.encode_special_tokens = True
        ids = [tokenizer.token_to_id(token) for token in specials]
        if None in ids:
            raise ValueError(f"the vocabulary lacks one of {' '.join(specials)}")
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = ids

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def token_id(self, token: str) -> int | None:
        """The id of a whole token of the vocabulary, or None."""
        return self.tokenizer.token_to_id(token)

    def encode(self, text: str) -> list[int]:
        """Subword ids of `text`, without BOS/EOS (the batching adds them)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def encode_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """`encode(text)` and where in `text` each token comes from: (start, end) characters."""
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        return encoding.ids, encoding.offsets

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`; special tokens are dropped, and ids outside the vocabulary too."""
        size = self.tokenizer.get_vocab_size()
        return self.tokenizer.decode([i for i in ids if 0 <= i < size], skip_special_tokens=True)

    def vocabulary(self) -> list[str]:
        """Every id's token string, by id (byte-level marks such as 'Ġ' kept; ids the model has
        beyond the tokenizer's a placeholder): unique."""
        return [self.tokenizer.id_to_token(i) or f"<unused{i}>" for i in range(self.vocab_size)]
