import json
import subprocess
import sys
from pathlib import Path

import pytest

from vaswani.data import PreparedData, PrepareOptions
from vaswani.data.builtin import DING_PATH
from vaswani.data.corpora import DataError
from vaswani.data.dataset import SPLITS
from vaswani.prepare import prepare

SMALL = PrepareOptions(vocab_size=300, numbers_size=3000, progress=False)


@pytest.fixture(scope="module")
def numbers(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("prep") / "numbers"
    prepare(["numbers-de"], out, SMALL)
    return out


def all_pairs(data: PreparedData, split: str) -> list[tuple[str, str]]:
    part = data.split(split)
    return [
        (data.src_tokenizer.decode(s.tolist()), data.tgt_tokenizer.decode(t.tolist()))
        for s, t in (part.pair(i) for i in range(len(part)))
    ]


def test_prepared_directory_has_every_file_and_consistent_counts(numbers):
    meta = json.loads((numbers / "meta.json").read_text())
    data = PreparedData(numbers)
    total = sum(meta["splits"][s]["pairs"] for s in SPLITS)
    assert total == meta["pairs_read"] == 3000
    for split in SPLITS:
        assert len(data.split(split)) == meta["splits"][split]["pairs"]
    assert meta["tokenizer"]["vocab_size"] == {"src": 300, "tgt": 300}
    assert (numbers / "tokenizer.json").is_file()
    assert not list(numbers.glob("raw.*")) and not list(numbers.parent.glob(".numbers.*"))


def test_ids_decode_back_to_the_text_and_splits_are_disjoint(numbers):
    data = PreparedData(numbers)
    pairs = {split: all_pairs(data, split) for split in SPLITS}
    for src, tgt in pairs["train"][:200]:
        assert tgt == __import__("vaswani").data.german_number(int(src))
    src_text, tgt_text = data.text("test")
    assert list(zip(src_text, tgt_text, strict=True)) == pairs["test"]
    sets = {split: set(p) for split, p in pairs.items()}
    assert not sets["train"] & sets["valid"] and not sets["train"] & sets["test"]
    assert not sets["valid"] & sets["test"]


def test_rerunning_gives_byte_identical_files(numbers, tmp_path):
    again = tmp_path / "again"
    prepare(["numbers-de"], again, SMALL)
    names = sorted(p.name for p in numbers.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    for name in names:
        assert (numbers / name).read_bytes() == (again / name).read_bytes(), name


def test_adding_data_never_moves_old_pairs_between_splits(tmp_path):
    lines = [f"satz {i}\tsentence {i}" for i in range(3000)]
    small, big = tmp_path / "small.tsv", tmp_path / "big.tsv"
    small.write_text("\n".join(lines[:1500]) + "\n")
    big.write_text("\n".join(lines) + "\n")
    opts = PrepareOptions(vocab_size=300, valid_fraction=0.1, test_fraction=0.1, progress=False)
    prepare([str(small)], tmp_path / "a", opts)
    prepare([str(big)], tmp_path / "b", opts)
    a, b = PreparedData(tmp_path / "a"), PreparedData(tmp_path / "b")
    for split in ("valid", "test"):
        old = set(zip(*a.text(split), strict=True))
        new = set(zip(*b.text(split), strict=True))
        assert old and old <= new
        assert len(new) > len(old)


def test_empty_duplicate_and_too_long_pairs_are_dropped_and_counted(tmp_path):
    src, tgt = tmp_path / "x.de", tmp_path / "x.en"
    body = [f"wort {i}" for i in range(400)]
    src.write_text("\n".join([*body, "", "wort 1", "lang " * 40]) + "\n")
    tgt.write_text("\n".join([*(f"word {i}" for i in range(400)), "x", "word 1", "long"]) + "\n")
    opts = PrepareOptions(
        vocab_size=300, max_example_len=20, valid_fraction=0.0, test_fraction=0.0, progress=False
    )
    meta = prepare([str(src), str(tgt)], tmp_path / "out", opts)
    assert meta["dropped_while_reading"] == {"duplicate pair": 1, "empty line": 1}
    assert meta["splits"]["train"]["filtered_too_long"] == 1
    assert meta["splits"]["train"]["pairs"] == 400
    assert meta["splits"]["train"]["src_lengths"]["max"] + 1 <= 20


def test_separate_vocabularies(tmp_path):
    opts = PrepareOptions(vocab_size=280, numbers_size=500, shared_vocab=False, progress=False)
    meta = prepare(["numbers-de"], tmp_path / "sep", opts)
    assert meta["tokenizer"]["files"] == {"src": "src.tokenizer.json", "tgt": "tgt.tokenizer.json"}
    data = PreparedData(tmp_path / "sep")
    assert data.src_tokenizer is not data.tgt_tokenizer
    assert data.src_tokenizer.vocab_size < 280  # digits alone never need 280 entries


def test_existing_output_is_kept_unless_forced(numbers, tmp_path):
    out = tmp_path / "keep"
    out.mkdir()
    (out / "mine.txt").write_text("precious")
    with pytest.raises(DataError, match="already exists and is not empty"):
        prepare(["numbers-de"], out, SMALL)
    assert (out / "mine.txt").read_text() == "precious"


def test_missing_or_bad_prepared_directory(tmp_path):
    with pytest.raises(DataError, match="not a prepared dataset"):
        PreparedData(tmp_path)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vaswani.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_cli_prepare_reports_counts_and_padding(tmp_path):
    result = run_cli(
        "prepare",
        "numbers-de",
        "--out",
        str(tmp_path / "n"),
        "--vocab-size",
        "300",
        "--numbers-size",
        "2000",
    )
    assert result.returncode == 0, result.stderr
    assert (
        "train" in result.stdout and "padding with --batch-tokens 2048" in result.stdout
    )  # train's default


def test_cli_prepare_errors_are_one_line(tmp_path):
    (tmp_path / "a").write_text("x\ny\n")
    (tmp_path / "b").write_text("x\n")
    result = run_cli(
        "prepare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "o")
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: line counts differ: {tmp_path / 'a'} has 2 lines, {tmp_path / 'b'} has 1; "
        "the files must be aligned line by line"
    ]
    assert not (tmp_path / "o").exists()
    result = run_cli("prepare", "no-such-corpus", "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and "not a built-in corpus" in result.stderr


@pytest.mark.skipif(not DING_PATH.exists(), reason="Debian package trans-de-en not installed")
def test_ding_de_en_prepares_with_little_padding(tmp_path):
    from vaswani.data import TokenBatchSampler

    # Every second line of the real dictionary (the whole takes 20 s to prepare), and BPE learnt
    # from a sample as on a large corpus: the pairs and the padding are the point here.
    lines = DING_PATH.read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "de-en").write_text("".join(lines[::2]), encoding="utf-8")
    opts = PrepareOptions(progress=False, tokenizer_sample=20_000, ding_path=tmp_path / "de-en")
    meta = prepare(["ding-de-en"], tmp_path / "ding", opts)
    assert meta["splits"]["train"]["pairs"] > 100_000
    train = PreparedData(tmp_path / "ding").split("train")
    for budget in (4096, 25000):
        sampler = TokenBatchSampler(train.src_lengths, train.tgt_lengths, budget)
        assert sampler.padding_fraction() < 0.10
