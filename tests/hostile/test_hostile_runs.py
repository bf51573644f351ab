"""Hostile run and data directories: nothing read or written outside the place the user named
(links, manifests, pointers), damaged run files and logs one line or skipped, never a traceback."""

import json
import os
import shutil

import pytest

from helpers import cli, translate_cli
from helpers_hostile import copy_run, edit_json, outside_file
from vaswani import checkpoint as ckpt
from vaswani.data import PrepareOptions
from vaswani.data.corpora import DataError
from vaswani.prepare import prepare
from vaswani.run import load_trained
from vaswani.train.loop import train
from vaswani.train.setup import resume_config

# 1. Nothing read or written outside the place the user named.


def test_resuming_a_copied_run_writes_into_the_copy_only(numbers_run, tmp_path):
    original = copy_run(numbers_run, tmp_path, "a")
    before = {p: p.stat().st_mtime_ns for p in original.rglob("*")}
    copy = copy_run(original, tmp_path, "b")
    tc = resume_config(copy, max_steps=401)
    assert tc.out == str(copy)
    train(tc, resume=True, progress=False)
    assert (copy / "checkpoints" / ckpt.step_name(401)).is_dir()
    assert {p: p.stat().st_mtime_ns for p in original.rglob("*")} == before


def test_tokenizer_from_refuses_names_that_leave_the_run(numbers_run, tmp_path):
    run = copy_run(numbers_run, tmp_path)
    (tmp_path / "payload.json").write_text("{}")
    edit_json(
        run / "data.json", lambda d: d["meta"]["tokenizer"]["files"].update(src="../payload.json")
    )
    opts = PrepareOptions(numbers_size=200, tokenizer_from=run, progress=False)
    with pytest.raises(DataError, match="outside"):
        prepare(["numbers-de"], tmp_path / "data" / "out", opts)
    assert (tmp_path / "payload.json").read_text() == "{}"
    assert list((tmp_path / "data").iterdir()) == []  # nothing copied, nothing left behind


@pytest.mark.parametrize("name", ["../../config.json", "/etc/passwd", "model.safetensors/../x"])
def test_a_manifest_naming_files_elsewhere_is_refused(numbers_run, tmp_path, name):
    run = copy_run(numbers_run, tmp_path)
    best = run / "best"
    edit_json(best / ckpt.MANIFEST, lambda m: m.update({name: "0" * 64}))
    with pytest.raises(ckpt.CheckpointError, match="not a checkpoint file|outside"):
        ckpt.verify(best)


def test_an_empty_manifest_verifies_nothing_and_is_refused(numbers_run, tmp_path):
    run = copy_run(numbers_run, tmp_path)
    (run / "best" / ckpt.MANIFEST).write_text("{}")
    with pytest.raises(ckpt.CheckpointError, match="does not list model.safetensors"):
        ckpt.verify(run / "best")


def test_latest_pointing_at_another_run_is_not_followed(numbers_run, tmp_path):
    other = copy_run(numbers_run, tmp_path, "other")
    run = copy_run(numbers_run, tmp_path, "run")
    (run / "checkpoints" / ckpt.LATEST).write_text("../../other/best\n")
    with pytest.warns(UserWarning, match="not a checkpoint here"):
        found = ckpt.latest_valid(run / "checkpoints")
    assert found.parent == run / "checkpoints" and other not in found.parents


def test_best_as_a_link_to_another_run_is_refused(numbers_run, tmp_path):
    other = copy_run(numbers_run, tmp_path, "other")
    run = copy_run(numbers_run, tmp_path, "run")
    shutil.rmtree(run / "best")
    (run / "best").symlink_to(other / "best")
    with pytest.raises(Exception, match="leads outside"):
        load_trained(run)


@pytest.mark.parametrize("target", ["/etc/passwd", "../outside.json", "fifo"])
def test_tokenizer_files_must_be_regular_files_inside_the_run(
    numbers_run, tmp_path, capsys, target
):
    run = copy_run(numbers_run, tmp_path)
    (tmp_path / "outside.json").write_text("{}")
    if target == "fifo":  # would hang forever if opened
        (run / "tokenizer.json").unlink()
        os.mkfifo(run / "tokenizer.json")
        target = "tokenizer.json"
    edit_json(
        run / "data.json", lambda d: d["meta"]["tokenizer"]["files"].update(src=target, tgt=target)
    )
    code, _, err = cli(capsys, "translate", "--checkpoint", str(run), "12")
    assert code == 2 and len(err.splitlines()) == 1
    assert "outside" in err or "not a regular file" in err


