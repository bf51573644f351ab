"""How far a translation can be trusted: what search says about it, and a calibration that turns
that into one figure in [0, 1].

A translation's `Signals` are its log-probability per token, how much the beam's other
hypotheses agree with it, and its length, all known when search ends. `Calibration` is a linear
map of them onto the sentence chrF of the run's own validation translations, fitted at the end
of training (`vaswani calibrate` fits one for an older run) and stored in the run as
`confidence.json`; the figure is then an estimate of the translation's chrF / 100.

Which signals pay was measured by Spearman correlation with sentence chrF on held-out test
splits (docs/glossaries.md, `benchmarks/terminology.py`): reading the translation back through
the model for its least probable token and its entropy, or with dropout, ranked no better than
these and cost 27-50% more time.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from vaswani.decoding.search import Hypothesis

SIGNALS = ("mean_log_prob", "agreement", "length")


@dataclass(frozen=True)
class Signals:
    """What search says about one translation."""

    mean_log_prob: float
    """Log-probability per token, end-of-sentence included (length-normalised)."""
    agreement: float
    """Mean token F1 between the best hypothesis and the beam's others (1: no others)."""
    length: float
    """log(1 + tokens): short and long translations differ in how far their scores can be trusted."""

    def vector(self) -> list[float]:
        return [getattr(self, name) for name in SIGNALS]


def signals_of(hypotheses: list[Hypothesis]) -> Signals:
    """The signals of the best of a sentence's hypotheses (best first, as
    `vaswani.decoding.search.decode` gives them)."""
    best, others = hypotheses[0], hypotheses[1:]
    tokens = len(best.tokens) + best.finished
    return Signals(
        mean_log_prob=best.log_prob / max(tokens, 1),
        agreement=sum(token_f1(best.tokens, o.tokens) for o in others) / len(others)
        if others
        else 1.0,
        length=math.log1p(len(best.tokens)),
    )


def mean_probability(signals: Signals) -> float:
    """The confidence of a run without a calibration: the mean probability per token."""
    value = math.exp(signals.mean_log_prob)
    return value if math.isfinite(value) else 0.0


def token_f1(a: list[int], b: list[int]) -> float:
    """F1 of two token sequences as bags of tokens (1 for two empty ones)."""
    if not a and not b:
        return 1.0
    common = sum((Counter(a) & Counter(b)).values())
    return 2 * common / (len(a) + len(b))


@dataclass(frozen=True)
class Calibration:
    """A linear map of standardised signals onto sentence chrF / 100, clipped to [0, 1]."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    sentences: int
    """How many validation translations it was fitted on."""
    spearman: float
    """Its Spearman correlation with sentence chrF on those translations."""
    signals: tuple[str, ...] = SIGNALS

    def __call__(self, signals: Signals) -> float:
        x = (np.array(signals.vector()) - self.mean) / self.scale
        value = float(np.clip(x @ np.array(self.weights) + self.bias, 0.0, 1.0))
        return value if math.isfinite(value) else 0.0  # NaN signals: no confidence, never NaN

    def record(self) -> dict:
        return asdict(self)

    @classmethod
    def from_record(cls, record: dict) -> Calibration:
        """The calibration a record (`record()`) holds; a ValueError naming the first field that
        is missing, of the wrong shape or not a finite number."""
        if tuple(record.get("signals", ())) != SIGNALS:
            raise ValueError(f"signals {record.get('signals')} are not {list(SIGNALS)}")
        found: dict[str, Any] = {}
        for name in ("mean", "scale", "weights"):
            values = record.get(name)
            if not isinstance(values, list) or len(values) != len(SIGNALS):
                raise ValueError(f"{name!r} should be a list of {len(SIGNALS)} numbers")
            found[name] = tuple(finite(v, name) for v in values)
        if 0.0 in found["scale"]:
            raise ValueError("'scale' holds a 0")
        sentences = record.get("sentences")
        if type(sentences) is not int or sentences < 0:
            raise ValueError("'sentences' should be a count")
        return cls(
            **found,
            bias=finite(record.get("bias"), "bias"),
            sentences=sentences,
            spearman=finite(record.get("spearman"), "spearman"),
        )


def finite(value: Any, name: str) -> float:
    """`value` as a float, or a ValueError naming the field where it is not a finite number."""
    problem = ValueError(f"{name!r} holds {str(value)[:40]}, not a finite number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise problem
    try:
        number = float(value)
    except OverflowError:  # an int of 400 digits
        raise problem from None
    if not math.isfinite(number):
        raise problem
    return number


def fit(signals: list[Signals], chrf: list[float], ridge: float = 1.0) -> Calibration:
    """The least-squares (ridge) map of `signals` onto `chrf` (0-100) / 100."""
    x = np.array([s.vector() for s in signals], dtype=np.float64)
    y = np.array(chrf, dtype=np.float64) / 100
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    bias = float(y.mean())
    weights = np.linalg.solve(z.T @ z + ridge * np.eye(z.shape[1]), z.T @ (y - bias))
    parts = [tuple(float(v) for v in part) for part in (mean, scale, weights)]
    fitted = Calibration(*parts, bias, len(y), 0.0)
    return dataclasses.replace(fitted, spearman=spearman([fitted(s) for s in signals], list(y)))


def ranks(values: list[float]) -> np.ndarray:
    """Ranks from 1, tied values given their mean rank."""
    _, inverse, counts = np.unique(
        np.asarray(values, dtype=np.float64), return_inverse=True, return_counts=True
    )
    last = np.cumsum(counts)  # the last rank of each distinct value
    return (last - (counts - 1) / 2)[inverse]


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (ties ranked by their mean); 0 where either is constant."""
    if len(a) < 2:
        return 0.0
    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])
