"""Sequence-level distillation (`vaswani distill`) and the preset's position limit growing to the
data."""

import dataclasses
import json

import numpy as np
import pytest

from helpers import cli
from vaswani.config import DecodeConfig, TrainConfig
from vaswani.data import PreparedData, PrepareOptions
from vaswani.decoding.text import TextModel
from vaswani.distill import DistillError, distill
from vaswani.prepare import prepare
from vaswani.train.loop import train
from vaswani.translation.engine import load_run
from vaswani.translation.request import Request


@pytest.fixture(scope="module")
def distilled(numbers_run, numbers_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("kd") / "numbers-kd"
    done = distill([load_run(numbers_run)], numbers_data, out, DecodeConfig(beam_size=2))
    return out, done


def test_distilled_data_keeps_tokenizer_splits_and_sources(distilled, numbers_data):
    out, done = distilled
    for name in [
        "tokenizer.json",
        *(
            f"{s}.{x}"
            for s in ("valid", "test")
            for x in ("src.bin", "src.idx", "src.txt", "tgt.bin", "tgt.idx", "tgt.txt")
        ),
        "train.src.bin",
        "train.src.idx",
    ]:
        assert (out / name).read_bytes() == (numbers_data / name).read_bytes(), name
    old, new = PreparedData(numbers_data), PreparedData(out)
    assert len(new.split("train")) == len(old.split("train")) == done.pairs
    assert new.meta["distilled"]["replaced"] == done.replaced
    assert done.replaced + done.kept_reference == done.pairs and done.replaced > 0.9 * done.pairs


def test_distilled_targets_are_the_teachers_translations(distilled, numbers_run, numbers_data):
    out, _ = distilled
    old, new = PreparedData(numbers_data), PreparedData(out)
    train = new.split("train")
    teacher = load_run(numbers_run)
    picks = [0, 7, len(train) - 1]
    sources = [old.src_tokenizer.decode(train.pair(i)[0].tolist()) for i in picks]
    expected = teacher.translate(sources, Request(decoding=DecodeConfig(beam_size=2), split=False))
    found = [new.tgt_tokenizer.decode(train.pair(i)[1].tolist()) for i in picks]
    assert found == expected
    # The teacher is good but not perfect: some targets changed, most did not.
    old_train = old.split("train")
    changed = sum(
        not np.array_equal(train.pair(i)[1], old_train.pair(i)[1]) for i in range(len(train))
    )
    assert 0 < changed < 0.5 * len(train)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["splits"]["train"]["sha256"]["src"] == old.meta["splits"]["train"]["sha256"]["src"]
    assert meta["splits"]["train"]["sha256"]["tgt"] != old.meta["splits"]["train"]["sha256"]["tgt"]


def test_a_student_trains_on_distilled_data(distilled, tmp_path):
    out, _ = distilled
    tc = TrainConfig(
        data=str(out),
        out=str(tmp_path / "student"),
        preset="tiny",
        max_steps=3,
        eval_every=3,
        eval_sentences=5,
        precision="fp32",
    )
    assert train(tc, progress=False).step == 3


def distill_cli(capsys, teachers: list, data, out, *args: str) -> tuple[int, str, str]:
    """`vaswani distill --teacher RUN ... --data DATA --out OUT ARGS`: exit code, stdout, stderr."""
    flags = [f for run in teachers for f in ("--teacher", str(run))]
    return cli(capsys, "distill", *flags, "--data", str(data), "--out", str(out), *args)


def test_cli_distill_refuses_an_existing_out_and_a_teacher_of_another_pair(
    capsys, numbers_run, numbers_data, tmp_path
):
    code, _, err = distill_cli(capsys, [numbers_run], numbers_data, numbers_data, "--force")
    assert code == 2 and "would write over the dataset" in err
    (tmp_path / "taken").mkdir()
    code, _, err = distill_cli(capsys, [numbers_run], numbers_data, tmp_path / "taken")
    assert code == 2 and "exists" in err
    other = tmp_path / "en-fr"
    tsv = tmp_path / "p.tsv"
    tsv.write_text("".join(f"one {i}\tun {i}\n" for i in range(40)))
    prepare([str(tsv)], other, PrepareOptions(src_lang="en", tgt_lang="fr", progress=False))
    teacher = load_run(numbers_run)
    teacher.info["meta"]["pair"] = {"source": "de", "target": "en"}
    with pytest.raises(DistillError, match="translates de to en"):
        distill([teacher], other, tmp_path / "kd", DecodeConfig())
    code, out, err = distill_cli(
        capsys, [numbers_run], numbers_data, tmp_path / "kd2", "--beam-size", "1"
    )
    assert code == 0, err
    assert "training targets are" in out and (tmp_path / "kd2" / "meta.json").exists()


def test_a_preset_position_limit_grows_to_the_data(tmp_path):
    # Sentences of 150+ tokens: over the tiny preset's max_len of 128.
    tsv = tmp_path / "long.tsv"
    tsv.write_text(
        "".join(
            f"{' '.join(['wort'] * (40 + i % 5))}\t{' '.join(['word'] * (40 + i % 5))} {i}\n"
            for i in range(60)
        )
    )
    data = tmp_path / "data"
    prepare([str(tsv)], data, PrepareOptions(vocab_size=260, progress=False))
    longest = max(s["tgt_lengths"]["max"] for s in PreparedData(data).meta["splits"].values())
    assert longest + 1 > 128
    common = dict(
        data=str(data), preset="tiny", max_steps=1, eval_every=1, eval_sentences=2, precision="fp32"
    )
    result = train(TrainConfig(out=str(tmp_path / "grown"), **common), progress=False)
    assert result.step == 1
    assert load_run(tmp_path / "grown").model.cfg.max_len >= longest + 1
    # Learned positions (a table) and a limit the user set stay as asked, with what to pass.
    for model in ({"positions": "learned"}, {"max_len": 128}):
        with pytest.raises(Exception, match=f"the model setting max_len={longest + 1}"):
            train(
                TrainConfig(out=str(tmp_path / str(len(model))), model=model, **common),
                progress=False,
            )


def test_an_ensemble_averages_its_members_log_probabilities(tiny):
    import torch

    from vaswani.decoding.cache import new_cache
    from vaswani.decoding.ensemble import Ensemble
    from vaswani.model import Transformer

    members = [Transformer(tiny).eval(), Transformer(tiny).eval()]
    ensemble = Ensemble(members).eval()
    src = torch.randint(4, tiny.vocab_size, (3, 7))
    tgt = torch.randint(4, tiny.vocab_size, (3, 5))
    memory, mask = ensemble.encode(src)
    scores, _ = ensemble.decode_step(tgt, new_cache(ensemble, memory, mask, capacity=8))
    each = [
        torch.log_softmax(m.decode_step(tgt, new_cache(m, *m.encode(src), capacity=8))[0], -1)
        for m in members
    ]
    torch.testing.assert_close(scores, (each[0] + each[1]) / 2)
    with pytest.raises(ValueError, match="share their vocabularies"):
        Ensemble([members[0], Transformer(dataclasses.replace(tiny, vocab_size=99))])


def test_an_ensemble_of_one_model_twice_translates_as_the_model(numbers_run, numbers_data):
    from vaswani.decoding.ensemble import Ensemble
    from vaswani.decoding.text import translate

    run = load_run(numbers_run)
    sources = PreparedData(numbers_data).text("valid")[0][:20]
    for beam in (1, 3):
        dc = DecodeConfig(beam_size=beam)
        alone = translate(TextModel(run.model, run.src_tokenizer, run.tgt_tokenizer), sources, dc)
        both = Ensemble([run.model, run.model])
        assert (
            translate(TextModel(both, run.src_tokenizer, run.tgt_tokenizer), sources, dc) == alone
        )


def test_distill_with_two_teachers(capsys, numbers_run, numbers_data, tmp_path):
    code, out, err = distill_cli(
        capsys, [numbers_run, numbers_run], numbers_data, tmp_path / "kd", "--beam-size", "2"
    )
    assert code == 0, err
    meta = PreparedData(tmp_path / "kd").meta["distilled"]
    assert meta["teachers"] == [str(numbers_run)] * 2