def test_force_never_deletes_an_input(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    pairs = tmp_path / "in" / "pairs.tsv"
    pairs.write_text("".join(f"Haus {i}\thouse {i}\n" for i in range(50)))
    code, _, err = cli(capsys, "prepare", str(pairs), "--out", str(tmp_path / "in"), "--force")
    assert code == 2 and "holds the input" in err
    assert pairs.is_file()


def test_read_only_commands_leave_a_save_in_progress_alone(numbers_run, tmp_path, capsys):
    run = copy_run(numbers_run, tmp_path)
    in_progress = run / "checkpoints" / ".tmp-step-00000700-12345"
    in_progress.mkdir()
    (in_progress / "model.safetensors").write_bytes(b"half")
    code, _, _ = cli(capsys, "translate", "--checkpoint", str(run), "--weights", "latest", "12")
    assert code == 0 and (in_progress / "model.safetensors").read_bytes() == b"half"


def test_an_evaluation_is_not_appended_through_a_link(numbers_run, tmp_path):
    from vaswani.run_table import EVALUATIONS, record_evaluation

    run, target = copy_run(numbers_run, tmp_path), outside_file(tmp_path)
    (run / EVALUATIONS).unlink(missing_ok=True)
    (run / EVALUATIONS).symlink_to(target)
    with pytest.warns(UserWarning, match="symbolic link"):
        assert record_evaluation(run, {"split": "test", "bleu": 1.0}) is False
    assert target.read_bytes() == b"OUTSIDE"


def test_metrics_are_not_appended_through_a_link(numbers_run, tmp_path):
    from vaswani.run import METRICS, append_metrics
    from vaswani.safe_io import UnsafeFileError

    run, target = copy_run(numbers_run, tmp_path), outside_file(tmp_path)
    (run / METRICS).unlink()
    (run / METRICS).symlink_to(target)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        append_metrics(run, {"step": 1, "loss": 1.0})
    assert target.read_bytes() == b"OUTSIDE"


def test_a_plot_replaces_a_link_instead_of_writing_through_it(numbers_run, tmp_path, capsys):
    run, target = copy_run(numbers_run, tmp_path), outside_file(tmp_path)
    (run / "training.png").symlink_to(target)
    code, _, err = cli(capsys, "plot", "training", str(run))
    assert code == 0, err
    assert target.read_bytes() == b"OUTSIDE"
    assert not (run / "training.png").is_symlink()
    assert (run / "training.png").read_bytes().startswith(b"\x89PNG")


def test_tensorboard_and_checkpoints_never_write_into_a_linked_directory(numbers_run, tmp_path):
    from vaswani.safe_io import UnsafeFileError
    from vaswani.train.board import Board

    run, elsewhere = copy_run(numbers_run, tmp_path), tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "tensorboard").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        Board(run, resumed_at=None)
    shutil.rmtree(run / "checkpoints")
    (run / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        ckpt.write_checkpoint(run / "checkpoints", "step-1", {"a": lambda p: p.write_text("x")})
    assert list(elsewhere.iterdir()) == []


def test_a_checkpoint_saved_over_a_link_replaces_the_link(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "keep").write_text("kept")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "best").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    saved = ckpt.write_checkpoint(tmp_path / "run", "best", {"a": lambda p: p.write_text("x")})
    assert not saved.is_symlink() and (saved / "a").read_text() == "x"
    assert (tmp_path / "elsewhere" / "keep").read_text() == "kept"


def write_metrics(run, lines):
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")


DAMAGED_METRICS = [
    [
        '{"step": 1, "loss": 2.0, "lr": 0.001, "tokens_per_s": 5, "elapsed_seconds": 1}',
        '{"step": 2, "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"step": 3, "loss": 1.5}',  # no elapsed_seconds, lr or tokens_per_s
        '{"step": 4, "loss": ' + "9" * 400 + "}",
        '{"step": 5, "loss": null, "valid_loss": null}',
        '{"step": 6, "loss": 1.0, "elapsed_seconds": null, "valid_loss": 1.1, "valid_chrf": null}',
    ],
]


