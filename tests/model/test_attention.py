from functools import partial

import pytest
import torch
import torch.nn.functional as F

from vaswani.config import ModelConfig
from vaswani.decoding.cache import KVCache
from vaswani.kernels import CPU_EAGER_MAX_KEYS, CPU_EAGER_MAX_KEYS_FLOAT32, eager_attention, sdpa
from vaswani.model import CrossAttention, SelfAttention, causal_mask, padding_mask


def test_fast_and_slow_paths_agree_and_weights_respect_the_mask():
    cfg = ModelConfig.from_preset("tiny", dropout=0.0)
    attn = SelfAttention(cfg).eval()
    x = torch.randn(2, 5, cfg.d_model)
    ids = torch.tensor([[7, 8, 9, 0, 0], [7, 8, 9, 10, 11]])
    mask = padding_mask(ids, pad_id=0) & causal_mask(5)  # (2, 1, 5, 5)
    fast, no_weights, _ = attn(x, mask)
    slow, weights, _ = attn(x, mask, need_weights=True)
    assert no_weights is None
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    assert weights.shape == (2, cfg.n_heads, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, cfg.n_heads, 5))
    assert torch.all(weights.masked_select(~mask.expand_as(weights)) == 0)


def test_self_attention_with_past_equals_attending_over_everything():
    cfg = ModelConfig.from_preset("tiny", dropout=0.0)
    attn = SelfAttention(cfg).eval()
    x = torch.randn(2, 6, cfg.d_model)
    full, _, (k, v) = attn(x, causal_mask(6))
    _, _, past = attn(x[:, :4], causal_mask(4))

    def keep(k_new, v_new):  # the simplest state: the past and the new positions side by side
        both = (torch.cat([past[0], k_new], dim=2), torch.cat([past[1], v_new], dim=2))
        return both, both

    last, _, (k2, v2) = attn(x[:, 4:], causal_mask(2, past=4), keep)
    torch.testing.assert_close(last, full[:, 4:], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(k2, k)
    torch.testing.assert_close(v2, v)


def test_key_value_buffers_are_written_in_place_while_they_have_room():
    cfg = ModelConfig.from_preset("tiny", dropout=0.0)
    attn = SelfAttention(cfg).eval()
    x = torch.randn(2, 5, cfg.d_model)
    with torch.no_grad():
        full, _, (k, v) = attn(x, causal_mask(5))
        outs, cache = [], KVCache(self_kv=[None], capacity=5)
        for t in range(5):
            out, _, kept = attn(x[:, t : t + 1], None, partial(cache.keep, 0))
            cache = cache.advanced([kept], 1)
            outs.append(out)
            if t == 0:
                first = kept[0]
    assert first.shape == (2, cfg.n_heads, 5, cfg.head_dim)
    assert cache.self_kv[0][0] is first  # room reserved once, then filled in place
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(cache.self_keys_values(0)[0], k)
    torch.testing.assert_close(cache.self_keys_values(0)[1], v)


def test_cross_attention_has_its_own_projections():
    cfg = ModelConfig.from_preset("tiny")
    cross = CrossAttention(cfg)
    names = {name for name, _ in cross.named_parameters()}
    assert {"q_proj.weight", "kv_proj.weight", "out_proj.weight"} <= names
    assert cross.kv_proj.weight.shape == (2 * cfg.d_model, cfg.d_model)


def test_padding_mask_lets_an_all_padding_row_attend_somewhere():
    ids = torch.tensor([[5, 6, 0], [0, 0, 0]])
    mask = padding_mask(ids, pad_id=0)
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == torch.bool
    assert mask[0, 0, 0].tolist() == [True, True, False]
    assert mask[1, 0, 0].tolist() == [True, True, True]


def test_causal_mask_aligns_to_the_bottom_right_when_there_is_a_past():
    mask = causal_mask(2, past=3)
    assert mask.shape == (1, 1, 2, 5)
    assert mask[0, 0].tolist() == [[True] * 4 + [False], [True] * 5]


def test_slow_path_in_bf16_with_boolean_mask_is_finite():
    cfg = ModelConfig.from_preset("tiny", dropout=0.0)
    attn = SelfAttention(cfg).to(torch.bfloat16)
    x = (torch.randn(2, 4, cfg.d_model) * 50).to(torch.bfloat16)
    mask = padding_mask(torch.tensor([[5, 0, 0, 0], [0, 0, 0, 0]]), pad_id=0)
    out, weights, _ = attn(x, mask, need_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()


def test_cpu_training_computes_attention_step_by_step_over_short_keys_only():
    """The kernel choice by what was measured (vaswani.kernels): training on a CPU runs the
    products and the softmax as separate operations up to CPU_EAGER_MAX_KEYS keys in bf16 and
    CPU_EAGER_MAX_KEYS_FLOAT32 in float32; longer keys and decoding leave it to PyTorch."""

    def keys(n: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(2, 4, n, 16, dtype=dtype)

    for dtype, limit in (
        (torch.bfloat16, CPU_EAGER_MAX_KEYS),
        (torch.float32, CPU_EAGER_MAX_KEYS_FLOAT32),
    ):
        q = keys(8, dtype)
        assert eager_attention(q, keys(limit, dtype))
        assert not eager_attention(q, keys(limit + 1, dtype))
        with torch.no_grad():
            assert not eager_attention(q, q)


def test_bf16_attention_step_by_step_matches_pytorchs_kernel_in_float32():
    """bf16 attention on the CPU training path (scores, softmax and output in bf16) gives the
    values and gradients of PyTorch's float32 kernel within bf16 rounding, under a padding and
    causal mask; masked keys get no gradient."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 4, 9, 16) for _ in range(3))
    ids = torch.tensor([[5] * 9, [5] * 4 + [0] * 5, [5] * 2 + [0] * 7])
    mask = padding_mask(ids, pad_id=0) & causal_mask(9)
    grads = []
    for dtype in (torch.float32, torch.bfloat16):
        inputs = [x.to(dtype, copy=True).requires_grad_() for x in (q, k, v)]
        if dtype == torch.float32:
            out = F.scaled_dot_product_attention(*inputs, attn_mask=mask)
        else:
            assert eager_attention(inputs[0], inputs[1])
            out = sdpa(*inputs, mask, 0.0)
        assert out.dtype == dtype
        out.float().square().sum().backward()
        grads.append([out.float()] + [x.grad.float() for x in inputs])
    for full, half in zip(*grads, strict=True):
        torch.testing.assert_close(half, full, rtol=0.05, atol=0.05)
    assert grads[1][2][1, :, 4:].abs().max() == 0  # keys of padding


@pytest.mark.parametrize("length", [7, CPU_EAGER_MAX_KEYS_FLOAT32 + 6])
def test_float32_training_matches_the_step_by_step_path(length):
    """Values and gradients of float32 self-attention in training, computed step by step over
    short keys and on PyTorch's kernel over long ones, equal those of the need_weights path
    within float32 rounding, padding masked."""
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=32, n_heads=4, d_ff=64, vocab_size=50)
    attention = SelfAttention(cfg).train()
    x = torch.randn(3, length, 32, requires_grad=True)
    ids = torch.full((3, length), 5)
    ids[1, 4:] = ids[2, 2:] = 0
    mask = padding_mask(ids, pad_id=0)
    fast, _, _ = attention(x, mask)
    (grad_fast,) = torch.autograd.grad(fast.square().sum(), x)
    slow, _, _ = attention(x, mask, need_weights=True)
    (grad_slow,) = torch.autograd.grad(slow.square().sum(), x)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad_fast, grad_slow, rtol=1e-4, atol=1e-5)
