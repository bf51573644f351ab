"""Translation quality the way the field reports it: sacreBLEU and chrF of detokenised output."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str


def score(hypotheses: list[str], references: list[str], tokenize: str = "13a") -> Scores:
    """Corpus-level sacreBLEU (13a tokenisation unless told, exp smoothing) and chrF against one
    reference. tokenize="char" scores character n-grams: for one-word targets (numbers-de), where
    word 4-grams do not exist and word BLEU is 0 whatever the output."""
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu = sacrebleu.metrics.BLEU(tokenize=tokenize)
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()))


def sentence_chrf(hypotheses: list[str], references: list[str]) -> list[float]:
    """Each hypothesis' chrF (0-100) against its one reference."""
    import sacrebleu

    chrf = sacrebleu.metrics.CHRF()
    return [chrf.sentence_score(h, [r]).score for h, r in zip(hypotheses, references, strict=True)]


def perplexity_of(loss: float) -> float:
    """exp(mean cross-entropy in nats), capped at exp(50): beyond, it only says "learned nothing"."""
    return math.exp(min(loss, 50.0))
