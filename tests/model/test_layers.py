import pytest
import torch

from vaswani.model.layers import Dropout


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_dropout_drops_the_right_share_and_keeps_the_expectation(p):
    x = torch.ones(1000, 1000)
    out = Dropout(p).train()(x)
    dropped = (out == 0).float().mean().item()
    assert dropped == pytest.approx(p, abs=0.003)
    assert out.mean().item() == pytest.approx(1.0, abs=0.01)
    assert torch.all((out == 0) | torch.isclose(out, torch.tensor(1 / (1 - p))))


def test_dropout_is_identity_in_eval_and_reproducible_from_the_seed():
    x = torch.randn(64, 33, dtype=torch.bfloat16)
    layer = Dropout(0.1)
    assert layer.eval()(x) is x
    layer.train()
    torch.manual_seed(5)
    a = layer(x)
    torch.manual_seed(5)
    assert torch.equal(a, layer(x))
    assert a.dtype == torch.bfloat16 and a.shape == x.shape


def test_dropout_gradient_uses_the_same_mask():
    x = torch.randn(200, 50, requires_grad=True)
    out = Dropout(0.5).train()(x)
    out.sum().backward()
    torch.testing.assert_close(x.grad, (out != 0).float() * 2.0)
