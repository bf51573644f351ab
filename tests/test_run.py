"""The run directory: one place for its layout, loading for inference, no process-wide effects."""

import subprocess
import sys
import warnings

import pytest

from vaswani import load_run
from vaswani import run as run_dir
from vaswani.cli.common import warnings_as_lines


def test_loading_a_run_for_inference_imports_no_training_and_no_pyplot():
    code = (
        "import sys, matplotlib, vaswani.run, vaswani.serve, vaswani.plot, vaswani.cli\n"
        "assert 'vaswani.train.loop' not in sys.modules, 'inference imported the training loop'\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'importing vaswani chose a backend'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_load_run_gives_an_engine(numbers_run):
    loaded = load_run(numbers_run, weights="latest")
    assert loaded.task.name == "translate" and loaded.path == numbers_run
    assert loaded.config == loaded.model.cfg and not loaded.model.training
    assert loaded.src_tokenizer.vocab_size == loaded.config.vocab_size
    with pytest.raises(run_dir.RunError, match="choose best, latest or averaged"):
        load_run(numbers_run, weights="newest")


def test_the_warning_hook_is_restored():
    before = warnings.showwarning
    with warnings_as_lines():
        assert warnings.showwarning is not before
    assert warnings.showwarning is before
