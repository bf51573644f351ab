import pytest
import torch
from torch import nn

from helpers import random_ids
from vaswani import DecoderOnly, EncoderOnly, ModelConfig, Transformer, new_cache
from vaswani.loss import mean_loss
from vaswani.model import causal_mask
from vaswani.train import label_smoothed_cross_entropy

VARIANTS = [
    {},
    {"norm": "pre"},
    {"positions": "learned"},
    {"activation": "gelu"},
    {"tie_embeddings": "none", "scale_embeddings": False},
]


def copy_into_torch_transformer(model: Transformer) -> nn.Transformer:
    """An nn.Transformer (post-norm, ReLU, no final stack norms) holding the same weights."""
    cfg = model.cfg
    kwargs = dict(
        d_model=cfg.d_model,
        nhead=cfg.n_heads,
        dim_feedforward=cfg.d_ff,
        dropout=0.0,
        activation="relu",
        layer_norm_eps=cfg.layer_norm_eps,
        batch_first=True,
    )
    ref = nn.Transformer(
        custom_encoder=nn.TransformerEncoder(
            nn.TransformerEncoderLayer(**kwargs), cfg.n_encoder_layers, enable_nested_tensor=False
        ),
        custom_decoder=nn.TransformerDecoder(
            nn.TransformerDecoderLayer(**kwargs), cfg.n_decoder_layers
        ),
        **kwargs,
    )

    def copy(dst: nn.Module, src: nn.Module) -> None:
        dst.weight.data.copy_(src.weight.data)
        dst.bias.data.copy_(src.bias.data)

    with torch.no_grad():
        for theirs, ours in zip(ref.encoder.layers, model.encoder.layers, strict=True):
            theirs.self_attn.in_proj_weight.copy_(ours.self_attn.qkv_proj.weight)
            theirs.self_attn.in_proj_bias.copy_(ours.self_attn.qkv_proj.bias)
            copy(theirs.self_attn.out_proj, ours.self_attn.out_proj)
            copy(theirs.linear1, ours.ffn.linear1)
            copy(theirs.linear2, ours.ffn.linear2)
            copy(theirs.norm1, ours.self_attn_norm.norm)
            copy(theirs.norm2, ours.ffn_norm.norm)
        for theirs, ours in zip(ref.decoder.layers, model.decoder.layers, strict=True):
            theirs.self_attn.in_proj_weight.copy_(ours.self_attn.qkv_proj.weight)
            theirs.self_attn.in_proj_bias.copy_(ours.self_attn.qkv_proj.bias)
            copy(theirs.self_attn.out_proj, ours.self_attn.out_proj)
            cross = ours.cross_attn
            theirs.multihead_attn.in_proj_weight.copy_(
                torch.cat([cross.q_proj.weight, cross.kv_proj.weight])
            )
            theirs.multihead_attn.in_proj_bias.copy_(
                torch.cat([cross.q_proj.bias, cross.kv_proj.bias])
            )
            copy(theirs.multihead_attn.out_proj, cross.out_proj)
            copy(theirs.linear1, ours.ffn.linear1)
            copy(theirs.linear2, ours.ffn.linear2)
            copy(theirs.norm1, ours.self_attn_norm.norm)
            copy(theirs.norm2, ours.cross_attn_norm.norm)
            copy(theirs.norm3, ours.ffn_norm.norm)
    return ref.eval()


def test_matches_torch_nn_transformer_with_the_same_weights(tiny):
    model = Transformer(tiny).eval()
    ref = copy_into_torch_transformer(model)
    src = random_ids(tiny, 3, 9)
    src[0, 6:] = tiny.pad_id
    src[2, 3:] = tiny.pad_id
    tgt = random_ids(tiny, 3, 7)
    pad = src == tiny.pad_id
    with torch.no_grad():
        out = ref(
            model.encoder.embed(src),
            model.decoder.embed(tgt),
            tgt_mask=~causal_mask(7)[0, 0],  # nn.Transformer: True = may NOT attend
            src_key_padding_mask=pad,
            memory_key_padding_mask=pad,
        )
        expected = model.output_projection(out)
        actual = model(src, tgt)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("overrides", VARIANTS)
