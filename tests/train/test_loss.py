import math

import pytest
import torch

from vaswani.train.loss import label_smoothed_cross_entropy, mean_loss


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
