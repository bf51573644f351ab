"""Hostile and damaged input: nothing read or written outside the place the user named, one line
instead of a traceback, 4xx with valid JSON instead of a 500. Each case failed before its fix."""

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from helpers import Server, cli, translate_cli
from helpers_files import docx, zip_bomb, zipped
from vaswani.config import ModelConfig
from vaswani.data import PrepareOptions, prepare
from vaswani.data.corpora import DataError, read_lines
from vaswani.run import load_run, load_trained
from vaswani.serve import Served, ServeError, ServeSettings, create_app, listen
from vaswani.train import checkpoint as ckpt
from vaswani.train.loop import train
from vaswani.train.setup import resume_config


def copy_run(run, tmp_path, name="copy"):
    copy = tmp_path / name
    shutil.copytree(run, copy, symlinks=True)
    return copy


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


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
    with pytest.raises(DataError, match="--max-line-bytes 1099511627776: must be in"):
        next(read_lines("/dev/zero", max_line_bytes=1 << 40))  # the readers check it too


def test_a_beam_wider_than_the_vocabulary_is_refused():
    from vaswani.config import DecodeConfig
    from vaswani.decoding.text import BeamTooWide, translate_nbest
    from vaswani.model import Transformer

    model = Transformer(
        ModelConfig(
            vocab_size=40, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1
        )
    )
    with pytest.raises(BeamTooWide, match="over the model's target vocabulary of 40 tokens"):
        translate_nbest(model, None, None, ["12"], DecodeConfig(beam_size=41))


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


# 3. The server: 4xx with valid JSON, impossible settings refused at start.


@pytest.fixture(scope="module")
def server(numbers_run):
    model, src_tok, tgt_tok, _ = load_trained(numbers_run)
    running = Server(create_app(model, src_tok, tgt_tok, ServeSettings(precision="fp32")))
    running.run = numbers_run
    yield running
    running.stop()


@pytest.mark.parametrize(
    "body",
    [
        b'{"text": "\\ud800"}',  # a lone surrogate, escaped
        b'{"text": "12\xed\xa0\x80"}',  # the same as raw bytes
        b'{"texts": ["12", "\\udfff"]}',
        b'{"text": "12", "beam_size": 1e400}',
        b'{"text": "12", "beam_size": NaN}',
        b'{"text": "12", "beam_size": "2"}',
        b'{"text": "12", "beam_size": true}',
        b'{"text": "12", "beam_size": 2.5}',
        b'{"text": 12}',
    ],
)
def test_bad_requests_get_422_with_valid_json(server, body):
    status, answer = server.request("POST", "/translate", body)  # parses the answer as JSON
    assert status == 422 and answer["detail"]
    assert server.request("POST", "/translate", {"text": "12"})[0] == 200  # still serving


DEEP = 10_000


