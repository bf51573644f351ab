import pytest
import torch

from vaswani.config import ModelConfig


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def tiny() -> ModelConfig:
    """The tiny preset without dropout, so train and eval mode agree."""
    return ModelConfig.from_preset("tiny", dropout=0.0)


@pytest.fixture(scope="session")
def numbers_data(tmp_path_factory):
    """A small prepared numbers-de dataset shared by the tests that train."""
    from vaswani.data import PrepareOptions, prepare

    out = tmp_path_factory.mktemp("data") / "numbers"
    prepare(["numbers-de"], out, PrepareOptions(vocab_size=300, numbers_size=3000, progress=False))
    return out


@pytest.fixture(scope="session")
def numbers_run(numbers_data, tmp_path_factory):
    """A run directory of a small model trained on `numbers_data` well enough to translate most
    held-out numbers (about 15 s on 2 CPU cores)."""
    from vaswani.config import TrainConfig
    from vaswani.train.loop import train

    out = tmp_path_factory.mktemp("runs") / "numbers"
    tc = TrainConfig(
        data=str(numbers_data),
        out=str(out),
        preset="tiny",
        model={"d_model": 64, "d_ff": 256},
        max_tokens=1024,
        warmup=200,
        lr_scale=2.0,
        max_steps=600,
        eval_every=600,
        eval_sentences=50,
        save_every=600,
    )
    train(tc, progress=False)
    return out