@pytest.mark.parametrize("lines", DAMAGED_METRICS)
def test_damaged_metrics_still_list_plot_and_resume(numbers_run, tmp_path, capsys, lines):
    run = copy_run(numbers_run, tmp_path)
    write_metrics(run, lines)
    code, out, err = cli(capsys, "runs", str(run))
    assert code == 0 and "damaged record" in err and "Traceback" not in err, err
    for args in (
        ["plot", "training", str(run)],
        [
            "plot",
            "compare",
            str(run),
            str(numbers_run),
            "--by",
            "minute",
            "--out",
            str(tmp_path / "c.png"),
        ],
    ):
        code, out, err = cli(capsys, *args)  # (the warning is shown once per process)
        assert code == 0 and "Traceback" not in err, (args, err)
    train(resume_config(run, max_steps=401), resume=True, progress=False)
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 401


def test_a_huge_metrics_file_is_ignored_not_read(numbers_run, tmp_path, capsys):
    run = copy_run(numbers_run, tmp_path)
    with open(run / "metrics.jsonl", "wb") as handle:
        handle.truncate(3 << 30)  # sparse: 3 GiB of zeros, no disk used
    code, _, err = cli(capsys, "runs", str(run))
    assert code == 0 and "ignored" in err


def test_a_run_of_an_unknown_task_is_skipped_by_runs(numbers_run, tmp_path, capsys):
    good, bad = copy_run(numbers_run, tmp_path, "good"), copy_run(numbers_run, tmp_path, "bad")
    edit_json(bad / "data.json", lambda d: d["meta"].update(task="poetry"))
    code, out, err = cli(capsys, "runs", str(good), str(bad))
    assert code == 0 and "good" in out and "bad" not in out and "unknown task" in err, err


@pytest.mark.parametrize(
    "record",
    [
        {"pairs": ["de-en", "de-fr"]},
        {"pairs": [], "token": "<2{lang}>"},
        {"pairs": ["garbage"], "token": "<2{lang}>"},
        {"pairs": "de-en", "token": "<2{lang}>"},
        {"pairs": ["de-en"], "token": "<2{lang}>", "tokens": ["x"]},
    ],
)
def test_damaged_language_records_are_one_line(numbers_run, tmp_path, capsys, record):
    run = copy_run(numbers_run, tmp_path)
    edit_json(run / "data.json", lambda d: d["meta"].update(languages=record))
    code, _, err = cli(capsys, "translate", "--checkpoint", str(run), "12")
    assert code == 2 and "damaged languages record" in err.splitlines()[-1], err


