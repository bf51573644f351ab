"""`--precision auto` for decoding: measured on the run's validation sentences, once per machine."""

import json
import shutil

import pytest

import vaswani.translation.precision
from helpers import translate_cli
from vaswani import kernels
from vaswani.device import Hardware, place
from vaswani.translation.engine import load_run

MEASURE = vaswani.translation.precision.decoding_choice  # conftest replaces it for every other test


@pytest.fixture
def run(numbers_run, tmp_path):
    """A copy of the trained run with nothing measured on it yet."""
    copy = tmp_path / "run"
    shutil.copytree(numbers_run, copy)
    (copy / vaswani.translation.precision.FILE).unlink(missing_ok=True)
    return copy


def test_the_fastest_precision_within_half_a_bleu_is_chosen_and_kept(run, monkeypatch):
    placement = place("cpu", "fp32")
    choice = MEASURE(load_run(run), placement)
    record = json.loads((run / "decoding.json").read_text())
    ((key, found),) = record.items()
    assert "threads" in key and found["sentences"] >= 20
    names = set(found["seconds"])
    assert {"fp32", "int8"} <= names <= {"fp32", "bf16", "int8", "fp32-onednn"}
    assert ("fp32-onednn" in names) == kernels.onednn_available()
    how = "onednn" if found["onednn"] else found["quantize"]
    chosen = vaswani.translation.precision.name_of(found["precision"], how)
    assert found["bleu"][chosen] >= found["bleu"]["fp32"] - 0.5
    faster = [n for n in names if found["seconds"][n] < found["seconds"][chosen]]
    assert all(found["bleu"][n] < found["bleu"]["fp32"] - 0.5 for n in faster)
    assert (choice.precision, choice.quantize) == (found["precision"], found["quantize"])
    assert choice.onednn == found["onednn"] and not kernels.decodes_on_onednn(load_run(run).model)

    def measure(*_):
        raise AssertionError("measured twice on one machine")

    monkeypatch.setattr(vaswani.translation.precision, "measure", measure)
    again = MEASURE(load_run(run), placement)
    assert again.quantize == choice.quantize and "measured before" in again.reason


def test_one_candidate_or_no_validation_text_leaves_training_s_rule(run, monkeypatch):
    monkeypatch.setattr(vaswani.translation.precision, "candidates", lambda *_: [("fp32", "none")])
    assert MEASURE(load_run(run), place("cpu", "fp32")) is None
    monkeypatch.undo()
    loaded = load_run(run)
    loaded.info = {**loaded.info, "path": None}  # an imported run: no data
    assert MEASURE(loaded, place("cpu", "fp32"), Hardware.detect()) is None


def test_translate_says_what_auto_chose(run, capsys, monkeypatch):
    monkeypatch.setattr(vaswani.translation.precision, "decoding_choice", MEASURE)
    code, out, err = translate_cli(capsys, run, "42")
    assert code == 0 and out.strip()
    assert "auto for decoding:" in err and "validation sentences" in err
    code, _, err = translate_cli(capsys, run, "--precision", "fp32", "42")
    assert "auto for decoding" not in err


def test_a_record_without_a_candidate_of_today_is_measured_again(run, monkeypatch):
    """A record written before oneDNN was a candidate is measured again, once."""
    placement = place("cpu", "fp32")
    options = [("fp32", "none"), ("fp32", "int8")]
    monkeypatch.setattr(vaswani.translation.precision, "candidates", lambda *_: options)
    MEASURE(load_run(run), placement)
    calls = []
    measure = vaswani.translation.precision.measure
    monkeypatch.setattr(
        vaswani.translation.precision, "measure", lambda *a: calls.append(a[2]) or measure(*a)
    )
    MEASURE(load_run(run), placement)
    assert calls == []
    options.append(("fp32", "onednn"))
    MEASURE(load_run(run), placement)
    assert calls == [options]
    record = json.loads((run / "decoding.json").read_text())
    assert "fp32-onednn" in next(iter(record.values()))["seconds"]


def test_a_onednn_choice_is_applied_and_said(run, capsys, monkeypatch):
    choice = vaswani.translation.precision.Choice(
        "fp32", "none", "auto for decoding: test", onednn=True
    )
    monkeypatch.setattr(vaswani.translation.precision, "decoding_choice", lambda *_: choice)
    marked = []
    mark = kernels.decode_with_onednn
    monkeypatch.setattr(
        kernels, "decode_with_onednn", lambda m, on: marked.append(on) or mark(m, on)
    )
    code, out, err = translate_cli(capsys, run, "42")
    assert code == 0 and out.strip()
    assert "oneDNN" in err and marked == [True]
