import math

import pytest
import torch

from vaswani import loss as loss_module
from vaswani.loss import label_smoothed_cross_entropy, linear_cross_entropy, mean_loss


def test_label_smoothing_matches_a_hand_computed_value():
    # One token, vocabulary of 4, target class 2, eps = 0.1: the target distribution is
    # 0.9 on class 2 plus 0.1 / 4 on every class (PyTorch's and fairseq's definition).
    logits = torch.tensor([[[1.0, 2.0, 3.0, 0.5]]])
    log_z = math.log(sum(math.exp(x) for x in (1.0, 2.0, 3.0, 0.5)))
    log_p = [x - log_z for x in (1.0, 2.0, 3.0, 0.5)]
    expected = -(0.9 * log_p[2] + sum(0.1 / 4 * lp for lp in log_p))
    loss, n = label_smoothed_cross_entropy(logits, torch.tensor([[2]]), pad_id=0, smoothing=0.1)
    assert n.item() == 1
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_padding_is_ignored_and_the_mean_is_over_real_tokens():
    logits = torch.randn(2, 3, 5)
    target = torch.tensor([[1, 2, 0], [3, 0, 0]])
    loss, n = label_smoothed_cross_entropy(logits, target, pad_id=0, smoothing=0.0)
    by_hand = -sum(
        torch.log_softmax(logits[b, t], -1)[target[b, t]] for b, t in ((0, 0), (0, 1), (1, 0))
    )
    assert n.item() == 3
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-6)
    assert mean_loss(loss, n).item() == pytest.approx(by_hand.item() / 3, rel=1e-6)


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("vocab", [7, 300])
def test_fused_output_loss_equals_the_projection_then_the_loss(bias, smoothing, vocab, monkeypatch):
    """The training step's output layer + loss, computed chunk by chunk without the logits, gives
    the loss and the gradients of the plain path: padding rows ignored (and given no gradient), a
    row whose target probability underflows to 0 scored exactly, more rows than one chunk."""
    monkeypatch.setattr(loss_module, "CPU_ROWS", 16)  # several chunks, and a short last one
    torch.manual_seed(0)
    projection = torch.nn.Linear(8, vocab, bias=bias)
    if bias:
        torch.nn.init.normal_(projection.bias)
    hidden = torch.randn(3, 25, 8)
    hidden[1, 2] *= 500  # logits in the thousands: some target probability underflows
    target = torch.randint(1, vocab, (3, 25))
    target[0, 20:] = target[2, 3] = 0
    params = [hidden.requires_grad_(), *projection.parameters()]

    plain, n_plain = label_smoothed_cross_entropy(projection(hidden), target, 0, smoothing)
    expected = torch.autograd.grad(plain * 2.5, params)  # a scaled loss: backward multiplies
    fused, n_fused = linear_cross_entropy(hidden, projection, target, 0, smoothing)
    found = torch.autograd.grad(fused * 2.5, params)

    assert n_fused.item() == n_plain.item() == 3 * 25 - 6
    assert fused.item() == pytest.approx(plain.item(), rel=1e-6)
    assert torch.isfinite(fused)
    for got, want in zip(found, expected, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert relative_error(got, want) < 1e-5
    assert not found[0][0, 20:].any() and not found[0][2, 3].any()  # padding: no gradient


def test_fused_output_loss_in_a_model_with_tied_embeddings():
    """Through `Transformer.forward(head=LossHead)`: the tied embedding/projection weight gets
    the sum of both gradients, as with logits."""
    from vaswani import ModelConfig, Transformer
    from vaswani.loss import LossHead

    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny"))
    model.eval()  # no dropout: both passes see the same network
    assert model.output_projection.weight is model.decoder.embed.token.weight
    src, tgt = torch.randint(3, 128, (4, 9)), torch.randint(3, 128, (4, 7))
    tgt[0, 4:] = 0
    plain, _ = label_smoothed_cross_entropy(model(src, tgt[:, :-1]), tgt[:, 1:], 0)
    expected = torch.autograd.grad(plain, list(model.parameters()))
    head = LossHead(model.output_projection, tgt[:, 1:], 0, 0.1)
    fused, _ = model(src, tgt[:, :-1], head=head)
    found = torch.autograd.grad(fused, list(model.parameters()))
    assert fused.item() == pytest.approx(plain.item(), rel=1e-6)
    assert max(relative_error(a, b) for a, b in zip(found, expected, strict=True)) < 1e-5
