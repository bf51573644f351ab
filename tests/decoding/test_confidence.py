"""Confidence: signals from search, Spearman's correlation, the calibration fitted on a run's
validation split and stored in it, and what translate, evaluate and PO files do with it."""

import json
import shutil

import numpy as np
import polib
import pytest

from helpers import cli, translate_cli
from vaswani.decoding.confidence import (
    Calibration,
    Signals,
    fit,
    ranks,
    signals_of,
    spearman,
    token_f1,
)
from vaswani.decoding.search import Hypothesis
from vaswani.run import RunError
from vaswani.translation.engine import load_run


def test_ranks_give_ties_their_mean_and_spearman_follows_the_order():
    assert ranks([10, 30, 20, 30]).tolist() == [1.0, 3.5, 2.0, 3.5]
    assert spearman([1, 2, 3, 4], [10, 20, 30, 1000]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0 and spearman([1], [2]) == 0.0
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=50), rng.normal(size=50)
    expected = np.corrcoef(np.argsort(np.argsort(a)), np.argsort(np.argsort(b)))[0, 1]
    assert spearman(list(a), list(b)) == pytest.approx(expected)


def test_signals_come_from_the_beam_s_hypotheses():
    best = Hypothesis([5, 6, 7], log_prob=-2.0, score=-1.0, finished=True)
    other = Hypothesis([5, 6, 9], log_prob=-3.0, score=-2.0, finished=True)
    signals = signals_of([best, other])
    assert signals.mean_log_prob == pytest.approx(-0.5)  # 3 tokens + end of sentence
    assert (
        signals.agreement == pytest.approx(token_f1([5, 6, 7], [5, 6, 9])) == pytest.approx(2 / 3)
    )
    assert signals_of([best]).agreement == 1.0


def test_a_calibration_ranks_as_its_signals_do_and_stays_in_0_1():
    rng = np.random.default_rng(1)
    log_probs = rng.uniform(-3, 0, size=200)
    chrf = np.clip(100 * np.exp(log_probs) + rng.normal(0, 5, size=200), 0, 100)
    signals = [Signals(float(x), 1.0, 2.0) for x in log_probs]
    calibration = fit(signals, list(chrf))
    assert calibration.spearman > 0.9 and calibration.sentences == 200
    assert all(0.0 <= calibration(s) <= 1.0 for s in signals)
    assert calibration(Signals(-0.1, 1.0, 2.0)) > calibration(Signals(-2.5, 1.0, 2.0))
    again = Calibration.from_record(json.loads(json.dumps(calibration.record())))
    assert again == calibration
    with pytest.raises(ValueError, match="signals"):
        Calibration.from_record({**calibration.record(), "signals": ["entropy"]})


@pytest.fixture(scope="module")
def calibrated(numbers_run, tmp_path_factory):
    """A copy of the numbers run, calibrated by `vaswani calibrate`."""
    run = tmp_path_factory.mktemp("calibrated") / "numbers"
    shutil.copytree(numbers_run, run)
    return run


def test_calibrate_stores_a_calibration_that_translate_and_evaluate_use(calibrated, capsys):
    code, _, err = cli(capsys, "calibrate", "--checkpoint", str(calibrated), "--precision", "fp32")
    assert code == 0 and "confidence: calibrated on" in err
    record = json.loads((calibrated / "confidence.json").read_text())
    assert record["signals"] == ["mean_log_prob", "agreement", "length"]
    calibration = load_run(calibrated).assess
    assert isinstance(calibration, Calibration) and calibration.sentences >= 20
    code, out, _ = translate_cli(capsys, calibrated, "--output-format", "jsonl", "42", "1999")
    confidences = [json.loads(line)["confidence"] for line in out.splitlines()]
    assert all(0 <= c <= 1 for c in confidences)
    code, out, _ = cli(capsys, "evaluate", "--checkpoint", str(calibrated), "--split", "valid")
    assert code == 0 and "confidence: Spearman" in out and "(calibrated;" in out


def test_min_confidence_marks_jsonl_lines_and_leaves_po_entries(calibrated, capsys, tmp_path):
    texts = ["42", "1999", "271493", "7", "800000"]
    code, out, _ = translate_cli(capsys, calibrated, "--output-format", "jsonl", *texts)
    records = [json.loads(line) for line in out.splitlines()]
    ordered = sorted(r["confidence"] for r in records)
    middle = (ordered[1] + ordered[2]) / 2  # between two (rounded) confidences
    code, out, _ = translate_cli(
        capsys, calibrated, "--output-format", "jsonl", "--min-confidence", str(middle), *texts
    )
    marked = [json.loads(line).get("below_min_confidence", False) for line in out.splitlines()]
    assert marked == [r["confidence"] < middle for r in records] and any(marked)
    po = tmp_path / "messages.po"
    po.write_text("".join(f'msgid "{t}"\nmsgstr ""\n\n' for t in texts))
    code, _, err = translate_cli(
        capsys,
        calibrated,
        "--input",
        str(po),
        "--output",
        str(tmp_path / "out.po"),
        "--min-confidence",
        str(middle),
    )
    assert code == 0, err
    untranslated = [e.msgid for e in polib.pofile(str(tmp_path / "out.po")).untranslated_entries()]
    assert untranslated == [
        t for t, m in zip(texts, marked, strict=True) if m
    ]  # they wait for a translator
    code, _, err = translate_cli(capsys, calibrated, "--min-confidence", "0.5", "42")
    assert code == 2 and "--output-format jsonl" in err


def test_a_broken_calibration_file_is_one_line(calibrated):
    (calibrated / "confidence.json").write_text('{"signals": ["x"]}')
    with pytest.raises(RunError, match="vaswani calibrate --checkpoint"):
        assert load_run(calibrated).assess is None


def test_a_calibration_past_its_deadline_fits_on_its_first_slice(numbers_run, tmp_path, capsys):
    """`vaswani train`'s calibration stops translating at the end of the time budget."""
    from vaswani import evaluate
    from vaswani.cli.calibrate import calibrate_run
    from vaswani.device import place
    from vaswani.translation.engine import Choices, decide

    run = tmp_path / "numbers"
    shutil.copytree(numbers_run, run)
    engine = decide(load_run(run), place("cpu", "fp32"), Choices(auto=False))
    calibration = calibrate_run(engine, max_sentences=150, deadline=0.0)  # long passed
    first = evaluate.CALIBRATION_FIRST
    assert calibration is not None and 20 <= calibration.sentences <= first
    assert f"the first {first} of 150 by the budget's end" in capsys.readouterr().err
    whole = calibrate_run(engine, max_sentences=150)
    assert whole is not None and whole.sentences == 150  # no deadline: every sentence
    assert "budget's end" not in capsys.readouterr().err
