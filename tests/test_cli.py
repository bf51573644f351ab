import subprocess
import sys

import pytest

from vaswani.cli import main


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out and "presets" in out


def test_demo_help_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # undo argparse's line wrapping
    assert "--steps" in out and "(default: 1000)" in out


def test_bad_flag_value_is_one_clear_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--steps", "0"])
    assert exit_info.value.code == 2
    assert "must be a whole number >= 1, got 0" in capsys.readouterr().err


def test_presets_prints_parameter_counts(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert "63.1M" in out and "214.2M" in out


def test_short_demo_runs_end_to_end_through_the_console_script(tmp_path):
    # The real entry point in a child process: training, greedy decoding, the report.
    result = subprocess.run(
        [sys.executable, "-m", "vaswani.cli", "demo", "--steps", "30", "--precision", "fp32"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "exact match on unseen strings:" in result.stdout
    assert "trained 30 steps" in result.stdout


def test_demo_fails_when_below_the_required_accuracy(capsys):
    assert main(["demo", "--steps", "2", "--min-accuracy", "0.99"]) == 1
    assert "below the target" in capsys.readouterr().err
