"""`vaswani translate` and `vaswani evaluate` on a run directory written by `vaswani train`."""

import io
import json
import shutil
import subprocess
import sys

import pytest

from helpers import cli, translate_cli
from vaswani.config import DecodeConfig
from vaswani.decoding.text import TextModel, translate
from vaswani.run import load_trained

NUMBERS = ["271493", "", "500181", "   ", "566528", "42"]


def feed_stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))


def test_arguments_are_translated_in_order_with_empty_lines_kept(numbers_run, capsys):
    code, out, _ = cli(capsys, "translate", "--checkpoint", str(numbers_run), *NUMBERS)
    assert code == 0
    lines = out.split("\n")[:-1]
    assert len(lines) == len(NUMBERS)
    assert lines[1] == "" and lines[3] == ""
    model, src_tok, tgt_tok, _ = load_trained(numbers_run)
    assert lines == translate(TextModel(model, src_tok, tgt_tok), NUMBERS, DecodeConfig())
    assert lines[0] == "zweihunderteinundsiebzigtausendvierhundertdreiundneunzig"


def test_stdin_and_files_give_the_same_lines(numbers_run, capsys, monkeypatch, tmp_path):
    _, from_args, _ = cli(capsys, "translate", "--checkpoint", str(numbers_run), *NUMBERS)
    feed_stdin(monkeypatch, "\n".join(NUMBERS) + "\n")
    code, from_stdin, _ = cli(capsys, "translate", "--checkpoint", str(numbers_run))
    assert code == 0 and from_stdin == from_args
    source, target = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\r\n".join(NUMBERS))  # Windows line ends, no final newline
    code, _, err = cli(
        capsys,
        "translate",
        "--checkpoint",
        str(numbers_run),
        "--input",
        str(source),
        "--output",
        str(target),
    )
    assert code == 0 and f"translated 6 lines of {source}" in err
    assert target.read_text() == from_args


def test_n_best_lists_hypotheses_best_first(numbers_run, capsys):
    code, out, _ = cli(
        capsys, "translate", "--checkpoint", str(numbers_run), "--n-best", "3", "12345", "", "7"
    )
    assert code == 0
    rows = [line.split(" ||| ") for line in out.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "0", "2", "2", "2"]
    scores = [float(r[2]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)


def test_the_console_script_reads_a_pipe(numbers_run):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vaswani.cli",
            "translate",
            "--checkpoint",
            str(numbers_run),
            "--beam-size",
            "1",
        ],
        input="271493\n\n42\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""


def test_empty_input_is_an_error(numbers_run, capsys, monkeypatch, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    code, _, err = cli(capsys, "translate", "--checkpoint", str(numbers_run), "--input", str(empty))
    assert code == 2 and "empty.txt is empty: nothing to translate" in err
    feed_stdin(monkeypatch, "")
    code, _, err = cli(capsys, "translate", "--checkpoint", str(numbers_run))
    assert code == 2 and "stdin is empty" in err


def test_a_line_over_the_position_limit_is_refused_or_truncated_with_a_warning(
    numbers_run, capsys, tmp_path
):
    source = tmp_path / "long.txt"
    source.write_text("12\n" + "1" * 400 + "\n")
    args = ["translate", "--checkpoint", str(numbers_run), "--input", str(source)]
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == ""
    assert err.splitlines()[-1].startswith("error: line 2 has 401 tokens")
    assert "--too-long truncate" in err
    code, out, err = cli(capsys, *args, "--too-long", "truncate")
    assert code == 0 and len(out.splitlines()) == 2
    assert err.splitlines()[-1].startswith("warning: line 2 has 401 tokens")
    assert "first 127 tokens" in err


def test_a_huge_line_is_refused_by_the_byte_limit(numbers_run, capsys, tmp_path):
    source = tmp_path / "huge.txt"
    source.write_text("1" * 5000 + "\n")
    code, _, err = cli(
        capsys,
        "translate",
        "--checkpoint",
        str(numbers_run),
        "--input",
        str(source),
        "--max-line-bytes",
        "1000",
    )
    assert code == 2 and "huge.txt:1: line longer than 1000 bytes" in err


def broken_copy(run, tmp_path, change) -> str:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    change(copy)
    return str(copy)


def drop_config(run):
    (run / "config.json").unlink()


def unknown_field(run):
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "rotary": True}))


