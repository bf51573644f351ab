"""Hostile run and data directories: nothing read or written outside the place the user named
(links, manifests, pointers), damaged run files and logs one line or skipped, never a traceback."""

import json
import os
import shutil

import pytest

from helpers import cli
from helpers_hostile import copy_run, edit_json, outside_file
from vaswani.data import PrepareOptions, prepare
from vaswani.data.corpora import DataError
from vaswani.run import load_trained
from vaswani.train import checkpoint as ckpt
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
    from vaswani.runs import EVALUATIONS, record_evaluation

    run, target = copy_run(numbers_run, tmp_path), outside_file(tmp_path)
    (run / EVALUATIONS).symlink_to(target)
    with pytest.warns(UserWarning, match="symbolic link"):
        assert record_evaluation(run, {"split": "test", "bleu": 1.0}) is False
    assert target.read_bytes() == b"OUTSIDE"


def test_metrics_are_not_appended_through_a_link(numbers_run, tmp_path):
    from vaswani.files import UnsafeFileError
    from vaswani.run import METRICS, append_metrics

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
    from vaswani.files import UnsafeFileError
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
