"""Back-translation: `vaswani backtranslate` (cleaning, methods, resume, shards) and the synthetic
pairs in `vaswani prepare --back-translated` (training only, tagged sources)."""

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import vaswani.backtranslate as bt
from helpers import cli, free_port
from vaswani.backtranslate import (
    BackTranslation,
    BackTranslationError,
    Job,
    backtranslate,
    join_parts,
    monolingual_sentences,
    noised,
)
from vaswani.config import DecodeConfig
from vaswani.data import PreparedData, PrepareOptions
from vaswani.data.corpora import DataError
from vaswani.prepare import prepare
from vaswani.translation.engine import load_run

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def mono(tmp_path_factory):
    """Monolingual text for the numbers model (digits -> German words): 300 numbers, a repeat, a
    blank line and a line of invalid UTF-8 among them."""
    path = tmp_path_factory.mktemp("mono") / "digits.txt"
    numbers = random.Random(5).sample(range(1000, 999_999), 300)
    lines = [str(n).encode() for n in numbers]
    lines[10:10] = [b"", lines[3], b"\xff\xfe broken"]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.fixture(scope="module")
def loaded(numbers_run):
    return load_run(numbers_run)


def pairs_of(path):
    return [line.split("\t") for line in path.read_text().splitlines()]


def test_monolingual_sentences_are_cleaned_and_each_kept_once(mono):
    dropped = Counter()
    sentences = list(monolingual_sentences([mono], None, 1 << 20, dropped))
    assert len(sentences) == 300 and len(set(sentences)) == 300
    assert dropped == {"empty line": 1, "repeated sentence": 1, "invalid text": 1}


def test_sentences_are_split_by_the_language_rules(tmp_path):
    path = tmp_path / "de.txt"
    path.write_text("Das ist gut. Wir gehen heute nach Hause.\nDas ist gut.\n")
    found = list(monolingual_sentences([path], "de", 1 << 20, Counter()))
    assert found == ["Das ist gut.", "Wir gehen heute nach Hause."]


def test_backtranslate_writes_synthetic_source_tab_real_target(loaded, mono, tmp_path):
    out = tmp_path / "syn.tsv"
    report = backtranslate(loaded, Job([mono], out), BackTranslation())
    pairs = pairs_of(out)
    assert report.complete and report.done == 300 and report.written == len(pairs)
    targets = [t for _, t in pairs]
    sentences = list(monolingual_sentences([mono], None, 1 << 20, Counter()))
    assert targets == [s for s in sentences if s in set(targets)]  # in order, each once
    assert len(targets) == 300 - sum(report.dropped.values()) + 3  # 3 dropped while reading
    # The model turns digits into German number words: most synthetic sources hold no digit.
    assert sum(not any(c.isdigit() for c in src) for src, _ in pairs) > 0.9 * len(pairs)
    assert all(src and "\t" not in src for src, _ in pairs)


def test_resume_after_an_interruption_loses_and_duplicates_nothing(
    loaded, mono, tmp_path, monkeypatch
):
    monkeypatch.setattr(bt, "CHUNK", 64)
    whole = tmp_path / "whole.tsv"
    backtranslate(loaded, Job([mono], whole), BackTranslation())
    out = tmp_path / "broken.tsv"
    chunks = []

    def die_after_two(done):
        chunks.append(done)
        if len(chunks) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        backtranslate(loaded, Job([mono], out), BackTranslation(), progress=die_after_two)
    record = json.loads((tmp_path / "broken.tsv.progress.json").read_text())
    assert record["done"] == 128 and not record["complete"]
    # The process died while writing the next chunk: half a line after what the record says.
    with open(out, "ab") as handle:
        handle.write(b"vierhundert\t4")
    report = backtranslate(loaded, Job([mono], out), BackTranslation())
    assert (report.done_before, report.done, report.complete) == (128, 172, True)
    assert out.read_text() == whole.read_text()
    again = backtranslate(loaded, Job([mono], out), BackTranslation())
    assert again.done == 0 and out.read_text() == whole.read_text()


def test_an_output_begun_otherwise_or_not_ours_is_refused(loaded, mono, tmp_path):
    out = tmp_path / "syn.tsv"
    backtranslate(loaded, Job([mono], out), BackTranslation(), max_minutes=1e-9)
    with pytest.raises(BackTranslationError, match="different settings"):
        backtranslate(loaded, Job([mono], out), BackTranslation(method="sample"))
    mine = tmp_path / "mine.tsv"
    mine.write_text("a user's file\tkeep it\n")
    with pytest.raises(BackTranslationError, match="no progress record"):
        backtranslate(loaded, Job([mono], mine), BackTranslation())
    assert mine.read_text() == "a user's file\tkeep it\n"
    link = tmp_path / "link.tsv"
    link.symlink_to(mine)
    with pytest.raises(Exception, match="symbolic link"):
        backtranslate(loaded, Job([mono], link, force=True), BackTranslation())
    assert mine.read_text() == "a user's file\tkeep it\n"