def other_shape(run):
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "d_ff": 128}))


def drop_tokenizer(run):
    (run / "tokenizer.json").unlink()


@pytest.mark.parametrize(
    "change, message",
    [
        (drop_config, "not a complete run directory (no config.json)"),
        (unknown_field, "incompatible version of vaswani"),
        (other_shape, "mis-shaped"),
        (drop_tokenizer, "incomplete run directory"),
    ],
)
def test_a_broken_run_directory_is_one_clear_error(numbers_run, capsys, tmp_path, change, message):
    run = broken_copy(numbers_run, tmp_path, change)
    code, _, err = cli(capsys, "translate", "--checkpoint", run, "12")
    assert code == 2 and message in err and len(err.splitlines()) == 1


def test_evaluate_prints_scores_with_signatures_and_speed(numbers_run, capsys, tmp_path):
    run = tmp_path / "run"  # evaluate records its figures (and --precision auto) in the run
    shutil.copytree(numbers_run, run)
    code, out, _ = cli(capsys, "evaluate", "--checkpoint", str(run), "--beam-size", "2")
    assert code == 0
    assert "BLEU = " in out and "nrefs:1|case:mixed" in out and "chrF = " in out
    assert "exact match: " in out
    assert "sentences/s" in out and "tokens/s (beam 2, alpha 0.6, fp32, cpu)" in out


def test_evaluate_reads_source_and_reference_files(numbers_run, capsys, tmp_path):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("271493\n500181\n")
    ref.write_text(
        "zweihunderteinundsiebzigtausendvierhundertdreiundneunzig\n"
        "fünfhunderttausendeinhunderteinundachtzig\n"
    )
    code, out, _ = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        str(numbers_run),
        "--src",
        str(src),
        "--ref",
        str(ref),
        "--beam-size",
        "1",
    )
    assert code == 0 and "2 sentences from" in out
    chrf = float(out.split("chrF = ")[1].split()[0])
    assert chrf > 50


def test_int8_weights_decode_in_fp32_where_auto_would_pick_bf16(capsys, numbers_run, monkeypatch):
    import dataclasses

    import vaswani.cli.common as common

    real_place = common.place

    def bf16_cpu(*args):  # what `auto` resolves to on a CPU with native bf16
        return dataclasses.replace(real_place(*args), precision="bf16", precision_reason="auto")

    monkeypatch.setattr(common, "place", bf16_cpu)
    code, out, err = translate_cli(capsys, numbers_run, "--quantize", "int8", "271493")
    assert code == 0, err
    assert "precision: fp32 (int8 weights compute in fp32)" in err and out.strip()
    code, _, err = translate_cli(
        capsys, numbers_run, "--quantize", "int8", "--precision", "bf16", "271493"
    )
    assert code == 2 and "leave out --precision bf16" in err


def test_code_in_a_line_reaches_the_output_once_through_a_real_model(numbers_run, capsys):
    line = "%s 42 {name} @V@ <b>7</b>"
    code, out, _ = translate_cli(
        capsys,
        numbers_run,
        "--precision",
        "fp32",
        "--protect",
        "@\\w+@",
        "--output-format",
        "jsonl",
        line,
    )
    assert code == 0
    record = json.loads(out)
    for piece in ("%s", "{name}", "@V@", "<b>", "</b>"):
        assert record["translation"].count(piece) == 1, record
    assert "unsafe" not in record
    _, plain, _ = translate_cli(capsys, numbers_run, "--precision", "fp32", "--no-protect", line)
    assert plain != record["translation"] + "\n"  # the model alone does not keep them


def test_protect_flags_that_cannot_work_are_one_line(numbers_run, capsys):
    code, _, err = translate_cli(capsys, numbers_run, "--protect", "(", "42")
    assert code == 2 and "--protect '('" in err and "not a regular expression" in err
    code, _, err = translate_cli(capsys, numbers_run, "--protect", "x", "--no-protect", "42")
    assert code == 2 and "--no-protect" in err
