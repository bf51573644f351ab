"""Decoder-only language modelling end to end: grammar-en, prepare/train --task lm, generate,
perplexity in evaluate, POST /generate."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import Server, cli, free_port, losses
from vaswani.cli import main
from vaswani.config import Sampling, TrainConfig
from vaswani.data import PreparedData, PrepareOptions
from vaswani.data.builtin import grammar_en
from vaswani.data.corpora import DataError
from vaswani.decoding.sampling import sample
from vaswani.decoding.text import InputTooLong, generate
from vaswani.prepare import prepare
from vaswani.run import load_trained
from vaswani.serve import ServeSettings, create_app
from vaswani.tasks import LANGUAGE_MODEL, split_loss
from vaswani.train.loop import train
from vaswani.train.setup import resume_config
from vaswani.translation.engine import Engine

VENV_BIN = Path(sys.executable).parent


def evaluations(run: Path) -> list[dict]:
    records = map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
    return [r for r in records if "valid_loss" in r]


def test_grammar_en_is_reproducible_and_well_formed():
    first, again, other = (list(grammar_en(200, seed)) for seed in (3, 3, 4))
    assert first == again and first != other
    for src, text in first:
        assert src == ""  # a language model's example has no source side
        assert text[0].isupper() and text.endswith(" .")
    # Agreement: "these"/"many"/"two" subjects take the plural verb, e.g. never "these cats sees".
    assert not any(re.match(r"^(These|Many|Two) \w+ (sees|likes|sleeps)\b", t) for _, t in first)


def test_prepare_lm_keeps_the_text_on_the_target_side(lm_data):
    data = PreparedData(lm_data)
    assert data.task == "lm" and data.meta["corpus"]["name"] == "grammar-en"
    train_split = data.split("train")
    assert (train_split.src_lengths == 0).all() and (train_split.tgt_lengths > 3).all()
    assert data.src_tokenizer is data.tgt_tokenizer


def test_text_files_with_a_long_line_are_cut_into_pieces_not_dropped(tmp_path):
    long_line = " ".join(f"word{i}" for i in range(200))
    short = [f"the cat number {i} sleeps ." for i in range(40)]
    (tmp_path / "a.txt").write_text("\n".join([long_line, "", *short[:20]]) + "\n")
    (tmp_path / "b.txt").write_text("\n".join(short[20:]))
    opts = PrepareOptions(
        task="lm",
        vocab_size=300,
        max_example_len=32,
        progress=False,
        valid_fraction=0.0,
        test_fraction=0.0,
    )
    meta = prepare([str(tmp_path / "a.txt"), str(tmp_path / "b.txt")], tmp_path / "d", opts)
    assert meta["dropped_while_reading"] == {"empty line": 1}
    assert meta["splits"]["train"]["long_texts_cut"] == 1
    assert meta["splits"]["train"]["filtered_too_long"] == 0
    data = PreparedData(tmp_path / "d")
    split = data.split("train")
    pieces = [split.pair(i)[1].tolist() for i in range(len(split))]
    assert max(len(p) for p in pieces) <= 31  # room for the BOS / EOS the batch adds
    expected = data.tgt_tokenizer.encode(long_line)
    long_pieces = [p for p in pieces if len(p) == 31 or p == expected[-(len(expected) % 31) :]]
    assert sum(long_pieces, []) == expected
    assert len(split) == 40 + math.ceil(len(expected) / 31)


def test_corpus_of_another_task_is_refused(tmp_path):
    with pytest.raises(DataError, match="numbers-de is a corpus for task='translate', not lm"):
        prepare(["numbers-de"], tmp_path / "d", PrepareOptions(task="lm", progress=False))


def test_validation_loss_falls_far_below_the_untrained_model(lm_data, lm_run):
    data = PreparedData(lm_data)
    model, *_ = load_trained(lm_run)
    torch.manual_seed(0)
    untrained = LANGUAGE_MODEL.build_model(model.cfg)
    before, _ = split_loss(untrained, data.split("valid"), "lm", 4096, "fp32")
    after = evaluations(lm_run)
    assert before > 5.5  # about ln(500): the untrained model knows nothing
    assert after[-1]["valid_loss"] < 0.5 * before
    assert after[-1]["valid_loss"] < after[0]["valid_loss"]
    assert after[-1]["samples"] and isinstance(after[-1]["samples"][0], str)


def test_perplexity_is_exp_of_the_mean_token_loss(lm_data, lm_run, capsys):
    """Independently of the batched evaluation: each test text alone, token by token."""
    model, tokenizer, _, _ = load_trained(lm_run)
    cfg = model.cfg
    split = PreparedData(lm_data).split("test")
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(len(split)):
            ids = split.pair(i)[1].tolist()
            logits = model(torch.tensor([[cfg.bos_id, *ids]]))[0].float()
            targets = torch.tensor([*ids, cfg.eos_id])
            total -= logits.log_softmax(-1).gather(1, targets[:, None]).sum().item()
            count += len(targets)
    code, out, _ = cli(capsys, "evaluate", "--checkpoint", str(lm_run), "--precision", "fp32")
    assert code == 0
    assert f"{len(split)} texts ({count} tokens" in out
    printed = float(re.search(r"perplexity = ([\d.]+)", out).group(1))
    assert printed == pytest.approx(math.exp(total / count), rel=1e-4)


def test_perplexity_of_a_text_file(lm_run, tmp_path, capsys):
    (tmp_path / "t.txt").write_text("The cat sees the dog .\n\nTwo dogs sleep .\n")
    code, out, _ = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        str(lm_run),
        "--input",
        str(tmp_path / "t.txt"),
        "--precision",
        "fp32",
    )
    assert code == 0 and "2 texts" in out and "perplexity = " in out


def test_generation_with_a_seed_is_reproducible(lm_run):
    model, tokenizer, _, _ = load_trained(lm_run)
    prompts = ["The old", "", "Two robots", "A"]
    first = generate(model, tokenizer, prompts, Sampling(30, temperature=1.0, seed=7))
    again = generate(model, tokenizer, prompts, Sampling(30, temperature=1.0, seed=7))
    other = generate(model, tokenizer, prompts, Sampling(30, temperature=1.0, seed=8))
    assert first == again
    assert [g.text for g in first] != [g.text for g in other]
    assert [g.prompt for g in first] == prompts
    # A prompt's text does not depend on what else is generated with it.
    alone = generate(model, tokenizer, ["Two robots"], Sampling(30, temperature=1.0, seed=7 + 2))
    assert alone[0].text == first[2].text


@pytest.mark.parametrize(
    "settings",
    [
        {"temperature": 1.0},
        {"temperature": 0.8, "top_k": 20},
        {"temperature": 1.2, "top_p": 0.9},
        {"temperature": 0.0},
    ],
)
def test_cached_generation_equals_uncached(lm_run, settings):
    model, tokenizer, _, _ = load_trained(lm_run)
    prompts = [tokenizer.encode(p) for p in ["The big", "", "Many quiet birds follow"]]
    cached = sample(model, prompts, Sampling(40, seed=3, **settings), use_cache=True)
    uncached = sample(model, prompts, Sampling(40, seed=3, **settings), use_cache=False)
    for a, b in zip(cached, uncached, strict=True):
        assert a.tokens == b.tokens and a.finished == b.finished
        assert a.log_prob == pytest.approx(b.log_prob, abs=1e-3)
    assert any(h.finished for h in cached)  # the trained model ends its sentences


def test_a_prompt_over_the_position_limit_is_a_clear_error(lm_run):
    model, tokenizer, _, _ = load_trained(lm_run)
    with pytest.raises(InputTooLong, match="prompt 2 has .* tokens"):
        generate(model, tokenizer, ["The cat", "the dog " * 200], Sampling(5))


def test_generate_cli(lm_run, numbers_run, capsys):
    args = [
        "generate",
        "--checkpoint",
        str(lm_run),
        "--prompt",
        "The cat",
        "--prompt",
        "Two",
        "--num-samples",
        "2",
        "--max-new-tokens",
        "20",
        "--seed",
        "5",
        "--precision",
        "fp32",
    ]
    code, out, err = cli(capsys, *args)
    lines = out.splitlines()  # a sample may hold any byte, yet each is printed on one line
    assert code == 0 and len(lines) == 4
    assert [line[:3] for line in lines] == ["The", "The", "Two", "Two"]
    assert "new tokens" in err and "KV cache on" in err
    code, uncached, err = cli(capsys, *args, "--no-cache")
    assert code == 0 and uncached == out and "KV cache off" in err
    code, _, err = cli(capsys, "generate", "--checkpoint", str(numbers_run))
    assert code == 2 and "holds a translation model (task translate); use vaswani translate" in err
    code, _, err = cli(capsys, "translate", "--checkpoint", str(lm_run), "hello")
    assert code == 2 and "holds a language model (task lm); use vaswani generate" in err


def test_generate_cli_refuses_bad_sampling_settings(lm_run, capsys):
    for flag, value in (("--top-p", "0"), ("--temperature", "-1"), ("--top-k", "-2")):
        with pytest.raises(SystemExit) as exit_info:
            main(["generate", "--checkpoint", str(lm_run), flag, value])
        assert exit_info.value.code == 2
        assert flag in capsys.readouterr().err


def test_training_the_lm_resumes_bitwise_identically(lm_data, tmp_path):
    def config(out: str, steps: int) -> TrainConfig:
        return TrainConfig(
            data=str(lm_data),
            out=str(tmp_path / out),
            preset="tiny",
            precision="fp32",
            warmup=10,
            batch_tokens=512,
            eval_every=10_000,
            save_every=1,
            log_every=1,
            max_steps=steps,
            schedule="inverse-sqrt",
        )  # fmt: skip  (the budget changes between runs)

    train(config("whole", 7), progress=False)
    train(config("split", 3), progress=False)
    train(resume_config(tmp_path / "split", max_steps=7), resume=True, progress=False)
    whole, split = (load_trained(tmp_path / name, "latest")[0] for name in ("whole", "split"))
    for (name, a), b in zip(whole.state_dict().items(), split.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_the_task_flag_must_match_the_data(lm_data, tmp_path, capsys):
    code, _, err = cli(
        capsys,
        "train",
        "--data",
        str(lm_data),
        "--out",
        str(tmp_path / "r"),
        "--task",
        "classify",
        "--max-steps",
        "1",
    )
    assert code == 2 and "prepared for --task lm, not classify" in err


@pytest.mark.slow
@pytest.mark.skipif(not (VENV_BIN / "torchrun").exists(), reason="torchrun not installed")
def test_two_process_ddp_trains_the_lm_like_one_process(lm_data, tmp_path):
    common = [
        "--data",
        str(lm_data),
        "--preset",
        "tiny",
        "--precision",
        "fp32",
        "--warmup",
        "10",
        "--batch-tokens",
        "512",
        "--accumulate",
        "2",
        "--max-steps",
        "4",
        "--eval-every",
        "10000",
        "--log-every",
        "1",
        "--model",
        "dropout=0.0",
    ]
    # The one-process reference in this process (a child would spend ~3 s starting torch).
    assert main(["train", "--out", str(tmp_path / "one"), *common]) == 0
    two = subprocess.run(
        [
            str(VENV_BIN / "torchrun"),
            "--nproc_per_node",
            "2",
            "--master_port",
            str(free_port()),  # pytest -n 2 runs two such tests at once
            "-m",
            "vaswani.cli",
            "train",
            "--out",
            str(tmp_path / "two"),
            *common,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert two.returncode == 0, two.stderr

    assert losses(tmp_path / "two") == pytest.approx(losses(tmp_path / "one"), rel=1e-5)


@pytest.fixture(scope="module")
def lm_server(lm_run):
    model, tokenizer, _, _ = load_trained(lm_run)
    server = Server(
        create_app(
            Engine(model, tokenizer, tokenizer), ServeSettings(precision="fp32", max_texts=4)
        )
    )
    yield server, model, tokenizer
    server.stop()


def test_generate_endpoint_equals_the_python_api(lm_server):
    server, model, tokenizer = lm_server
    status, body = server.request("GET", "/health")
    assert status == 200 and body["task"] == "lm"
    request = {
        "prompts": ["The cat", ""],
        "max_new_tokens": 25,
        "temperature": 0.9,
        "top_k": 30,
        "seed": 11,
    }
    status, body = server.request("POST", "/generate", request)
    assert status == 200, body
    expected = generate(model, tokenizer, ["The cat", ""], Sampling(25, 0.9, 30, 1.0, 11))
    assert [g["text"] for g in body["generations"]] == [g.text for g in expected]
    assert [g["prompt"] for g in body["generations"]] == ["The cat", ""]
    status, again = server.request("POST", "/generate", request)
    assert again["generations"] == body["generations"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"prompt": "a", "max_new_tokens": 10_000}, "max_new_tokens 10000 is over the limit"),
        ({"prompts": ["a"] * 5}, "5 texts, over the limit of 4"),
        ({"prompt": "a", "top_p": 0}, "top_p"),
        ({"prompt": "a", "temperature": -1}, "temperature"),
        ({"prompt": "a", "prompts": ["b"]}, "give exactly one of"),
        ({"prompt": "the dog " * 200}, "text 1 has"),
    ],
)
def test_generate_endpoint_limits(lm_server, body, message):
    server, _, _ = lm_server
    status, answer = server.request("POST", "/generate", body)
    assert status == 422 and message in json.dumps(answer)
    status, _ = server.request("POST", "/generate", {"prompt": "The", "max_new_tokens": 3})
    assert status == 200
    assert server.request("POST", "/translate", {"text": "a"})[0] == 404


def test_grammar_en_uses_an_before_a_vowel_only():
    words = " ".join(text.lower() for _, text in grammar_en(2000, seed=0)).split()
    pairs = list(zip(words, words[1:], strict=False))
    assert any(a == "an" for a, _ in pairs)
    assert all(b[0] in "aeiou" for a, b in pairs if a == "an")
    assert all(b[0] not in "aeiou" for a, b in pairs if a == "a")