def test_a_language_token_that_is_a_special_token_is_refused(tmp_path, capsys):
    for name in ("a", "b"):
        (tmp_path / f"{name}.tsv").write_text("".join(f"{i} x\t{i} y\n" for i in range(50)))
    code, _, err = cli(
        capsys,
        "prepare",
        "--pair",
        f"en-pad={tmp_path / 'a.tsv'}",
        "--pair",
        f"en-de={tmp_path / 'b.tsv'}",
        "--language-token",
        "<{lang}>",
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 2 and "<pad>" in err and "special token" in err, err
    assert not (tmp_path / "out").exists()


# 5. Round 4's run files: decoding.json, confidence.json, progress records, train.align, all
# read as regular files inside the run, within bounds, field by field.

MEASURED = {
    "precision": "bf16",
    "quantize": "none",
    "onednn": False,
    "seconds": {"fp32": 1.0, "bf16": 0.5},
    "bleu": {"fp32": 30.0, "bf16": 30.0},
    "sentences": 200,
}


def sparse(path, size=6 << 30):
    """A file that says it holds `size` bytes (of zeros) and takes no disk."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def test_a_decoding_record_linked_from_outside_the_run_is_not_obeyed(numbers_run, tmp_path):
    from vaswani.translation.precision import FILE, known

    run = copy_run(numbers_run, tmp_path)
    (run / FILE).write_text(json.dumps({"this machine": MEASURED}))
    assert known(run) == {"this machine": MEASURED}  # a good record is used
    outside = outside_file(tmp_path, json.dumps({"this machine": MEASURED}).encode())
    (run / FILE).unlink()
    (run / FILE).symlink_to(outside)
    assert known(run) == {}  # measured again instead
    (run / FILE).unlink()
    sparse(run / FILE)
    assert known(run) == {}


@pytest.mark.parametrize(
    "change",
    [
        {"precision": "fp64"},
        {"precision": None},
        {"seconds": "x"},
        {"seconds": {"fp32": "x"}},
        {"bleu": {"fp32": float("nan")}},
        {"sentences": "200"},
        {"onednn": "yes"},
    ],
)
def test_a_damaged_decoding_record_is_measured_again(numbers_run, tmp_path, change):
    from vaswani.translation.precision import FILE, known

    run = copy_run(numbers_run, tmp_path)
    damaged = {key: value for key, value in {**MEASURED, **change}.items() if value is not None}
    (run / FILE).write_text(json.dumps({"this machine": damaged, "other": MEASURED}))
    assert known(run) == {"other": MEASURED}
    (run / FILE).write_text(json.dumps([MEASURED]))
    assert known(run) == {}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"mean": [0.0, 1.0]}, "'mean' should be a list of 3 numbers"),
        ({"scale": [0.0, 0.0, 0.0]}, "'scale' holds a 0"),
        ({"bias": "nan"}, "'bias' holds nan, not a finite number"),
        ({"weights": [1.0, 10**400, 1.0]}, "'weights' holds"),
        ({"sentences": -1}, "'sentences' should be a count"),
    ],
)
def test_a_damaged_calibration_is_one_line(numbers_run, tmp_path, capsys, change, message):
    from vaswani.run import CONFIDENCE

    run = copy_run(numbers_run, tmp_path)
    record = {
        "mean": [-0.5, 0.5, 2.0],
        "scale": [0.2, 0.2, 0.5],
        "weights": [0.1, 0.1, 0.0],
        "bias": 0.5,
        "sentences": 100,
        "spearman": 0.4,
        "signals": ["mean_log_prob", "agreement", "length"],
    }
    (run / CONFIDENCE).write_text(json.dumps({**record, **change}))
    code, out, err = translate_cli(capsys, run, "4711", "--output-format", "jsonl")
    assert code == 2 and message in err and CONFIDENCE in err and err.count("error:") == 1, err
    sparse(run / CONFIDENCE)
    code, out, err = translate_cli(capsys, run, "4711", "--output-format", "jsonl")
    assert code == 2 and "over 1,048,576 bytes" in err, err


def test_nan_signals_give_a_confidence_of_0_never_nan():
    from vaswani.decoding.confidence import Calibration, Signals, mean_probability

    calibration = Calibration((0.0,) * 3, (1.0,) * 3, (1.0,) * 3, 0.5, 10, 0.0)
    signals = Signals(float("nan"), 0.5, 1.0)
    assert calibration(signals) == 0.0 and mean_probability(signals) == 0.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bytes": "abc"}, "'bytes' should be a count"),
        ({"done": -10}, "'done' should be a count"),
        ({"done": 10**30}, "'done' should be a count"),
        ({"dropped": 5}, "'dropped' should be an object of counts"),
        ({"written": "x"}, "'written' should be a count"),
        ({"complete": None}, "'complete' should be true or false"),
    ],
)
def test_a_damaged_progress_record_is_one_line(tmp_path, change, message):
    from vaswani.backtranslate import BackTranslationError, progress_path, resume_point

    output = tmp_path / "bt.tsv"
    output.write_text("a\tb\n")
    fingerprint = {"run": "r", "inputs": [], "settings": {}}
    record = {**fingerprint, "done": 1, "bytes": 4, "written": 1, "dropped": {}, "complete": False}
    progress_path(output).write_text(json.dumps({**record, **change}))
    with pytest.raises(BackTranslationError, match=message):
        resume_point(output, fingerprint, force=False)


def test_word_alignments_are_read_within_bounds(tmp_path):
    from vaswani.data.wordalign import FILE, load_alignments
    from vaswani.safe_io import DamagedFileError

    (tmp_path / FILE).write_text("0-0 1-1\n0-0\n")
    assert load_alignments(tmp_path, 2) == ["0-0 1-1", "0-0"]
    with pytest.raises(DamagedFileError, match="over 1 lines"):
        load_alignments(tmp_path, 1)
    sparse(tmp_path / FILE)
    with pytest.raises(DamagedFileError, match="a line too long"):
        load_alignments(tmp_path, 30_000)


def test_a_config_file_that_is_huge_is_one_line(tmp_path, capsys):
    config = sparse(tmp_path / "big.yaml")
    code, _, err = cli(
        capsys, "prepare", "numbers-de", "--out", str(tmp_path / "d"), "--config", str(config)
    )
    assert code == 2 and "over 1,048,576 bytes" in err and len(err.splitlines()) == 1, err
