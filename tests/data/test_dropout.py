"""Subword dropout: segmentations the vocabulary spells, reproducible, training only."""

import json
import random

import numpy as np
import pytest
import torch

from vaswani import checkpoint as ckpt
from vaswani.config import TrainConfig
from vaswani.data import PreparedData
from vaswani.data.dropout import SubwordDropout, merge_parts, split_tokens
from vaswani.train.loop import evaluate, train


def test_split_ids_spell_the_same_text(numbers_data):
    data = PreparedData(numbers_data)
    tokenizer, split = data.src_tokenizer, data.split("train")
    parts = merge_parts(tokenizer)
    assert (parts[:260] == -1).all()  # specials and bytes are not merges
    rng = random.Random(0)
    changed = 0
    for i in range(200):
        for ids in split.pair(i):
            dropped = np.asarray(split_tokens(ids, parts, 0.5, rng, limit=1000))
            assert tokenizer.decode(dropped.tolist()) == tokenizer.decode(ids.tolist())
            assert len(dropped) >= len(ids)
            changed += len(dropped) > len(ids)
    assert changed > 50
    assert split_tokens(ids, parts, 0.0, rng, 1000) == ids.tolist()


def test_dropout_is_a_function_of_seed_update_and_pair(numbers_data):
    data = PreparedData(numbers_data)
    parts = {"src": merge_parts(data.src_tokenizer)}
    parts["tgt"] = parts["src"]
    one, two = (SubwordDropout(data.split("train"), parts, 0.3, 7, 1000) for _ in range(2))
    pairs = [(s.tolist(), t.tolist()) for s, t in (one.at(5).pair(i) for i in range(50))]
    assert pairs == [(s.tolist(), t.tolist()) for s, t in (two.at(5).pair(i) for i in range(50))]
    later = [(s.tolist(), t.tolist()) for s, t in (one.at(6).pair(i) for i in range(50))]
    assert later != pairs
    # Never longer than the limit.
    src = data.split("train").pair(0)[0]
    assert len(split_tokens(src, parts["src"], 0.99, np.random.default_rng(1), len(src))) == len(
        src
    )


def test_validation_never_sees_subword_dropout(numbers_data, tmp_path):
    run = tmp_path / "run"
    tc = TrainConfig(
        data=str(numbers_data),
        out=str(run),
        preset="tiny",
        precision="fp32",
        batch_tokens=512,
        max_steps=6,
        eval_every=6,
        eval_sentences=4,
        bpe_dropout=0.5,
        ema_decay=0.0,
        schedule="linear",
    )
    train(tc, progress=False)
    recorded = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    logged = [r["valid_loss"] for r in recorded if "valid_loss" in r][-1]
    from vaswani.run import load_trained
    from vaswani.train.recipe import resolved

    model = load_trained(run, "latest")[0]
    again = evaluate(model, PreparedData(numbers_data), resolved(tc), torch.device("cpu"))
    assert again["valid_loss"] == pytest.approx(logged, rel=1e-6)
    plan = json.loads((run / "recipe.json").read_text())["plan"]
    assert plan["bpe_dropout"] == 0.5
    assert ckpt.latest_valid(run / "checkpoints") is not None


def test_each_token_decides_once(numbers_data):
    """With p = 0.1 about 90% of merged tokens stay whole, however many share the sentence."""
    parts = merge_parts(PreparedData(numbers_data).src_tokenizer)
    token = int(np.flatnonzero(parts[:, 0] >= 0)[-1])  # a merged token
    rng = random.Random(0)
    kept = [split_tokens([token] * 50, parts, 0.1, rng, 10_000).count(token) for _ in range(200)]
    assert 0.87 < sum(kept) / (50 * 200) < 0.93
