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

from helpers import Server, cli
from vaswani.config import ModelConfig
from vaswani.data import PrepareOptions, prepare
from vaswani.data.corpora import DataError, read_lines
from vaswani.run import load_run, load_trained
from vaswani.serve import Served, ServeError, ServeSettings, create_app, listen
from vaswani.train import checkpoint as ckpt
from vaswani.train.loop import resume_config, train


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
        (["translate", "--checkpoint", "RUN", "--output", "TMP/no/such/out.txt", "1"],
         "no/such does not exist"),
        (["evaluate", "--checkpoint", "RUN", "--output", "TMP"], "is a directory"),
        (["prepare", "numbers-de", "--out", "FILE"], "is not a directory"),
        (["prepare", "numbers-de", "--out", "TMP/v", "--vocab-size", "1000000000"], "--vocab-size"),
        (["prepare", "TMP/bad.gz", "--out", "TMP/g"], "cannot read past line"),
        (["prepare", "TMP/truncated.gz", "--out", "TMP/t"], "cannot read past line"),
        (["train", "--data", "DATA", "--out", "TMP/r", "--max-steps", "1", "--model", "d_model=1000000000"],
         "d_model=1000000000 is above"),
    ],
)  # fmt: skip
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
)  # fmt: skip
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
)  # fmt: skip
def test_the_command_line_checks_limits_before_allocating(numbers_run, capsys, args, message):
    code, _, err = cli(capsys, args[0], "--checkpoint", str(numbers_run), *args[1:])
    assert code == 2 and message in err.splitlines()[-1] and "Traceback" not in err, err


def test_a_line_limit_beyond_memory_is_refused_before_reading(numbers_run, capsys):
    with pytest.raises(SystemExit) as stop:  # argparse's own check of the flag
        cli(capsys, "translate", "--checkpoint", str(numbers_run), "--input", "/dev/zero",
            "--max-line-bytes", str(1 << 40))  # fmt: skip
    assert stop.value.code == 2 and "--max-line-bytes: must be in 1 .. 67108864" in (
        capsys.readouterr().err
    )
    with pytest.raises(DataError, match="--max-line-bytes 1099511627776: must be in"):
        next(read_lines("/dev/zero", max_line_bytes=1 << 40))  # the readers check it too


def test_a_beam_wider_than_the_vocabulary_is_refused():
    from vaswani.config import DecodeConfig
    from vaswani.decode import BeamTooWide, translate_nbest
    from vaswani.model import Transformer

    model = Transformer(ModelConfig(vocab_size=40, d_model=16, n_heads=2, d_ff=32,
                                    n_encoder_layers=1, n_decoder_layers=1))  # fmt: skip
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
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
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
        ("/translate", b'{"q": ' + b"[" * DEEP + b"]" * DEEP + b', "source": "de", "target": "en"}'),
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
        ("libre", b'{"q": "12", "source": "en", "target": "de", "alternatives": 99999999999999999999}'),
        ("libre", b'{"text": "12", "target": "de", "beam_size": 99999999999999999999}'),
    ],
)  # fmt: skip
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
