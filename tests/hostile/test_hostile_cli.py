"""Hostile command lines and config files: one line naming the flag, key or file instead of a
traceback, limits checked before anything is allocated."""

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cli, translate_cli
from helpers_hostile import copy_run, edit_json
from vaswani.config import ModelConfig
from vaswani.data.corpora import DataError, read_lines
from vaswani.decoding.text import TextModel
from vaswani.train.loop import train
from vaswani.train.setup import resume_config

# 2. One line instead of a traceback.


def test_a_torn_metrics_line_does_not_stop_a_resume(numbers_run, tmp_path):
    run = copy_run(numbers_run, tmp_path)
    with open(run / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 601, "loss": 0.9')  # killed while appending
    with pytest.warns(UserWarning, match="damaged record"):
        train(resume_config(run, max_steps=402), resume=True, progress=False)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 402


def damaged_config(run):
    (run / "config.json").write_text('{"d_model": 6')


def bool_heads(run):
    edit_json(run / "config.json", lambda c: c.update(n_heads=True))


def string_switch(run):
    edit_json(run / "config.json", lambda c: c.update(scale_embeddings="no"))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (damaged_config, "config.json"),
        (bool_heads, "n_heads must be int, got True"),
        (string_switch, "scale_embeddings must be bool, got 'no'"),
    ],
)
def test_damaged_or_mistyped_run_files_are_one_line(numbers_run, tmp_path, capsys, damage, message):
    run = copy_run(numbers_run, tmp_path)
    damage(run)
    code, _, err = cli(capsys, "translate", "--checkpoint", str(run), "12")
    assert code == 2 and message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["translate", "--checkpoint", "RUN", "--device", "meta", "1"], "runs on cpu, cuda or mps"),
        (["translate", "--checkpoint", "RUN", "--device", "mps", "1"], "MPS"),
        (["translate", "--checkpoint", "RUN", "--output", "TMP", "1"], "is a directory"),
        (
            ["translate", "--checkpoint", "RUN", "--output", "TMP/no/such/out.txt", "1"],
            "no/such does not exist",
        ),
        (["evaluate", "--checkpoint", "RUN", "--output", "TMP"], "is a directory"),
        (["prepare", "numbers-de", "--out", "FILE"], "is not a directory"),
        (["prepare", "numbers-de", "--out", "TMP/v", "--vocab-size", "1000000000"], "--vocab-size"),
        (["prepare", "TMP/bad.gz", "--out", "TMP/g"], "cannot read past line"),
        (["prepare", "TMP/truncated.gz", "--out", "TMP/t"], "cannot read past line"),
        (
            [
                "train",
                "--data",
                "DATA",
                "--out",
                "TMP/r",
                "--max-steps",
                "1",
                "--model",
                "d_model=1000000000",
            ],
            "d_model=1000000000 is above",
        ),
    ],
)
def test_cli_errors_are_one_line(numbers_run, numbers_data, tmp_path, capsys, args, message):
    (tmp_path / "file").write_text("x")
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8bnot gzip at all")
    whole = gzip.compress("".join(f"{i}\t{i * 7919}\n" for i in range(5000)).encode())
    (tmp_path / "truncated.gz").write_bytes(whole[: len(whole) // 2])
    names = {"RUN": str(numbers_run), "DATA": str(numbers_data), "FILE": str(tmp_path / "file")}
    args = [names.get(a, a.replace("TMP", str(tmp_path))) for a in args]
    code, _, err = cli(capsys, *args)
    last = err.splitlines()[-1]  # after the device and precision lines of commands that run a model
    assert code == 2 and last.startswith("error: ") and message in last, err
    assert "Traceback" not in err


def damaged_meta(data):
    (data / "meta.json").write_text('{"format_version": 3, "tokenizer": ')


def listed_meta(data):
    (data / "meta.json").write_text("[1, 2, 3]")


def meta_without_tokenizer(data):
    edit_json(data / "meta.json", lambda m: m.pop("tokenizer"))


def meta_with_a_number_for_tokenizer(data):
    edit_json(data / "meta.json", lambda m: m.update(tokenizer=5))


def split_with_invalid_utf8(data):
    (data / "test.src.txt").write_bytes(b"12\n3\xff4\n")


@pytest.mark.parametrize(
    ("damage", "command", "message"),
    [
        (damaged_meta, "train", "meta.json:1:"),
        (damaged_meta, "evaluate", "meta.json:1:"),
        (listed_meta, "train", "expected a JSON object, found array"),
        (meta_without_tokenizer, "evaluate", "no 'tokenizer'"),
        (meta_with_a_number_for_tokenizer, "train", "'tokenizer' should be a JSON object"),
        (split_with_invalid_utf8, "evaluate", "test.src.txt:2: damaged test split: not UTF-8"),
    ],
)
def test_a_damaged_data_directory_is_one_line(
    numbers_run, numbers_data, tmp_path, capsys, damage, command, message
):
    data = tmp_path / "data"
    shutil.copytree(numbers_data, data)
    damage(data)
    if command == "train":
        args = ["train", "--data", str(data), "--out", str(tmp_path / "r"), "--max-steps", "1"]
    else:  # the run's data.json names the data directory it was trained on
        run = copy_run(numbers_run, tmp_path)
        edit_json(run / "data.json", lambda d: d.update(path=str(data)))
        args = ["evaluate", "--checkpoint", str(run)]
    code, _, err = cli(capsys, *args)
    last = err.splitlines()[-1]
    assert code == 2 and last.startswith("error: ") and message in last, err
    assert "Traceback" not in err and not (tmp_path / "r").exists()


@pytest.mark.parametrize("text", ['{"d_model": 512,', "[]", b"\xff\xfe{}"])
def test_a_damaged_hugging_face_config_is_one_line(tmp_path, capsys, text):
    folder = tmp_path / "opus-mt"
    folder.mkdir()
    write = (folder / "config.json").write_bytes if isinstance(text, bytes) else None
    (write or (folder / "config.json").write_text)(text)
    code, _, err = cli(capsys, "import-marian", str(folder), "--out", str(tmp_path / "run"))
    assert code == 2 and err.startswith("error: ") and "config.json" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_symlink_loop_where_the_weights_belong_is_one_line(numbers_run, tmp_path, capsys):
    run = copy_run(numbers_run, tmp_path)
    weights = run / "best" / "model.safetensors"
    weights.unlink()
    weights.symlink_to(weights.name)  # model.safetensors -> model.safetensors
    code, _, err = cli(capsys, "translate", "--checkpoint", str(run), "12")
    assert code == 2 and "loop of symbolic links" in err and "Traceback" not in err, err
    for where in (run / "data.json", run / "config.json"):  # the run's JSON records alike
        where.unlink()
        where.symlink_to(where.name)
        code, _, err = cli(capsys, "translate", "--checkpoint", str(run), "12")
        assert code == 2 and "loop of symbolic links" in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["translate", "--beam-size", "1000000", "12"], "over the cap of 256"),
        (["evaluate", "--beam-size", "1000000", "--split", "test"], "over the cap of 256"),
    ],
)
def test_the_command_line_checks_limits_before_allocating(numbers_run, capsys, args, message):
    code, _, err = cli(capsys, args[0], "--checkpoint", str(numbers_run), *args[1:])
    assert code == 2 and message in err.splitlines()[-1] and "Traceback" not in err, err


