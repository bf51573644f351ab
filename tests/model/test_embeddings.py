import math

import pytest
import torch

from vaswani.config import ModelConfig
from vaswani.model import Embeddings, sinusoidal_encoding


@pytest.mark.parametrize("d_model", [16, 7])
def test_sinusoidal_encoding_is_the_papers_formula(d_model):
    table = sinusoidal_encoding(50, d_model)
    assert table.shape == (50, d_model)
    for pos in range(50):
        for col in range(d_model):
            i = col // 2  # index of the (sin, cos) pair
            angle = pos / 10000 ** (2 * i / d_model)
            expected = math.sin(angle) if col % 2 == 0 else math.cos(angle)
            assert table[pos, col].item() == pytest.approx(expected, abs=1e-6)


def test_embeddings_scale_tokens_and_add_positions():
    cfg = ModelConfig.from_preset("tiny", dropout=0.0)
    embed = Embeddings(cfg.vocab_size, cfg)
    ids = torch.tensor([[5, 6, 7]])
    expected = embed.token.weight[ids] * math.sqrt(cfg.d_model) + sinusoidal_encoding(
        3, cfg.d_model
    )
    torch.testing.assert_close(embed(ids), expected)
    # With an offset, positions continue from there (step-by-step decoding).
    expected_offset = (
        embed.token.weight[ids] * math.sqrt(cfg.d_model)
        + sinusoidal_encoding(13, cfg.d_model)[10:13]
    )
    torch.testing.assert_close(embed(ids, offset=10), expected_offset)


def test_unscaled_embeddings_switch():
    cfg = ModelConfig.from_preset("tiny", dropout=0.0, scale_embeddings=False)
    embed = Embeddings(cfg.vocab_size, cfg)
    ids = torch.tensor([[5]])
    torch.testing.assert_close(embed(ids)[0, 0], embed.token.weight[5] + embed.sinusoid[0])


def test_learned_positions_are_parameters_sized_by_max_len():
    cfg = ModelConfig.from_preset("tiny", positions="learned", max_len=40)
    embed = Embeddings(cfg.vocab_size, cfg)
    assert embed.learned.weight.shape == (40, cfg.d_model)
    assert embed.learned.weight.requires_grad
    assert "sinusoid" not in dict(embed.named_buffers())


def test_sinusoidal_table_is_not_saved_in_checkpoints():
    cfg = ModelConfig.from_preset("tiny")
    assert not any("sinusoid" in key for key in Embeddings(10, cfg).state_dict())
