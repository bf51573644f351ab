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