@pytest.fixture(scope="module")
def task_servers(server, lm_run, classify_run):
    """A server for each endpoint: translation, generation (a language model), classification,
    and LibreTranslate's API (a model served for a language pair)."""
    fp32 = ServeSettings(precision="fp32")
    started = {"/translate": server}
    for path, run in (("/generate", lm_run), ("/classify", classify_run)):
        model, tokenizer, target, _ = load_trained(run)
        started[path] = Server(create_app(model, tokenizer, target, fp32))
    pair = load_run(server.run)
    served = [Served(pair.model, pair.src_tokenizer, pair.tgt_tokenizer, "en", "de")]
    started["libre"] = Server(create_app(settings=fp32, served=served))
    yield started
    for path in ("/generate", "/classify", "libre"):
        started[path].stop()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/translate", b'{"text": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
        ("/translate", b'{"text": "12", "x": ' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}"),
        ("/translate", b"[" * DEEP + b"]" * DEEP),
        ("/translate", b'{"texts": ' + b"[" * 100 + b"]" * 100 + b"}"),  # parses, still too deep
        (
            "/translate",
            b'{"q": ' + b"[" * DEEP + b"]" * DEEP + b', "source": "de", "target": "en"}',
        ),
        ("/translate", b'{"text": "12", "beam_size": 99999999999999999999}'),
        ("/translate", b'{"text": "12", "max_length": 99999999999999999999}'),
        ("/translate", b'{"text": "12", "beam_size": 300}'),
        ("/classify", b'{"text": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
        ("/generate", b'{"prompt": "", "x": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
        ("/generate", b'{"prompt": "", "seed": 99999999999999999999999999999}'),
        ("/generate", b'{"prompt": "", "max_new_tokens": 99999999999999999999}'),
        ("/generate", b'{"prompt": "", "top_k": 99999999999999999999}'),
        ("libre", b'{"q": ' + b"[" * DEEP + b"]" * DEEP + b', "source": "en", "target": "de"}'),
        ("libre", b'{"q": "12", "source": "en", "target": "de", "alternatives": 1e400}'),
        ("libre", b'{"q": "12", "source": "en", "target": "de", "alternatives": -1e400}'),
        (
            "libre",
            b'{"q": "12", "source": "en", "target": "de", "alternatives": 99999999999999999999}',
        ),
        ("libre", b'{"text": "12", "target": "de", "beam_size": 99999999999999999999}'),
        ("libre", b'{"q": "12", "source": ["en"], "target": "de"}'),
        ("libre", b'{"q": "12", "source": {"a": 1}, "target": "de"}'),
        ("libre", b'{"q": "12", "source": "en", "target": ["de"]}'),
        ("libre", b'{"q": "12", "source": "en", "target": "de", "format": ["html"]}'),
    ],
)
def test_deep_bodies_and_huge_numbers_are_refused_not_500(task_servers, path, body):
    server, path = task_servers[path], "/translate" if path == "libre" else path
    status, answer = server.request("POST", path, body)  # parses the answer as JSON
    assert status in (400, 422) and (answer.get("detail") or answer.get("error")), (status, answer)
    body = {"/translate": {"text": "12"}, "/classify": {"text": "a"}}.get(path, {"prompt": ""})
    if server is task_servers["libre"]:
        body = {"q": "12", "source": "en", "target": "de"}
    assert server.request("POST", path, body)[0] == 200  # still serving


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"timeout_s": -1.0}, "timeout_s must be > 0"),
        ({"max_texts": 0}, "max_texts must be >= 1"),
        ({"beam_size": 9}, "over max_beam_size"),
        ({"max_chars": True}, "max_chars must be int"),
    ],
)
def test_impossible_server_settings_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        ServeSettings(**change)


def test_serve_flags_out_of_range_are_one_line(numbers_run, capsys):
    with pytest.raises(SystemExit) as stop:  # argparse's own check
        cli(capsys, "serve", "--checkpoint", str(numbers_run), "--port", "70000")
    assert stop.value.code == 2 and "--port" in capsys.readouterr().err
    for flag, value in (("--timeout", "-1"), ("--beam-size", "9"), ("--alpha", "-1")):
        code, out, err = cli(capsys, "serve", "--checkpoint", str(numbers_run), flag, value)
        assert code == 2 and err.startswith(f"error: {flag}: invalid ") and "serving" not in out


def test_a_port_in_use_is_an_error_before_serving(numbers_run, capsys):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ServeError, match=f"cannot listen on 127.0.0.1:{port}"):
            listen("127.0.0.1", port)
        code, out, err = cli(capsys, "serve", "--checkpoint", str(numbers_run), "--port", str(port))
        assert code == 2 and "serving" not in out and "cannot listen" in err
    finally:
        taken.close()


@pytest.mark.parametrize("source", [["en"], {"a": 1}, 12])
def test_attention_with_a_source_of_the_wrong_type_is_400(task_servers, source):
    server = task_servers["libre"]
    status, answer = server.request(
        "POST", "/attention", {"q": "12", "source": source, "target": "de"}
    )
    assert status == 400 and "source must be a string" in answer["error"], answer
    assert (
        server.request("POST", "/attention", {"q": "12", "source": "en", "target": "de"})[0] == 200
    )


