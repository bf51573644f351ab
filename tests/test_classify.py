"""Encoder-only sequence classification end to end: sentiment-en, prepare/train --task classify,
classify, accuracy and the confusion matrix in evaluate, POST /classify."""

import json
import re

import pytest
import torch

from conftest import train_classifier
from helpers import Server, cli
from vaswani.config import ModelConfig
from vaswani.data import PreparedData, PrepareOptions
from vaswani.data.builtin import _LIKE, _POSITIVE, sentiment_en
from vaswani.data.corpora import DataError
from vaswani.decoding.text import classify
from vaswani.model import EncoderClassifier
from vaswani.prepare import prepare
from vaswani.run import load_trained
from vaswani.serve import ServeSettings, create_app
from vaswani.translation.engine import Engine


def test_sentiment_en_negation_flips_the_label():
    pairs = list(sentiment_en(500, seed=1))
    assert pairs == list(sentiment_en(500, seed=1))
    labels = [label for _, label in pairs]
    assert 0.4 < labels.count("positive") / len(labels) < 0.6
    for text, label in pairs:
        words = text.split()
        positive_words = any(w in _POSITIVE or w in _LIKE or w in _LIKE.values() for w in words)
        negated = "not" in words
        assert label == ("positive" if positive_words != negated else "negative"), text
    assert any("not" in text.split() for text, _ in pairs)


def test_prepare_classify_from_a_tsv(tmp_path):
    rows = [
        f"text number {i} is {'fine' if i % 3 else 'bad'}\t{'ok' if i % 3 else 'bad'}"
        for i in range(60)
    ] + ["another text\tzzz"]
    (tmp_path / "c.tsv").write_text("\n".join(rows) + "\n")
    opts = PrepareOptions(task="classify", vocab_size=300, progress=False)
    meta = prepare([str(tmp_path / "c.tsv")], tmp_path / "d", opts)
    assert meta["task"] == "classify" and meta["tokenizer"]["vocab_size"]["tgt"] == 3
    data = PreparedData(tmp_path / "d")
    assert data.tgt_tokenizer.labels == ["bad", "ok", "zzz"]  # sorted, from every split
    split = data.split("train")
    labels = {split.pair(i)[1].tolist()[0] for i in range(len(split))}
    assert labels <= {0, 1, 2} and (split.tgt_lengths == 1).all()

    (tmp_path / "bad.tsv").write_text("one\ttwo\tthree\n")
    with pytest.raises(DataError, match=r"expected 2 tab-separated columns \(text, label\)"):
        prepare([str(tmp_path / "bad.tsv")], tmp_path / "e", opts)
    (tmp_path / "one.tsv").write_text("".join(f"text {i}\tsame\n" for i in range(20)))
    with pytest.raises(DataError, match="at least 2 labels"):
        prepare([str(tmp_path / "one.tsv")], tmp_path / "f", opts)


def test_the_classifier_learns_sentiment_above_95_percent(classify_data, classify_run):
    model, tokenizer, labels, _ = load_trained(classify_run)
    texts, references = PreparedData(classify_data).text("test")
    found = classify(model, tokenizer, labels.labels, texts)
    accuracy = sum(f.label == r for f, r in zip(found, references, strict=True)) / len(texts)
    assert accuracy > 0.95
    negated = [i for i, t in enumerate(texts) if "not" in t.split()]
    assert sum(found[i].label == references[i] for i in negated) / len(negated) > 0.9


def test_first_token_pooling_learns_too(classify_data, tmp_path):
    result = train_classifier(classify_data, tmp_path / "first", "first")
    assert result.best > 0.95


def test_evaluate_prints_accuracy_and_draws_the_confusion_matrix(
    classify_data, classify_run, tmp_path, capsys
):
    model, tokenizer, labels, _ = load_trained(classify_run)
    texts, references = PreparedData(classify_data).text("test")
    found = classify(model, tokenizer, labels.labels, texts)
    correct = sum(f.label == r for f, r in zip(found, references, strict=True))
    plot = tmp_path / "confusion.png"
    code, out, _ = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        str(classify_run),
        "--plot",
        str(plot),
        "--precision",
        "fp32",
    )
    assert code == 0
    assert f"({correct}/{len(texts)};" in out
    rows = re.findall(r"^  (negative|positive) +(\d+) +(\d+)$", out, re.MULTILINE)
    assert [r[0] for r in rows] == ["negative", "positive"]
    assert sum(int(n) for r in rows for n in r[1:]) == len(texts)
    assert int(rows[0][1]) + int(rows[1][2]) == correct
    assert plot.stat().st_size > 1000