def test_max_minutes_stops_between_chunks_and_says_so(loaded, mono, tmp_path, monkeypatch):
    monkeypatch.setattr(bt, "CHUNK", 100)
    out = tmp_path / "syn.tsv"
    report = backtranslate(loaded, Job([mono], out), BackTranslation(), max_minutes=1e-9)
    assert not report.complete and report.done == 100  # the first chunk is always done
    later = backtranslate(loaded, Job([mono], out), BackTranslation())
    assert later.complete and later.done_before == 100 and later.done == 200


def test_shards_joined_in_order_equal_one_process(loaded, mono, tmp_path, monkeypatch):
    monkeypatch.setattr(bt, "CHUNK", 64)
    one = tmp_path / "one.tsv"
    backtranslate(loaded, Job([mono], one), BackTranslation())
    two = tmp_path / "two.tsv"
    for rank in (1, 0):  # the order the processes finish in does not matter
        backtranslate(loaded, Job([mono], two, shard=(rank, 2)), BackTranslation())
    written, complete = join_parts(two, 2)
    assert complete and written == len(pairs_of(two))
    assert [t for _, t in pairs_of(two)] == [t for _, t in pairs_of(one)]
    assert not list(tmp_path.glob("two.tsv.part-*"))
    # The joined output is complete: a second call with the same shards does nothing.
    again = backtranslate(loaded, Job([mono], two, shard=(0, 2)), BackTranslation())
    assert again.complete and again.done == 0


def test_sampling_makes_other_sources_than_beam_search(loaded, mono, tmp_path):
    made = {}
    for method in ("beam", "sample", "noised"):
        out = tmp_path / f"{method}.tsv"
        backtranslate(loaded, Job([mono], out), BackTranslation(method=method))
        made[method] = dict((t, s) for s, t in pairs_of(out))
    shared = set(made["beam"]) & set(made["sample"]) & set(made["noised"])
    differs = {m: sum(made[m][t] != made["beam"][t] for t in shared) for m in made}
    # German numbers under a million are one word: noise can only move or delete among several.
    one_word = all(len(made["beam"][t].split()) == 1 for t in shared)
    assert one_word and differs["noised"] == 0 and differs["sample"] > 10


def test_noise_deletes_and_moves_words_no_further_than_the_distance():
    rng = random.Random(0)
    words = [f"w{i}" for i in range(40)]
    for _ in range(50):
        out = noised(" ".join(words), rng, 0.1, 3).split()
        assert 1 <= len(out) <= 40 and len(set(out)) == len(out)
        kept = [w for w in words if w in out]
        assert all(abs(out.index(w) - kept.index(w)) <= 3 for w in out)
    assert noised("one", random.Random(1), 1.0, 3) == "one"  # one word always stays


def test_sampling_is_a_decode_config_of_beam_one():
    assert DecodeConfig(beam_size=1, temperature=0.7, top_k=5).temperature == 0.7
    with pytest.raises(ValueError, match="beam_size 1"):
        DecodeConfig(beam_size=4, temperature=1.0)
    with pytest.raises(ValueError, match="temperature"):
        DecodeConfig(beam_size=1, temperature=float("nan"))


def test_cli_backtranslate_then_prepare_with_the_synthetic_pairs(
    capsys, numbers_run, mono, tmp_path
):
    syn = tmp_path / "syn.tsv"
    code, out, err = cli(
        capsys,
        "backtranslate",
        "--checkpoint",
        str(numbers_run),
        "--input",
        str(mono),
        "--output",
        str(syn),
        "--method",
        "sample",
        "--top-k",
        "5",
    )
    assert code == 0, err
    assert "back-translated 300 sentences" in out and "dropped: 1 empty line" in out
    # Real pairs: German words -> digits, as the synthetic ones are.
    words = tmp_path / "words.tsv"
    from vaswani.data.builtin import numbers_de

    words.write_text("".join(f"{w}\t{d}\n" for d, w in numbers_de(400, seed=9)))
    data = tmp_path / "data"
    code, out, err = cli(
        capsys,
        "prepare",
        str(words),
        "--back-translated",
        str(syn),
        "--weight",
        f"{syn}=2",
        "--out",
        str(data),
        "--vocab-size",
        "300",
        "--valid-fraction",
        "0.1",
        "--test-fraction",
        "0.1",
    )
    assert code == 0, err
    assert "back-translated:" in out
    check_tagged_dataset(data, syn)


def check_tagged_dataset(data_dir, syn):
    """Synthetic pairs are in training only (twice, by --weight), their sources and only theirs
    lead with the tag, one token, which no target holds."""
    data = PreparedData(data_dir)
    meta = data.meta
    tag = meta["back_translated"]["id"]
    assert data.src_tokenizer.encode("<BT>") != [tag]  # a user's "<BT>" is text
    assert data.src_tokenizer.tokens([tag]) == ["<BT>"]
    synthetic = {s for s, _ in pairs_of(syn)}
    for split in ("valid", "test"):
        sources, _ = data.text(split)
        assert not synthetic & set(sources)
        ids = data.split(split)
        assert all(tag not in ids.pair(i)[0] for i in range(len(ids)))
    train = data.split("train")
    led = sum(int(train.pair(i)[0][0] == tag) for i in range(len(train)))
    assert (
        led == meta["back_translated"]["train_pairs"] == meta["splits"]["train"]["back_translated"]
    )
    assert led >= 2 * 0.9 * len(synthetic)
    assert all(tag not in train.pair(i)[0][1:] for i in range(len(train)))
    assert all(tag not in train.pair(i)[1] for i in range(len(train)))