# 4. Round 3's features: run directories with links, config files, corpus readers, run files.


def outside_file(tmp_path, content=b"OUTSIDE"):
    target = tmp_path / "outside.bin"
    target.write_bytes(content)
    return target


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


TU = '<tu><tuv xml:lang="de"><seg>{}</seg></tuv><tuv xml:lang="en"><seg>{}</seg></tuv></tu>'


def tmx(units, declaration='<?xml version="1.0" encoding="UTF-8"?>', attribute=""):
    return (
        f'{declaration}<tmx version="1.4"><header srclang="de"{attribute}/><body>'
        + "".join(TU.format(de, en) for de, en in units)
        + "</body></tmx>"
    )


def po(msgid, msgstr):
    return f'msgid "{msgid}"\nmsgstr "{msgstr}"\n'


def deep_catalogs(tmp_path):
    deep = tmp_path / "cats"
    os.makedirs(deep / "/".join(["d"] * 70))
    return deep


def big_msgid_lines(tmp_path):
    return (
        'msgid ""\n' + '"' + "x" * 99 + '"\n' * 1 + ('"' + "x" * 99 + '"\n') * 700 + 'msgstr "y"\n'
    )


HOSTILE_FILES = [
    ("long.tmx", tmx([("a" * 300_000, "b")]), "longer than"),
    ("attribute.tmx", tmx([("a", "b")], attribute=' x="' + "y" * 300_000 + '"'), "longer than"),
    ("deep.tmx", tmx([("<hi>" * 100_000 + "x" + "</hi>" * 100_000, "b")]), "nested deeper"),
    (
        "unknown.tmx",
        tmx([("a", "b")], '<?xml version="1.0" encoding="no-such-code"?>'),
        "unknown encoding 'no-such-code'",
    ),
    (
        "latin.tmx",
        tmx([("Käse", "cheese")], '<?xml version="1.0" encoding="ISO-8859-1"?>'),
        "declares the encoding iso8859-1 but its bytes are UTF-8",
    ),
    ("long.po", po("a" * 300_000, "b"), "longer than"),
    ("lines.po", "LINES", "msgid longer than"),
    ("x.po", po("a\\x", "b"), "bad escape \\x in"),
    ("nul.po", po("a", "b\\0c"), "a NUL character"),
    ("nul.jsonl", '{"src": "a", "tgt": "b\\u0000"}\n', "a NUL character"),
    ("half.jsonl", '{"src": "a", "tgt": "\\ud800"}\n', "surrogate"),
    ("digits.jsonl", '{"src": ' + "1" * 5000 + ', "tgt": "b"}\n', "not a JSON object"),
    ("zero.po", "/dev/zero", "not a regular file"),
    ("zero.mo", "/dev/zero", "not a regular file"),
    ("idna.mo", "IDNA", "not a text encoding"),
    ("cats", "DEEP", "nested deeper than 64"),
]


@pytest.mark.parametrize(("name", "content", "message"), HOSTILE_FILES)
def test_hostile_corpus_files_are_one_line(tmp_path, capsys, name, content, message):
    from data.test_gettext import write_mo

    path = tmp_path / name
    if content == "DEEP":
        path = deep_catalogs(tmp_path)
        write_mo(path / "/".join(["d"] * 70) / "x.mo", {"a": "b"})
    elif content == "IDNA":
        write_mo(path, {"a": "b"}, charset="idna")
    elif content == "LINES":
        path.write_text(big_msgid_lines(tmp_path))
    elif content.startswith("/dev/"):
        path.symlink_to(content)
    else:
        path.write_text(content, encoding="utf-8")
    args = [
        "prepare",
        str(path),
        "--out",
        str(tmp_path / "out"),
        "--tgt-lang",
        "en",
        "--max-line-bytes",
        "65536",
        *(["--format", "mo"] if name == "cats" else []),
    ]
    code, _, err = cli(capsys, *args)
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_skip_invalid_drops_and_counts_nul_surrogates_and_huge_numbers(tmp_path):
    from collections import Counter

    from vaswani.data.formats import ReadOptions, read_file

    path = tmp_path / "x.jsonl"
    lines = [
        '{"src": "a", "tgt": "b\\u0000"}',
        '{"src": "\\udfff", "tgt": "b"}',
        '{"src": ' + "9" * 5000 + ', "tgt": "b"}',
        '{"src": "gut", "tgt": "good"}',
    ]
    path.write_text("\n".join(lines) + "\n")
    dropped = Counter()
    pairs = list(read_file(path, "jsonl", ReadOptions(skip_invalid=True), dropped))
    assert pairs == [("gut", "good")] and sum(dropped.values()) == 3