def test_evaluate_on_a_tsv_file(classify_run, tmp_path, capsys):
    (tmp_path / "e.tsv").write_text("the film was good\tpositive\ni hated this book\tnegative\n")
    code, out, _ = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        str(classify_run),
        "--input",
        str(tmp_path / "e.tsv"),
        "--plot",
        str(tmp_path / "c.svg"),
    )
    assert code == 0 and "2 texts" in out and (tmp_path / "c.svg").is_file()
    (tmp_path / "x.tsv").write_text("the film was good\tneutral\n")
    code, _, err = cli(
        capsys, "evaluate", "--checkpoint", str(classify_run), "--input", str(tmp_path / "x.tsv")
    )
    assert code == 2 and "unknown label(s) 'neutral'" in err and "negative, positive" in err


def test_classify_cli_keeps_one_line_per_input(classify_run, capsys):
    code, out, _ = cli(
        capsys,
        "classify",
        "--checkpoint",
        str(classify_run),
        "the film was wonderful",
        "",
        "i did not enjoy this meal",
    )
    lines = out.split("\n")
    assert code == 0 and lines[1] == "" and len(lines) == 4
    assert lines[0].startswith("positive\t") and lines[2].startswith("negative\t")
    assert 0.5 < float(lines[0].split("\t")[1]) <= 1.0


def test_a_text_is_classified_the_same_alone_and_in_a_padded_batch(classify_run):
    model, tokenizer, labels, _ = load_trained(classify_run)
    texts = ["a good film", "i did not like this very long and quite boring museum , honestly"]
    together = classify(model, tokenizer, labels.labels, texts)
    alone = classify(model, tokenizer, labels.labels, texts[:1])
    for label in labels.labels:
        assert together[0].probabilities[label] == pytest.approx(
            alone[0].probabilities[label], abs=1e-5
        )


@pytest.mark.parametrize("pooling", ["mean", "first"])
def test_padding_never_changes_the_pooled_vector(pooling):
    cfg = ModelConfig.from_preset("tiny", n_labels=3, pooling=pooling, dropout=0.0)
    model = EncoderClassifier(cfg).eval()
    ids = torch.randint(4, cfg.vocab_size, (1, 7))
    padded = torch.cat([ids, torch.full((1, 5), cfg.pad_id)], dim=1)
    torch.testing.assert_close(model.pool(ids), model.pool(padded))
    assert model(ids).shape == (1, 3)


def test_a_classifier_needs_two_labels_and_a_known_pooling():
    with pytest.raises(ValueError, match="n_labels >= 2"):
        EncoderClassifier(ModelConfig.from_preset("tiny"))
    with pytest.raises(ValueError, match="pooling='max'; choose one of mean, first"):
        ModelConfig.from_preset("tiny", n_labels=2, pooling="max")


@pytest.fixture(scope="module")
def classify_server(classify_run):
    model, tokenizer, labels, _ = load_trained(classify_run)
    settings = ServeSettings(precision="fp32", max_texts=3, max_chars=100)
    server = Server(create_app(Engine(model, tokenizer, labels), settings))
    yield server, model, tokenizer, labels
    server.stop()


def test_classify_endpoint_equals_the_python_api(classify_server):
    server, model, tokenizer, labels = classify_server
    assert server.request("GET", "/health")[1]["task"] == "classify"
    texts = ["the meal was great", "  ", "i hated this song"]
    status, body = server.request("POST", "/classify", {"texts": texts})
    assert status == 200, body
    expected = classify(model, tokenizer, labels.labels, texts)
    assert body["labels"][1] is None
    for got, want in ((body["labels"][0], expected[0]), (body["labels"][2], expected[2])):
        assert got["label"] == want.label
        assert got["probability"] == pytest.approx(want.probability, abs=1e-6)
        assert set(got["probabilities"]) == {"negative", "positive"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"texts": ["a"] * 4}, "4 texts, over the limit of 3"),
        ({"text": "a" * 101}, "over the limit of 100 characters"),
        ({"text": "a", "texts": ["b"]}, "give exactly one of"),
        ({"text": 5}, "string"),
    ],
)
def test_classify_endpoint_limits(classify_server, body, message):
    server = classify_server[0]
    status, answer = server.request("POST", "/classify", body)
    assert status == 422 and message in json.dumps(answer)
    assert server.request("POST", "/classify", {"text": "a fun game"})[0] == 200
    assert server.request("POST", "/generate", {"prompt": "a"})[0] == 404
