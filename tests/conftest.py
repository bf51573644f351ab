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
