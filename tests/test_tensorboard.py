"""`train --tensorboard`: events read back with TensorBoard's own reader."""

import json
import subprocess
import sys

import pytest

from helpers import cli

pytest.importorskip("tensorboard")


def scalars(run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    return events


# One layer of one head: the attention pictures are one panel each (drawing is most of the time).
ARGS = [
    "--preset",
    "tiny",
    "--model",
    "d_model=32",
    "--model",
    "d_ff=64",
    "--model",
    "n_heads=1",
    "--model",
    "n_encoder_layers=1",
    "--model",
    "n_decoder_layers=1",
    "--batch-tokens",
    "512",
    "--eval-every",
    "8",
    "--save-every",
    "4",
    "--log-every",
    "2",
    "--eval-sentences",
    "8",
    "--precision",
    "fp32",
    "--ema-decay",
    "0",
    "--tensorboard",
]


def test_scalars_at_their_steps_and_no_duplicates_after_resume(numbers_data, tmp_path, capsys):
    run = tmp_path / "run"
    code, _, err = cli(
        capsys, "train", "--data", str(numbers_data), "--out", str(run), "--max-steps", "8", *ARGS
    )
    assert code == 0, err
    events = scalars(run)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in metrics if "loss" in r]
    assert [e.step for e in events.Scalars("train/loss")] == [r["step"] for r in logged]
    assert [e.value for e in events.Scalars("train/lr")] == pytest.approx([r["lr"] for r in logged])
    valid = [r for r in metrics if "valid_chrf" in r]
    chrf = events.Scalars("valid/chrf")
    assert [e.step for e in chrf] == [r["step"] for r in valid] == [8]
    assert [e.value for e in chrf] == pytest.approx([r["valid_chrf"] for r in valid])
    assert {"train/grad_norm", "train/tokens_per_s", "valid/loss", "valid/bleu"} <= set(
        events.Tags()["scalars"]
    )
    assert {"attention/encoder", "attention/cross"} <= set(events.Tags()["images"])
    assert [e.step for e in events.Images("attention/cross")] == [8]
    # A run killed after it logged step 8 but resumed from its step-4 checkpoint writes steps 5..8
    # again: TensorBoard must show each once.
    checkpoints = sorted((run / "checkpoints").glob("step-*"))
    for late in checkpoints[1:]:
        subprocess.run(["rm", "-rf", str(late)], check=True)
    (run / "checkpoints" / "latest").unlink(missing_ok=True)
    code, _, err = cli(capsys, "train", "--resume", str(run), "--max-steps", "8")
    assert code == 0, err
    events = scalars(run)
    assert [e.step for e in events.Scalars("train/loss")] == [2, 4, 6, 8]
    assert [e.step for e in events.Scalars("valid/chrf")] == [8]
    assert [e.step for e in events.Images("attention/cross")] == [8]


def test_without_tensorboard_installed_it_is_one_line_and_nothing_starts(numbers_data, tmp_path):
    script = (
        "import sys; sys.modules['tensorboard'] = None\n"
        "from vaswani.cli import main\n"
        f"sys.exit(main(['train', '--data', {str(numbers_data)!r}, '--out', "
        f"{str(tmp_path / 'run')!r}, '--max-steps', '2', '--tensorboard']))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 2 and "pip install 'vaswani[tensorboard]'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_tensorboard_draws_the_first_and_the_last_layer(numbers_data):
    from vaswani.config import ModelConfig
    from vaswani.data import PreparedData
    from vaswani.decoding.text import TextModel
    from vaswani.plot import attention_figures
    from vaswani.tasks import TRANSLATE

    data = PreparedData(numbers_data)
    cfg = ModelConfig.from_preset(
        "tiny",
        vocab_size=data.src_tokenizer.vocab_size,
        n_heads=2,
        n_encoder_layers=3,
        n_decoder_layers=3,
        max_len=16,
    )
    model = TRANSLATE.build_model(cfg).eval()
    tm = TextModel(model, data.src_tokenizer, data.tgt_tokenizer)
    figures = attention_figures(tm, "123", first_and_last=True)
    titles = [ax.get_title() for ax in figures["cross"].axes if ax.get_title()]
    assert titles == ["layer 1, head 1", "layer 1, head 2", "layer 3, head 1", "layer 3, head 2"]