def test_a_line_limit_beyond_memory_is_refused_before_reading(numbers_run, capsys):
    with pytest.raises(SystemExit) as stop:  # argparse's own check of the flag
        cli(
            capsys,
            "translate",
            "--checkpoint",
            str(numbers_run),
            "--input",
            "/dev/zero",
            "--max-line-bytes",
            str(1 << 40),
        )
    assert stop.value.code == 2 and "--max-line-bytes: must be in 1 .. 67108864" in (
        capsys.readouterr().err
    )
    with pytest.raises(DataError, match="max_line_bytes=1099511627776: must be in"):
        next(read_lines("/dev/zero", max_line_bytes=1 << 40))  # the readers check it too


def test_a_beam_wider_than_the_vocabulary_is_refused():
    from vaswani.config import DecodeConfig
    from vaswani.decoding.text import BeamTooWide, Segments, translate_segments
    from vaswani.model import Transformer

    model = Transformer(
        ModelConfig(
            vocab_size=40, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1
        )
    )
    with pytest.raises(BeamTooWide, match="over the model's target vocabulary of 40 tokens"):
        translate_segments(
            TextModel(model, None, None), Segments(["12"]), DecodeConfig(beam_size=41)
        )


class PanicException(BaseException):
    """What tokenizers' Rust code raises through pyo3 when it panics (not an Exception)."""


