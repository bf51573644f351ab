"""Translations that go round in a loop (`Zadokkkkkkk`, `the son of the son of the son of`, `I
will I will I will`): small or young models fall into them, and beam search, which ranks by
probability, keeps them. They are found in the text of a translation, and such a sentence is
decoded again with repeats barred (`loop_guard` "retry", the default): the token that would
begin the third copy of a phrase of 2 to 8 tokens, or the fourth of one token, is ruled out at
every step. A translation that does not loop is never touched, so the guard costs nothing where
no loop happens (measured in docs/translating.md); "always" bars repeats in every sentence, "off"
never.
"""

from __future__ import annotations

import re

from torch import Tensor

from vaswani.decoding.output import OutputLayer

WORD_COPIES = 4
"""A word written this many times in a row is a loop (`will will will will`)."""
PHRASE_COPIES = 3
"""A phrase of 2 to 6 words written this many times in a row is a loop."""
_LETTERS = re.compile(r"([^\W\d_])\1{5}")
"""A letter six times in a row (`kkkkkk`); digits (`1000000`) and punctuation are no loop."""


def loops(text: str) -> bool:
    """Whether `text` holds a loop: a letter six times in a row, a word four times, or a
    phrase of 2 to 6 words three times (words with letters: `0 0 0 0` is no loop)."""
    if _LETTERS.search(text):
        return True
    words = text.split()
    for n in range(1, 7):
        needed = n * ((WORD_COPIES if n == 1 else PHRASE_COPIES) - 1)
        run = 0  # words in a row equal to the word n before them
        for i in range(n, len(words)):
            same = words[i] == words[i - n] and any(c.isalpha() for c in words[i])
            run = run + 1 if same else 0
            if run >= needed:
                return True
    return False


def bar_repeats(logits: Tensor, tokens: Tensor, output: OutputLayer) -> None:
    """Rule out, in each row of `logits` (N, columns), the token that would begin the third
    copy of its last 2 to 8 tokens (or the fourth of its last token). `tokens` (N, t): each
    row's tokens so far, the start token first."""
    generated = tokens[:, 1:]
    length = generated.size(1)
    for n in range(1, 9):
        copies = 4 if n == 1 else 3
        if length < (copies - 1) * n:
            break
        window = (copies - 2) * n  # the copies after the first, compared with those before
        recent = generated[:, length - window :]
        periodic = (recent == generated[:, length - window - n : length - n]).all(dim=1)
        rows = periodic.nonzero().flatten().tolist()
        for row, token in zip(rows, generated[rows, length - n].tolist(), strict=True):
            column = output.column(token)
            if column is not None:
                logits[row, column] = float("-inf")
