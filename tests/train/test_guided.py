"""Guided alignment: word alignments written by prepare (eflomal, where installed), and a head
of the last decoder layer trained to follow them, which alignment then reads."""

import shutil

import pytest
import torch

from vaswani.config import TrainConfig
from vaswani.data import PreparedData, PrepareOptions
from vaswani.data.corpora import DataError
from vaswani.prepare import prepare
from vaswani.train.guided import GuidedAlignment
from vaswani.train.loop import train
from vaswani.train.step import TrainingError
from vaswani.translation.engine import load_run


def test_prepare_writes_one_line_of_links_per_training_pair(tmp_path):
    pytest.importorskip("eflomal")
    nouns = {"house": "Haus", "car": "Auto", "tree": "Baum", "dog": "Hund", "book": "Buch"}
    adjectives = {"small": "klein", "big": "groß", "old": "alt", "new": "neu", "red": "rot"}
    pairs = [
        f"the {noun} is {adjective}\tdas {nouns[noun]} ist {adjectives[adjective]}"
        for noun in nouns
        for adjective in adjectives
    ]
    (tmp_path / "c.tsv").write_text("\n".join(pairs * 8) + "\n")
    options = PrepareOptions(vocab_size=300, word_alignments=True, progress=False, dedupe="none")
    meta = prepare([str(tmp_path / "c.tsv")], tmp_path / "d", options)
    lines = (tmp_path / "d" / "train.align").read_text().splitlines()
    assert len(lines) == meta["splits"]["train"]["pairs"] == meta["word_alignments"]["pairs"]
    assert all(
        set(line.split()) <= {f"{i}-{j}" for i in range(4) for j in range(4)} for line in lines
    )
    assert sum("3-3" in line.split() for line in lines) > len(lines) / 2  # small - klein, ...


def test_word_alignments_without_eflomal_say_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "eflomal", None)
    options = PrepareOptions(vocab_size=300, numbers_size=200, word_alignments=True, progress=False)
    with pytest.raises(DataError, match="pip install 'vaswani\\[align\\]'"):
        prepare(["numbers-de"], tmp_path / "d", options)


SHORT = {
    "preset": "tiny",
    "model": {"d_model": 64, "d_ff": 256},
    "batch_tokens": 1024,
    "precision": "fp32",
    "warmup": 40,
    "max_steps": 120,
    "eval_every": 120,
    "eval_sentences": 10,
    "save_every": 120,
    "ema_decay": 0.0,
}


def guided_run(data, out, weight):
    train(
        TrainConfig(data=str(data), out=str(out), guided_alignment=weight, **SHORT), progress=False
    )
    return out


def test_the_guided_head_learns_to_point_at_the_linked_words(numbers_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(numbers_data, data)
    with pytest.raises(TrainingError, match="word_alignments=True"):
        guided_run(data, tmp_path / "none", 1.0)
    pairs = len(PreparedData(data).split("train"))
    (data / "train.align").write_text("0-x\n" * pairs)
    with pytest.raises(TrainingError, match="'0-x' is not a link"):
        guided_run(data, tmp_path / "damaged", 1.0)
    (data / "train.align").write_text("0-0\n" * pairs)  # a number is one word on either side
    mass = {}
    for weight in (0.0, 1.0):
        run = load_run(guided_run(data, tmp_path / f"run{weight}", weight))
        model = run.model
        guide = GuidedAlignment(model, PreparedData(data), 1.0)
        split = PreparedData(data).split("train")
        src, tgt = split.pair(0)
        src_ids = torch.tensor([[*src.tolist(), model.cfg.eos_id]])
        tgt_in = torch.tensor([[model.cfg.bos_id, *tgt.tolist()]])
        with torch.no_grad():
            model(src_ids, tgt_in)
        attention = guide.log_attention[0, : len(tgt)].exp()  # (T, S) of the head
        mass[weight] = attention[:, : len(src)].sum(dim=-1).mean().item()  # on the number
        assert (model.cfg.alignment_head == 0) == (weight > 0)
    assert mass[1.0] > 0.9 and mass[1.0] > mass[0.0]