def test_synthetic_pairs_holding_held_out_text_are_dropped(tmp_path):
    from vaswani.data.builtin import numbers_de

    real = tmp_path / "real.tsv"
    real.write_text("".join(f"{w}\t{d}\n" for d, w in numbers_de(600, seed=2)))
    first = tmp_path / "first"
    prepare([str(real)], first, PrepareOptions(vocab_size=300, progress=False, valid_fraction=0.1))
    held = PreparedData(first).text("valid")[1]
    syn = tmp_path / "syn.tsv"
    from vaswani.data.builtin import german_number

    numbers = [*held[:5], "777777", "787878"]  # five held-out targets, two new ones
    # Sources as a weak reverse model might make them: the words of a neighbouring number.
    syn.write_text("".join(f"{german_number(int(d) + 1)}\t{d}\n" for d in numbers))
    out = tmp_path / "with"
    meta = prepare(
        [str(real)],
        out,
        PrepareOptions(vocab_size=300, progress=False, valid_fraction=0.1, back_translated=(syn,)),
    )
    assert meta["back_translated"]["train_pairs"] == 2
    assert meta["dropped_while_reading"]["in the valid or test split"] == 5
    assert PreparedData(out).text("valid") == PreparedData(first).text("valid")


def test_back_translated_pairs_need_one_language_pair(tmp_path):
    syn = tmp_path / "syn.tsv"
    syn.write_text("a\tb\n")
    with pytest.raises(DataError, match="one language pair"):
        prepare(
            [],
            tmp_path / "out",
            PrepareOptions(pairs=("de-en=" + str(syn),), back_translated=(syn,), progress=False),
        )


def test_tag_counts_stay_as_ids(tmp_path):
    # The tag is appended to the vocabulary, past the learnt tokens.
    from vaswani.data.builtin import numbers_de

    real = tmp_path / "real.tsv"
    real.write_text("".join(f"{w}\t{d}\n" for d, w in numbers_de(300, seed=4)))
    syn = tmp_path / "syn.tsv"
    syn.write_text("".join(f"x {d}\t{d}\n" for d in range(5000, 5050)))
    meta = prepare(
        [str(real)],
        tmp_path / "d",
        PrepareOptions(vocab_size=300, progress=False, back_translated=(syn,)),
    )
    assert meta["back_translated"]["id"] == meta["tokenizer"]["vocab_size"]["src"] - 1
    assert np.isfinite(meta["splits"]["train"]["src_lengths"]["mean"])


def test_synthetic_sources_that_are_not_valid_text_are_dropped(loaded, monkeypatch):
    from vaswani.decoding.text import Translation

    made = ["gut", "kaputt\x00", "\ufffd\ufffd", "", "7"]
    monkeypatch.setattr(
        bt,
        "translate_segments",
        lambda *_args: [[Translation(text, 0.0, 0.0, 1)] for text in made],
    )
    dropped = Counter()
    translate_chunk = bt.chunk_translator(loaded, BackTranslation())
    pairs = translate_chunk(["1", "2", "3", "4", "7"], 0, dropped)
    assert pairs == [("gut", "1")]
    assert dropped == {
        "translation not valid text": 2,
        "empty translation": 1,
        "translation is a copy": 1,
    }


@pytest.mark.slow
@pytest.mark.skipif(not (VENV_BIN / "torchrun").exists(), reason="torchrun not installed")
def test_torchrun_gives_each_process_its_share_and_joins_them(numbers_run, mono, tmp_path):
    out = tmp_path / "syn.tsv"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            str(VENV_BIN / "torchrun"),
            "--nproc_per_node",
            "2",
            "--master_port",
            str(free_port()),  # pytest -n 2 runs two such tests at once
            "-m",
            "vaswani.cli",
            "backtranslate",
            "--checkpoint",
            str(numbers_run),
            "--input",
            str(mono),
            "--output",
            str(out),
            "--precision",
            "fp32",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("back-translated") == 1  # rank 0 reports
    one = tmp_path / "one.tsv"
    backtranslate(load_run(numbers_run), Job([mono], one), BackTranslation())
    assert [t for _, t in pairs_of(out)] == [t for _, t in pairs_of(one)]
    assert json.loads((tmp_path / "syn.tsv.progress.json").read_text())["complete"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "one.tsv",
        "one.tsv.progress.json",
        "syn.tsv",
        "syn.tsv.progress.json",
    ]


def test_a_tag_with_spaces_is_refused(tmp_path):
    syn = tmp_path / "syn.tsv"
    syn.write_text("a\tb\n")
    with pytest.raises(DataError, match="one token"):
        prepare(
            [str(syn)],
            tmp_path / "out",
            PrepareOptions(back_translated=(syn,), back_translation_tag="<B T>", progress=False),
        )