def test_a_tokenizer_panic_names_the_line(numbers_run, tmp_path, capsys, monkeypatch):
    from vaswani.data.tokenizer import SubwordTokenizer

    encode_batch = SubwordTokenizer.encode_batch

    def panics_on_a_long_line(self, texts):
        if any(len(text) > 1000 for text in texts):
            raise PanicException("regex engine: retry-limit-in-match over")
        return encode_batch(self, texts)

    monkeypatch.setattr(SubwordTokenizer, "encode_batch", panics_on_a_long_line)
    lines = tmp_path / "in.txt"
    lines.write_text("12\n\n" + "7" * 5000 + "\n34\n")
    code, _, err = cli(capsys, "translate", "--checkpoint", str(numbers_run), "--input", str(lines))
    last = err.splitlines()[-1]
    assert code == 2 and "line 3 (5000 characters): the tokenizer failed" in last, err


def test_invalid_utf8_in_argv_is_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "vaswani.cli", "translate", "--checkpoint", "x", b"\xff\xfe"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "argument 4" in result.stderr
    assert "not valid UTF-8" in result.stderr and "Traceback" not in result.stderr


def test_an_unexpected_exception_says_it_is_a_bug(capsys, monkeypatch):
    from vaswani.cli import presets

    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(presets, "run", broken)
    code, _, err = cli(capsys, "presets")
    assert code == 3 and "RuntimeError: boom" in err and "this is a bug in vaswani" in err


def test_config_values_are_checked_before_allocating():
    with pytest.raises(ValueError, match="d_model=1000000000 is above"):
        ModelConfig(d_model=10**9)
    with pytest.raises(ValueError, match="must be int"):
        ModelConfig(n_heads=8.0)


BOMB = (
    "exclude: ["
    + ", ".join(f"&a{i} [" + ", ".join([f"*a{i - 1}" if i else "x"] * 9) + "]" for i in range(9))
    + "]\n"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("inputs: [good.tsv, --force]\nout: out\n", "starting with '-'"),
        ("inputs: [good.tsv]\nout: out\nexclude: [--force]\n", "already exists"),
        ("inputs: [good.tsv]\nout: out\nseed: 1\nout: other\n", "'out' is given twice"),
        ("inputs: [good.tsv]\nout: other\n" + BOMB, "more than 10 aliases"),
    ],
)
def test_a_prepare_config_cannot_force_or_bomb(tmp_path, capsys, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.tsv").write_text("ein\tone\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("mine")
    (tmp_path / "c.yaml").write_text(text)
    code, _, err = cli(capsys, "prepare", "--config", "c.yaml")
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert (tmp_path / "out" / "keep").read_text() == "mine"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("max_minutes: -1", "max_minutes must be in (0"),
        ("seed: -1", "seed must be in 0"),
        (f"seed: {10**30}", "seed must be in 0"),
        (f"batch_tokens: {10**30}", "batch_tokens must be at most"),
        ("max_steps: 0", "max_steps must be >= 1"),
    ],
)
def test_train_config_values_are_checked_as_flags(numbers_data, tmp_path, capsys, setting, message):
    (tmp_path / "c.yaml").write_text(f"data: {numbers_data}\nout: {tmp_path / 'r'}\n{setting}\n")
    code, _, err = cli(capsys, "train", "--config", str(tmp_path / "c.yaml"))
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "r").exists()


def test_a_flag_is_never_abbreviated(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        cli(capsys, "prepare", "numbers-de", "--out", str(tmp_path / "o"), "--max-len", "1")
    assert exit.value.code == 2 and "unrecognized arguments: --max-len" in capsys.readouterr().err


# 5. Round 4's command lines: built-in corpora sizes, formats vaswani does not read, stdin.


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--numbers-size", "0"], "numbers_size must be in 1 .. 1,000,000"),
        (["--numbers-size", "2000000"], "numbers_size must be in 1 .. 1,000,000"),
        (["--numbers-max", "-1"], "numbers_max must be in 0 .. 1,000,000,000"),
    ],
)
def test_built_in_corpus_sizes_out_of_range_are_one_line(tmp_path, capsys, args, message):
    code, _, err = cli(capsys, "prepare", "numbers-multi", "--out", str(tmp_path / "d"), *args)
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "d").exists()


