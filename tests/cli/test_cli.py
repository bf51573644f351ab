import subprocess
import sys

import pytest

from vaswani.cli import COMMANDS, main
from vaswani.demo import MARKER, claim_directory


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out and "presets" in out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_explains_itself(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0 and "usage: vaswani" in capsys.readouterr().out


def test_demo_help_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # undo argparse's line wrapping
    assert "--steps" in out and "(default 2000 and, with --multilingual, 3000)" in out


def test_bad_flag_value_is_one_clear_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--steps", "0"])
    assert exit_info.value.code == 2
    assert "must be a whole number >= 1, got 0" in capsys.readouterr().err


def test_presets_prints_parameter_counts(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert "63.1M" in out and "214.2M" in out


@pytest.mark.slow
def test_short_demo_runs_end_to_end_through_the_console_script(tmp_path):
    # The real entry point in a child process: prepare, train, evaluate, translate, plot.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vaswani.cli",
            "demo",
            "--steps",
            "30",
            "--precision",
            "fp32",
            "--min-accuracy",
            "0",
            "--numbers",
            "1000",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "trained 30 steps" in result.stdout
    assert "held-out test numbers: exact match" in result.stdout and "tok:char" in result.stdout
    for name in ("run/config.json", "data/meta.json", "attention-cross.png", "training.png"):
        assert (tmp_path / "demo" / name).is_file()


def test_demo_fails_when_below_the_required_accuracy(tmp_path, capsys):
    small = ["--numbers", "1000"]  # 10 test numbers: an untrained model decodes slowly
    assert main(["demo", "--steps", "2", "--out", str(tmp_path / "d"), *small]) == 1
    assert "below the target 99.0%" in capsys.readouterr().err
    # Again: the demo replaces what it made before (and only that; see the next test).
    claim_directory(tmp_path / "d")
    assert [p.name for p in (tmp_path / "d").iterdir()] == [MARKER]


def test_demo_never_replaces_a_directory_it_did_not_make(tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.txt").write_text("precious")
    assert main(["demo", "--steps", "2", "--out", str(tmp_path / "mine")]) == 2
    assert "was not made by the demo" in capsys.readouterr().err
    assert (tmp_path / "mine" / "thesis.txt").read_text() == "precious"


def test_settings_flags_are_made_from_the_dataclass_fields_and_their_docstrings():
    from vaswani.cli import build_parser
    from vaswani.cli.fields import field_docs
    from vaswani.config import TrainConfig

    parser = build_parser()
    train = parser._subparsers._group_actions[0].choices["train"]
    helps = {action.dest: action.help for action in train._actions}
    docs = field_docs(TrainConfig)
    assert docs["clip_norm"].startswith("Gradient clipping by global norm")
    for name in ("clip_norm", "warmup", "nan_policy", "eval_every"):
        assert helps[name].startswith(docs[name]), name
    assert {a.dest: a.choices for a in train._actions}["precision"] == (
        "auto",
        "bf16",
        "fp16",
        "fp32",
    )


def test_serve_search_flags_reach_the_server_settings():
    from vaswani.cli import build_parser
    from vaswani.cli.serve import serve_settings

    args = build_parser().parse_args(
        [
            "serve",
            "--checkpoint",
            "r",
            "--alpha",
            "0.8",
            "--length-penalty",
            "plain",
            "--beam-size",
            "2",
            "--timeout",
            "5",
            "--no-batching",
        ]
    )
    settings = serve_settings(args)
    assert settings.decoding.alpha == 0.8 and settings.decoding.length_penalty == "plain"
    assert settings.beam_size == 2 and settings.timeout_s == 5.0
    assert settings.dynamic_batching is False


def test_library_errors_name_their_settings_and_the_command_line_names_flags():
    """The library's errors name a setting as a Python user sets it; the command line's one
    error boundary (`in_flags`) names the flag that sets it, and leaves other words alone."""
    from vaswani.cli import build_parser, flags_of, in_flags

    flags = flags_of(build_parser())
    said = {
        "accumulate=3 micro-batches cannot be shared evenly by 2 processes": (
            "--accumulate 3 micro-batches cannot be shared evenly by 2 processes"
        ),
        "quantization='int8' is for to='ctranslate2'": "--quantization int8 is for --to ctranslate2",
        "tensorboard=True needs the tensorboard package": "--tensorboard needs the tensorboard package",
        "prepare it with tokenizer_from='/runs/a b'": "prepare it with --tokenizer-from /runs/a b",
        "the position limit is max_len=64; train with the model setting max_len=80": (
            "the position limit is max_len=64; train with --model max_len=80"
        ),
        "give the target language (Request.target)": "give the target language (--target)",
        "pairs=... is for translation (task='translate')": (
            "--pair ... is for translation (--task translate)"
        ),
        "the weights entry a.tsv=0: give a weight above 0": "--weight a.tsv=0: give a weight above 0",
        "a=b and x==y stay": "a=b and x==y stay",
    }
    for library, command_line in said.items():
        assert in_flags(ValueError(library), flags) == command_line
