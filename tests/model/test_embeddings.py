import dataclasses
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


def test_word_dropout_zeroes_whole_tokens_in_training_only():
    cfg = dataclasses.replace(
        ModelConfig.from_preset("tiny"), word_dropout=0.25, dropout=0.0, positions="learned"
    )
    embed = Embeddings(cfg.vocab_size, cfg)
    torch.nn.init.zeros_(embed.learned.weight)  # the token part alone
    ids = torch.randint(3, cfg.vocab_size, (200, 50))
    plain = embed.token(ids) * embed.scale
    out = embed.train()(ids)
    dropped = (out == 0).all(dim=-1)  # (B, L): a token is dropped whole, or not at all
    assert ((out == 0).any(dim=-1) == dropped).all()
    assert dropped.float().mean().item() == pytest.approx(0.25, abs=0.01)
    torch.testing.assert_close(out[~dropped], plain[~dropped] / 0.75)  # the rest scaled up
    torch.testing.assert_close(embed.eval()(ids), plain)  # never at evaluation or inference
