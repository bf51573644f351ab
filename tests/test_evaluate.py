import subprocess
import sys

import pytest

from vaswani.config import TrainConfig
from vaswani.decoding.text import TextModel
from vaswani.evaluate import score
from vaswani.run import RunError, load_trained
from vaswani.train.loop import train


def test_score_gives_bleu_chrf_and_signatures():
    scores = score(["the cat sat on the mat"], ["the cat sat on the mat"])
    assert scores.bleu == pytest.approx(100.0) and scores.chrf == pytest.approx(100.0)
    assert "tok:13a" in scores.bleu_signature and "nrefs:1" in scores.bleu_signature
    assert score(["a b c d"], ["w x y z"]).bleu == pytest.approx(0.0)
    with pytest.raises(ValueError, match="1 hypotheses for 2 references"):
        score(["a"], ["a", "b"])


@pytest.fixture(scope="module")
def run(numbers_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "run"
    tc = TrainConfig(
        data=str(numbers_data),
        out=str(out),
        preset="tiny",
        warmup=20,
        batch_tokens=512,
        max_steps=40,
        eval_every=40,
        save_every=20,
        log_every=10,
    )
    train(tc, progress=False)
    return out


def test_load_trained_gives_a_model_and_tokenizers(run):
    model, src_tok, tgt_tok, info = load_trained(run)
    assert not model.training and model.cfg.vocab_size == src_tok.vocab_size
    assert info["meta"]["corpus"]["name"] == "numbers-de"
    with pytest.raises(RunError, match="no averaged/ weights"):
        load_trained(run, "averaged")
    with pytest.raises(RunError, match="not a complete run directory"):
        load_trained(run / "checkpoints")


def test_evaluate_cli_prints_scores_signature_and_speed(run, tmp_path):
    out = tmp_path / "hyp.txt"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vaswani.cli",
            "evaluate",
            "--checkpoint",
            str(run),
            "--split",
            "test",
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "BLEU = " in result.stdout and "version:2." in result.stdout
    assert "sentences/s" in result.stdout
    n_test = load_trained(run)[3]["meta"]["splits"]["test"]["pairs"]
    assert len(out.read_bytes().decode().split("\n")) == n_test + 1  # one line per sentence


def test_the_python_api_scores_what_the_model_translates(numbers_run):
    from vaswani.config import DecodeConfig
    from vaswani.decoding.text import translate
    from vaswani.evaluate import EvaluationError, evaluate_translation
    from vaswani.translation.engine import load_run

    loaded = load_run(numbers_run)
    sources = ["42", "1999", "271493"]
    own = translate(
        TextModel(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer), sources, DecodeConfig()
    )
    references = [own[0], own[1], "falsch"]
    report = evaluate_translation(loaded, sources, references)
    assert report.hypotheses == own and report.exact == 2
    assert report.exact_fraction == pytest.approx(2 / 3)
    assert report.scores.chrf < 100 and report.output_tokens > len(sources)
    with pytest.raises(EvaluationError, match="nothing to evaluate"):
        evaluate_translation(loaded, [], [])
