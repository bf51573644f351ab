"""The engine: what Python users hold gives what the CLI gives, precision choice included; one
Request carries every option."""

import dataclasses
import shutil

import pytest

from helpers import cli
from vaswani import Aids, Engine, Glossary, Memory, Request
from vaswani.translation.engine import load_run


@pytest.fixture
def run(numbers_run, tmp_path):
    """A copy of the shared run: `Engine.load` measures --precision auto into it."""
    copy = tmp_path / "run"
    shutil.copytree(numbers_run, copy)
    return copy


def test_engine_load_decides_and_translates_as_the_cli_does(run, capsys, tmp_path):
    texts = ["271493", "42. 7.", ""]
    code, out, err = cli(capsys, "translate", "--checkpoint", str(run), *texts)
    assert code == 0
    engine = Engine.load(run)  # the same machine: the CLI's measured choice, read back
    assert engine.decided and f"precision: {engine.precision}" in err
    assert [line for line in engine.notes if line.startswith("precision:")][0] in err
    assert engine.translate(texts) == out.splitlines()
    assert engine.translate("271493") == out.splitlines()[0]
    po = tmp_path / "app.po"
    po.write_text('msgid "271493"\nmsgstr ""\n')
    code, _, _ = cli(
        capsys,
        "translate",
        "--checkpoint",
        str(run),
        "--input",
        str(po),
        "--output",
        str(tmp_path / "cli.po"),
    )
    assert code == 0
    assert engine.translate_file(po) == (tmp_path / "cli.po").read_bytes()


def test_load_run_is_the_model_as_trained(run):
    engine = load_run(run)
    assert not engine.decided and engine.precision == "fp32" and engine.device.type == "cpu"
    assert engine.notes == [] and engine.task.name == "translate"


def test_one_frozen_request_carries_the_options_and_the_aids(run):
    engine = load_run(run)
    aids = Aids(glossary=Glossary.of([("42", "XLII")]), memory=Memory([("7", "sieben")]))
    request = Request(split=False, aids=aids)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.split = True  # type: ignore[misc]
    done = engine.translate_nbest(["42", "7"], request)
    assert [t.text for t in done.best] == ["XLII", "sieben"]
    assert done.best[0].terms == [("42", "XLII", True)] and done.best[1].origin == "memory"
