"""The one routing of a translation request (`Pairs.resolve`), which every endpoint uses: the
codes in any spelling a served model knows, "auto" detected among the sources that reach the
target, pivots, and what is refused. Workers are stand-ins: routing never touches them."""

from types import SimpleNamespace

import pytest

from vaswani.serve.pairs import NotServed, Pairs
from vaswani.serve.worker import Pivot

NLLB = {"spa_Latn": "es", "deu_Latn": "de", "eng_Latn": "en", "es-MX": "es"}


def worker(name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, model=None, language=name[:2], settings=None)


DE_EN, EN_ES, EN_DE = worker("de-en"), worker("en-es"), worker("en-de")


def pairs() -> Pairs:
    workers = {("de", "en"): DE_EN, ("en", "es"): EN_ES, ("en", "de"): EN_DE}
    return Pairs(workers, pivot=True, spelling=NLLB.get)


def test_a_pair_is_found_in_any_spelling_a_served_model_knows():
    routed = pairs().resolve("eng_Latn", "spa_Latn", ["Hello"])
    assert (routed.worker, routed.source, routed.target) == (EN_ES, "en", "es")
    assert routed.middle is None and routed.detected is None
    assert pairs().resolve("en", "es-MX", ["Hello"]).target == "es"


def test_a_pair_two_models_chain_goes_through_the_middle_language():
    routed = pairs().resolve("deu_Latn", "es", ["Hallo"])
    assert isinstance(routed.worker, Pivot) and routed.middle == "en"
    assert (routed.worker.first, routed.worker.second) == (DE_EN, EN_ES)


def test_auto_is_detected_among_the_sources_that_reach_the_target_only():
    asked = []

    def detect(text, candidates):
        asked.append((text, candidates))
        return [{"language": candidates[-1], "confidence": 90.0}]

    routed = pairs().resolve("auto", "en", ["Hallo", "Welt" * 5000], detect)
    assert routed.source == "de" and routed.detected == {"language": "de", "confidence": 90.0}
    text, candidates = asked[0]
    assert candidates == ["de"] and len(text) == 10_000  # the first 10,000 characters
    assert pairs().resolve(None, "en", ["Hallo"], detect).source == "de"  # no source: auto


@pytest.mark.parametrize(
    ("source", "target", "said"),
    [
        ("de", "fr", "'fr' is not a target language served here (de:en, en:es, en:de)"),
        ("es", "en", "es:en is not served; see /languages (de:en, en:es, en:de)"),
        ("auto", "en", 'give "source" and "target" of a pair served'),
        ("de", None, "None is not a target language"),
    ],
)
def test_what_is_not_served_is_refused_naming_what_is(source, target, said):
    with pytest.raises(NotServed, match=said.replace("(", r"\(").replace(")", r"\)")):
        pairs().resolve(source, target, ["text"])  # no detector: auto cannot be answered