def test_future_target_tokens_do_not_change_earlier_logits(overrides):
    cfg = ModelConfig.from_preset("tiny", dropout=0.0, **overrides)
    model = Transformer(cfg).eval()
    src, tgt = random_ids(cfg, 2, 6), random_ids(cfg, 2, 8)
    changed = tgt.clone()
    changed[:, 5:] = random_ids(cfg, 2, 3)
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("overrides", VARIANTS)
def test_extra_source_padding_changes_nothing(overrides):
    cfg = ModelConfig.from_preset("tiny", dropout=0.0, **overrides)
    model = Transformer(cfg).eval()
    src, tgt = random_ids(cfg, 2, 5), random_ids(cfg, 2, 4)
    padded = torch.cat([src, torch.full((2, 7), cfg.pad_id)], dim=1)
    with torch.no_grad():
        memory, _ = model.encode(src)
        memory_padded, _ = model.encode(padded)
        torch.testing.assert_close(memory_padded[:, :5], memory, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(model(padded, tgt), model(src, tgt), atol=1e-5, rtol=1e-5)


def test_values_at_padding_positions_change_nothing_at_real_positions():
    cfg = ModelConfig.from_preset("tiny", dropout=0.0, tie_embeddings="none")
    model = Transformer(cfg).eval()
    src, tgt = random_ids(cfg, 2, 6), random_ids(cfg, 2, 5)
    src[0, 3:] = cfg.pad_id
    tgt[1, 3:] = cfg.pad_id  # right-padded target
    with torch.no_grad():
        before = model(src, tgt)
        model.encoder.embed.token.weight[cfg.pad_id].normal_(0, 10)
        model.decoder.embed.token.weight[cfg.pad_id].normal_(0, 10)
        after = model(src, tgt)
    real = tgt != cfg.pad_id
    torch.testing.assert_close(after[real], before[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("overrides", VARIANTS)
def test_cached_decoding_equals_the_full_pass_step_by_step(overrides):
    cfg = ModelConfig.from_preset("tiny", dropout=0.0, **overrides)
    model = Transformer(cfg).eval()
    src, tgt = random_ids(cfg, 3, 7), random_ids(cfg, 3, 9)
    src[1, 4:] = cfg.pad_id
    with torch.no_grad():
        full = model(src, tgt)
        cache = new_cache(model, *model.encode(src))
        # A prefix of three tokens in one call, then one token per step.
        logits, cache = model.decode_step(tgt[:, :3], cache)
        steps = [logits]
        for t in range(3, 9):
            logits, cache = model.decode_step(tgt[:, t : t + 1], cache)
            steps.append(logits)
    assert cache.length == 9
    assert cache.self_keys_values(0)[0].shape == (3, cfg.n_heads, 9, cfg.head_dim)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_cache_reorder_follows_the_indices(tiny):
    model = Transformer(tiny).eval()
    src, tgt = random_ids(tiny, 3, 5), random_ids(tiny, 3, 4)
    with torch.no_grad():
        cache = new_cache(model, *model.encode(src))
        _, cache = model.decode_step(tgt[:, :3], cache)
        order = torch.tensor([2, 2, 0])
        reordered = cache.reorder(order)
        logits, _ = model.decode_step(tgt[order, 3:], reordered)
        expected = model(src[order], tgt[order])[:, 3:]
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)


def test_decoder_only_cached_generation_equals_the_full_pass():
    cfg = ModelConfig.from_preset("tiny", dropout=0.0, n_encoder_layers=0)
    model = DecoderOnly(cfg).eval()
    ids = random_ids(cfg, 2, 10)
    with torch.no_grad():
        full = model(ids)
        cache, steps = new_cache(model), []
        for t in range(10):
            logits, cache = model.decode_step(ids[:, t : t + 1], cache)
            steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert all(layer.cross_attn is None for layer in model.decoder.layers)


def test_encoder_only_gives_vocabulary_logits_and_ignores_padding():
    cfg = ModelConfig.from_preset("tiny", dropout=0.0)
    model = EncoderOnly(cfg).eval()
    ids = random_ids(cfg, 2, 6)
    padded = torch.cat([ids, torch.full((2, 3), cfg.pad_id)], dim=1)
    with torch.no_grad():
        logits = model(ids)
        assert logits.shape == (2, 6, cfg.vocab_size)
        torch.testing.assert_close(model(padded)[:, :6], logits, atol=1e-5, rtol=1e-5)


def test_tied_weights_are_one_tensor():
    shared = Transformer(ModelConfig.from_preset("tiny"))
    assert shared.output_projection.weight is shared.decoder.embed.token.weight
    assert shared.encoder.embed.token.weight is shared.decoder.embed.token.weight
    cfg = ModelConfig.from_preset("tiny", tgt_vocab_size=100, tie_embeddings="decoder")
    decoder_tied = Transformer(cfg)
    assert decoder_tied.output_projection.weight is decoder_tied.decoder.embed.token.weight
    assert decoder_tied.encoder.embed.token.weight.shape == (128, cfg.d_model)
    assert decoder_tied.output_projection.weight.shape == (100, cfg.d_model)
    untied = Transformer(ModelConfig.from_preset("tiny", tie_embeddings="none"))
    assert untied.output_projection.weight is not untied.decoder.embed.token.weight
    # Sharing is real: a gradient step through the output layer moves the source embedding too.
    before = shared.encoder.embed.token.weight.detach().clone()
    with torch.no_grad():
        shared.output_projection.weight.add_(1.0)
    assert torch.equal(shared.encoder.embed.token.weight, before + 1.0)


def expected_parameters(cfg: ModelConfig) -> int:
    """Closed-form parameter count of the paper's encoder-decoder with all weights tied."""
    d, f = cfg.d_model, cfg.d_ff
    attention = 4 * d * d + 4 * d
    ffn = 2 * d * f + f + d
    norm = 2 * d
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    embedding = cfg.vocab_size * d
    final_norms = 2 * norm if cfg.norm == "pre" else 0
    return (
        embedding
        + cfg.n_encoder_layers * encoder_layer
        + cfg.n_decoder_layers * decoder_layer
        + final_norms
    )


@pytest.mark.parametrize("preset", ["tiny", "small", "base", "big"])
def test_every_preset_builds_with_the_expected_parameter_count(preset):
    cfg = ModelConfig.from_preset(preset)
    with torch.device("meta"):
        model = Transformer(cfg)
    assert sum(p.numel() for p in model.parameters()) == expected_parameters(cfg)


def test_base_and_big_sizes_are_the_papers():
    with torch.device("meta"):
        base = sum(p.numel() for p in Transformer(ModelConfig.from_preset("base")).parameters())
        big = sum(p.numel() for p in Transformer(ModelConfig.from_preset("big")).parameters())
    # Table 3: 65M and 213M parameters (with a shared vocabulary of about 37k tokens).
    assert base == pytest.approx(65e6, rel=0.05)
    assert big == pytest.approx(213e6, rel=0.02)


def test_a_small_model_overfits_one_batch():
    cfg = ModelConfig.from_preset("tiny", dropout=0.0, vocab_size=32)
    model = Transformer(cfg)
    src, tgt = random_ids(cfg, 8, 6), random_ids(cfg, 8, 7)
    tgt[:, 0] = cfg.bos_id
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        loss = mean_loss(*label_smoothed_cross_entropy(model(src, tgt[:, :-1]), tgt[:, 1:], 0, 0.0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05


@pytest.mark.parametrize(
    ("src", "message"),
    [
        (torch.randint(4, 100, (1, 129)), "position 129.*position limit is max_len=128"),
        (torch.tensor([[5, 6, 500]]), r"token id 500, outside the vocabulary \[0, 128\)"),
        (torch.tensor([[5, -1]]), "token id -1"),
        (torch.tensor([5, 6, 7]), r"\(batch, length\) tensor"),
        (torch.tensor([[5.0, 6.0]]), "integer token ids"),
        (torch.zeros(2, 0, dtype=torch.long), "empty"),
    ],
)
def test_bad_source_raises_a_clear_value_error(tiny, src, message):
    with pytest.raises(ValueError, match=message):
        Transformer(tiny).encode(src)


def test_bad_target_raises_a_clear_value_error(tiny):
    with pytest.raises(ValueError, match=r"target holds token id 128, outside the vocabulary"):
        Transformer(tiny)(torch.tensor([[5, 6]]), torch.tensor([[1, 128]]))


def test_decoding_past_the_position_limit_is_refused():
    cfg = ModelConfig.from_preset("tiny", max_len=4)
    model = Transformer(cfg).eval()
    cache = new_cache(model, *model.encode(torch.tensor([[5, 6]])))
    _, cache = model.decode_step(torch.tensor([[1, 5, 6, 7]]), cache)
    with pytest.raises(ValueError, match="position 5.*max_len=4"):
        model.decode_step(torch.tensor([[8]]), cache)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fully_masked_rows_give_finite_outputs_and_gradients(dtype):
    cfg = ModelConfig.from_preset("tiny", dropout=0.0)
    model = Transformer(cfg)
    src = random_ids(cfg, 3, 5)
    src[1] = cfg.pad_id  # an empty source sentence: nothing for its queries to attend to
    tgt = random_ids(cfg, 3, 4)
    tgt[2, 1:] = cfg.pad_id
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        logits = model(src, tgt)
    assert torch.isfinite(logits).all()
    loss = mean_loss(*label_smoothed_cross_entropy(logits, tgt, cfg.pad_id))
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_loss_over_zero_tokens_is_zero_not_nan():
    logits = torch.randn(2, 3, 10, requires_grad=True)
    target = torch.zeros(2, 3, dtype=torch.long)
    loss = mean_loss(*label_smoothed_cross_entropy(logits, target, pad_id=0))
    loss.backward()
    assert loss.item() == 0.0 and torch.isfinite(logits.grad).all()


def test_bf16_autocast_stays_close_to_fp32(tiny):
    model = Transformer(tiny).eval()
    src, tgt = random_ids(tiny, 2, 6), random_ids(tiny, 2, 5)
    src[0, 4:] = tiny.pad_id
    with torch.no_grad():
        fp32 = model(src, tgt)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = model(src, tgt)
    assert bf16.dtype == torch.bfloat16
    torch.testing.assert_close(bf16.float(), fp32, atol=0.1, rtol=0.05)


def test_attention_maps_cover_every_layer_and_are_distributions(tiny):
    model = Transformer(tiny).eval()
    src, tgt = random_ids(tiny, 1, 6), random_ids(tiny, 1, 4)
    src[0, 5] = tiny.pad_id
    maps = model.attention_maps(src, tgt)
    assert len(maps.encoder) == len(maps.decoder_self) == len(maps.cross) == 2
    assert maps.encoder[0].shape == (1, tiny.n_heads, 6, 6)
    assert maps.cross[1].shape == (1, tiny.n_heads, 4, 6)
    for weights in maps.encoder + maps.decoder_self + maps.cross:
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert torch.all(maps.cross[0][..., 5] == 0)  # the padding key gets no attention
    assert torch.all(maps.decoder_self[0][0, :, 0, 1:] == 0)  # nor do future tokens


def test_a_beam_cache_matches_one_row_per_beam_and_keeps_beams_in_their_sentence(tiny):
    model = Transformer(tiny).eval()
    src, k = random_ids(tiny, 2, 5), 3
    steps = random_ids(tiny, 2 * k, 4)
    order = torch.tensor([2, 0, 0, 4, 5, 3])  # beams trade places within each sentence
    with torch.no_grad():
        memory, mask = model.encode(src)
        shared = new_cache(model, memory, mask, capacity=8, beams=k)
        rows = new_cache(model, memory, mask, capacity=8).reorder(
            torch.arange(2).repeat_interleave(k)
        )
        for t in range(4):
            a, shared = model.decode_step(steps[:, t : t + 1], shared)
            b, rows = model.decode_step(steps[:, t : t + 1], rows)
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
            shared, rows = shared.reorder(order, same_sources=True), rows.reorder(order)
    with pytest.raises(ValueError, match="within their own sentence"):
        shared.reorder(torch.tensor([0, 1, 3, 3, 4, 5]))
