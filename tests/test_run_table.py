"""`vaswani runs` (a table of runs) and `vaswani plot compare` (their curves in one picture)."""

import json

import pytest

from helpers import cli

STEPS = {"a": 4, "b": 8, "c": 6}


@pytest.fixture(scope="module")
def three_runs(numbers_data, tmp_path_factory):
    from vaswani.config import TrainConfig
    from vaswani.train.loop import train

    root = tmp_path_factory.mktemp("three")
    for name, steps in STEPS.items():
        tc = TrainConfig(
            data=str(numbers_data),
            out=str(root / name),
            preset="tiny",
            model={"d_model": 32, "d_ff": 64},
            batch_tokens=512,
            max_steps=steps,
            eval_every=steps,
            eval_sentences=8,
            precision="fp32",
            log_every=2,
            ema_decay=0.0,
        )
        train(tc, progress=False)
    return root


def test_runs_lists_each_run_with_its_figures_and_sorts(three_runs, capsys):
    code, _, err = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        str(three_runs / "b"),
        "--split",
        "test",
        "--precision",
        "fp32",
    )
    assert code == 0, err
    code, out, err = cli(capsys, "runs", str(three_runs), "--json", "--sort", "steps")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["steps"] for row in rows] == [8, 6, 4]
    for row in rows:
        metrics = (three_runs / row["run"].rsplit("/", 1)[1] / "metrics.jsonl").read_text()
        chrf = [
            json.loads(line)["valid_chrf"] for line in metrics.splitlines() if "valid_chrf" in line
        ]
        assert row["valid_chrf"] == max(chrf) and row["model"] == "tiny"
        assert row["data"] == "numbers-de" and row["precision"] == "fp32"
        assert "cores" in row["machine"] and row["parameters"] > 0
    evaluated = next(row for row in rows if row["run"].endswith("/b"))
    assert evaluated["test_chrf"] is not None and evaluated["test_bleu"] is not None
    assert all(row["test_chrf"] is None for row in rows if row is not evaluated)
    code, out, _ = cli(capsys, "runs", *(str(three_runs / n) for n in STEPS))
    lines = out.splitlines()
    assert code == 0 and len(lines) == 4 and "valid chrF" in lines[0] and "tiny" in lines[1]


def test_runs_refuses_what_is_not_a_run(tmp_path, capsys):
    code, _, err = cli(capsys, "runs", str(tmp_path))
    assert code == 2 and "no run directories" in err
    code, _, err = cli(capsys, "runs", str(tmp_path / "missing"))
    assert code == 2 and "not a run directory" in err


def test_plot_compare_draws_every_run(three_runs, tmp_path, capsys):
    for by in ("step", "minute"):
        out = tmp_path / f"compare-{by}.png"
        code, _, err = cli(
            capsys,
            "plot",
            "compare",
            *(str(three_runs / n) for n in STEPS),
            "--by",
            by,
            "--out",
            str(out),
        )
        assert code == 0 and out.stat().st_size > 10_000, err


def test_compare_draws_one_curve_per_run_per_panel(three_runs, tmp_path):
    from vaswani.plot import compare

    fig = compare([three_runs / n for n in STEPS], tmp_path / "c.svg", by="minute")
    assert [len(ax.lines) for ax in fig.axes] == [3, 3, 3]
    assert max(fig.axes[1].lines[1].get_xdata()) < 5  # minutes, not updates