def test_every_format_is_read_through_gzip(tmp_path):
    from collections import Counter

    from data.test_gettext import write_mo
    from vaswani.data.formats import ReadOptions, read_file

    files = {"x.tmx": tmx([("Haus", "house")]), "x.po": po("house", "Haus")}
    for name, text in files.items():
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(text.encode()))
    write_mo(tmp_path / "m.mo", {"house": "Haus"})
    (tmp_path / "x.mo.gz").write_bytes(gzip.compress((tmp_path / "m.mo").read_bytes()))
    xlf = (
        '<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0"><file><unit id="1">'
        "<segment><source>house</source><target>Haus</target></segment></unit></file></xliff>"
    )
    (tmp_path / "x.xlf.gz").write_bytes(gzip.compress(xlf.encode()))
    opts = ReadOptions(src_lang="de", tgt_lang="en")
    for name, fmt in (
        ("x.tmx.gz", "tmx"),
        ("x.po.gz", "po"),
        ("x.mo.gz", "mo"),
        ("x.xlf.gz", "xliff"),
    ):
        found = list(read_file(tmp_path / name, fmt, opts, Counter()))
        assert found in ([("Haus", "house")], [("house", "Haus")]), (name, found)


def test_xliff_2_units_are_released_as_they_are_read(tmp_path):
    import tracemalloc
    from collections import Counter

    from vaswani.data.formats.xml import read_xliff

    unit = (
        '<unit id="u"><notes><note>' + "n" * 2000 + "</note></notes><segment><source>a"
        "</source><target>b</target></segment></unit>"
    )
    path = tmp_path / "big.xlf"
    path.write_text(
        '<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0"><file>'
        + unit * 5000
        + "</file></xliff>"
    )
    tracemalloc.start()
    count = sum(1 for _ in read_xliff(path, Counter()))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count == 5000 and peak < 3_000_000, peak  # the notes alone are 10 MB


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


# --- Whole files (`vaswani translate --input FILE`): damaged and hostile files of every format --

HOSTILE = {
    "bomb.docx": zip_bomb,
    "truncated.docx": lambda p: p.write_bytes(docx("<w:p/>")[:200]),
    "xxe.docx": lambda p: p.write_bytes(
        zipped(
            {
                "word/document.xml": '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM '
                '"file:///etc/passwd">]><d>&x;</d>'
            }
        )
    ),
    "entities.xlf": lambda p: p.write_text(
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
        '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"/>'
    ),
    "bad.po": lambda p: p.write_text('msgid "a\\q\nmsgstr ""\n'),
    "broken.srt": lambda p: p.write_text("1\n00:00:01,000 --> garbage\nHello\n"),
    "unclosed.html": lambda p: p.write_text("<p>Hello <b>world <i>and more</p>"),
    "latin1.md": lambda p: p.write_bytes("Grüße".encode("latin-1")),
    "huge-paragraph.html": lambda p: p.write_text("<p>" + "word " * 250_000 + "</p>"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_damaged_and_hostile_documents_are_one_clear_error_and_nothing_is_written(
    numbers_run, capsys, tmp_path, name
):
    source, target = tmp_path / name, tmp_path / f"out-{name}"
    HOSTILE[name](source)
    files = ["--input", str(source), "--output", str(target)]
    code, out, err = translate_cli(capsys, numbers_run, *files)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and str(source) in err
    assert not target.exists()
