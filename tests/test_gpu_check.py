"""benchmarks/gpu_check.py works where no GPU is: `--device cpu` runs its checks and figures."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_check_runs_on_the_cpu_and_writes_its_figures(tmp_path):
    out = tmp_path / "gpu-check.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu_check.py"),
            "--device",
            "cpu",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert [c["result"] for c in report["checks"]] == ["passed"] * 6
    assert report["training"]["tokens_per_second"] > 0 and report["training"]["mfu"] is None
    assert [row["search"] for row in report["decoding"]] == ["greedy", "beam 4"]
    assert all(row["vaswani float32"] > 0 for row in report["decoding"])
