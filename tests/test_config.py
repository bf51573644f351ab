import dataclasses

import pytest

from vaswani.config import PRESETS, ModelConfig


def test_presets_follow_the_paper_table_3():
    base = ModelConfig.from_preset("base")
    assert (base.d_model, base.d_ff, base.n_heads, base.n_encoder_layers, base.dropout) == (
        512,
        2048,
        8,
        6,
        0.1,
    )
    big = ModelConfig.from_preset("big")
    assert (big.d_model, big.d_ff, big.n_heads, big.n_decoder_layers, big.dropout) == (
        1024,
        4096,
        16,
        6,
        0.3,
    )
    assert base.head_dim == 64 and big.head_dim == 64


def test_paper_defaults():
    cfg = ModelConfig()
    assert cfg.positions == "sinusoidal"
    assert cfg.norm == "post"
    assert cfg.activation == "relu"
    assert cfg.tie_embeddings == "all"
    assert cfg.scale_embeddings is True


def test_from_preset_applies_overrides_and_keeps_the_rest():
    cfg = ModelConfig.from_preset("small", d_model=128, norm="pre")
    assert cfg.d_model == 128 and cfg.norm == "pre"
    assert cfg.d_ff == PRESETS["small"].d_ff


def test_unknown_preset_names_the_choices():
    with pytest.raises(
        ValueError, match="unknown preset 'huge'.*tiny, micro, mini, small, base, big"
    ):
        ModelConfig.from_preset("huge")


def test_config_is_frozen():
    cfg = ModelConfig.from_preset("tiny")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 64


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"d_model": 30, "n_heads": 4}, "d_model=30 is not divisible by n_heads=4"),
        ({"positions": "rotary"}, "positions='rotary'; choose one of sinusoidal, learned"),
        ({"norm": "sandwich"}, "norm='sandwich'"),
        ({"activation": "swish"}, "activation='swish'"),
        ({"tie_embeddings": "encoder"}, "tie_embeddings='encoder'"),
        ({"tgt_vocab_size": 200}, "tie_embeddings='all' needs one shared vocabulary"),
        ({"pad_id": 128}, r"pad_id=128 must be a token id in \[0, 128\)"),
        ({"eos_id": -1}, "eos_id=-1"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\)"),
        ({"d_model": 0}, "d_model must be a positive int"),
        ({"n_decoder_layers": -1}, "n_decoder_layers must be an int >= 0"),
        ({"layer_norm_eps": 0.0}, "layer_norm_eps must be > 0"),
    ],
)
def test_invalid_configs_say_what_to_change(overrides, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig.from_preset("tiny", **overrides)


def test_separate_vocabularies_with_decoder_tying():
    cfg = ModelConfig.from_preset("tiny", tgt_vocab_size=200, tie_embeddings="decoder")
    assert cfg.vocab_size == 128 and cfg.target_vocab_size == 200 and not cfg.shared_vocab


def test_dict_round_trip_and_unknown_keys():
    cfg = ModelConfig.from_preset("small", positions="learned")
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match=r"invalid ModelConfig: unknown field\(s\) d_modle"):
        ModelConfig.from_dict({**cfg.to_dict(), "d_modle": 3})


def test_train_config_fills_preset_settings_and_refuses_unknown_fields():
    from vaswani.config import PRESET_TRAINING, TrainConfig
    from vaswani.train.recipe import resolved

    tc = resolved(TrainConfig(data="d", out="o", preset="base", max_steps=10))
    assert (tc.warmup, tc.lr_scale, tc.batch_tokens) == (4000, 1.0, 4096)  # §5.3
    tc = resolved(
        TrainConfig(
            data="d", out="o", preset="small", warmup=300, max_steps=10, schedule="inverse-sqrt"
        )
    )
    assert tc.warmup == 300 and tc.lr_scale == PRESET_TRAINING["small"]["lr_scale"]
    # The schedules that know their end take warm-up and rate from the horizon (recipe.plan).
    tc = resolved(TrainConfig(data="d", out="o", preset="small", max_steps=10))
    assert (tc.schedule, tc.warmup, tc.lr_scale, tc.batch_tokens) == ("linear", None, None, 2048)
    assert TrainConfig.from_dict(tc.to_dict()) == tc
    with pytest.raises(ValueError, match=r"invalid ModelConfig: unknown field\(s\) d_modle"):
        TrainConfig(data="d", out="o", max_steps=1, model={"d_model": 64, "d_modle": 3})
    with pytest.raises(ValueError, match="give a budget"):
        TrainConfig(data="d", out="o")
    with pytest.raises(ValueError, match=r"invalid TrainConfig: unknown field\(s\) bogus"):
        TrainConfig.from_dict({**tc.to_dict(), "bogus": 1})