RESOURCES = {
    "strings.xml": '<resources><string name="open">Open the file 12</string></resources>\n',
    "en.yml": "en:\n  menu: Open the file 12\n",
    "messages.properties": "menu.open=Open the file 12\n",
    "Localizable.strings": '"open" = "Open the file 12";\n',
    "app.json": '{"open": "Open the file 12"}\n',
}


@pytest.mark.parametrize("name", sorted(RESOURCES))
def test_resource_files_are_read_in_their_format_and_keep_their_keys(
    numbers_run, tmp_path, capsys, name
):
    """Round 4 read these as plain text and translated their keys (`menu:` -> `menmen:`)."""
    path, out = tmp_path / name, tmp_path / f"out-{name}"
    path.write_text(RESOURCES[name])
    code, _, err = translate_cli(capsys, numbers_run, "--input", str(path), "--output", str(out))
    assert code == 0, err
    written, (before, after) = out.read_text(), RESOURCES[name].split("Open the file 12")
    assert written.startswith(before) and written.endswith(after), written
    assert len(written) > len(before + after), written


@pytest.mark.parametrize(
    ("name", "content"),
    [("sheet.xlsx", "not really"), ("old.doc", "not really"), ("table.csv", "a,b\n")],
)
def test_a_format_vaswani_does_not_read_is_refused_not_read_as_text(
    numbers_run, tmp_path, capsys, name, content
):
    path = tmp_path / name
    path.write_text(content)
    out = tmp_path / f"out-{name}"
    code, _, err = translate_cli(capsys, numbers_run, "--input", str(path), "--output", str(out))
    assert code == 2 and "vaswani does not read" in err and "--format text" in err, err
    assert not out.exists()


def test_format_text_reads_any_file_as_lines(numbers_run, tmp_path, capsys):
    path = tmp_path / "numbers.json"
    path.write_text("4711\n12\n")
    code, out, err = translate_cli(capsys, numbers_run, "--input", str(path), "--format", "text")
    assert code == 0 and len(out.splitlines()) == 2, err


def test_stdin_is_a_document_with_format(numbers_run, capsys, monkeypatch):
    import io

    page = "<html><body><p>4711</p></body></html>"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(page.encode())))
    code, out, err = translate_cli(capsys, numbers_run, "--input", "-", "--format", "html")
    assert code == 0 and out.startswith("<html") and "4711" not in out, err


def test_a_glossary_that_never_ends_is_one_line(numbers_run, capsys):
    code, _, err = translate_cli(capsys, numbers_run, "4711", "--glossary", "/dev/zero")
    assert code == 2 and "is it a glossary?" in err and err.count("error:") == 1, err


def test_the_license_that_pyproject_names_is_there():
    root = Path(__file__).resolve().parents[2]
    assert 'license = { text = "MIT" }' in (root / "pyproject.toml").read_text()
    assert (root / "LICENSE").read_text().startswith("MIT License")


def test_a_glossary_from_a_pipe_still_works(numbers_run, tmp_path, capsys):
    import os
    import threading

    pipe = tmp_path / "glossary.tsv"
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_text("4711\tZAHL\n"))
    writer.start()
    code, out, err = translate_cli(capsys, numbers_run, "4711", "--glossary", str(pipe))
    writer.join(timeout=60)
    assert code == 0 and "glossary: 1 of 1 terms put in" in err and "ZAHL" in out, err


def test_a_document_from_a_pipe_is_read_and_dev_zero_refused(numbers_run, tmp_path, capsys):
    import os
    import threading

    pipe = tmp_path / "page"
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_text("<p>4711</p>"))
    writer.start()
    code, out, err = translate_cli(capsys, numbers_run, "--input", str(pipe), "--format", "html")
    writer.join(timeout=60)
    assert code == 0 and out.startswith("<p>") and "4711" not in out, err
    code, _, err = translate_cli(capsys, numbers_run, "--input", "/dev/zero", "--format", "html")
    assert code == 2 and "is over 536,870,912 bytes" in err and err.count("error:") == 1, err
