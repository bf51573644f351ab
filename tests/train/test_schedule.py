import pytest

from vaswani.train import noam_lr


def test_schedule_is_the_papers_formula():
    d_model, warmup = 512, 4000
    for step in (1, 100, 3999, 4000, 4001, 100_000):
        expected = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert noam_lr(step, d_model, warmup) == pytest.approx(expected)


def test_schedule_rises_linearly_then_decays_and_peaks_at_warmup():
    rates = [noam_lr(s, 256, warmup=100) for s in range(1, 1000)]
    peak = max(range(len(rates)), key=rates.__getitem__) + 1
    assert peak == 100
    assert rates[49] == pytest.approx(rates[0] * 50)  # linear warm-up
    assert rates[399] == pytest.approx(rates[99] * (100 / 400) ** 0.5)  # inverse square root


def test_scale_and_step_zero():
    assert noam_lr(10, 256, 100, scale=2.0) == pytest.approx(2 * noam_lr(10, 256, 100))
    assert noam_lr(0, 256, 100) == noam_lr(1, 256, 100) > 0
    with pytest.raises(ValueError, match="warmup must be >= 1"):
        noam_lr(5, 256, 0)
