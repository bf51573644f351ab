"""Many languages in one model: the target-language token in prepare and at inference, sampling by
temperature, --target, evaluation by pair."""

import json

import numpy as np
import pytest

from helpers import Server, cli
from vaswani.config import DecodeConfig, TrainConfig
from vaswani.data import PreparedData, PrepareOptions
from vaswani.data.corpora import DataError
from vaswani.decoding.text import Segments, TextModel, encode_sources, translate_segments
from vaswani.languages import Languages, parse_pair
from vaswani.prepare import prepare
from vaswani.prepare.split import temperature_weights
from vaswani.run import RunError
from vaswani.train.loop import train
from vaswani.translation.engine import load_run
from vaswani.translation.request import Request

PAIRS = ["digits-de", "digits-en", "digits-fr", "digits-es", "de-en", "en-fr"]


@pytest.fixture(scope="module")
def multi_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "multi"
    prepare(
        ["numbers-multi"], out, PrepareOptions(vocab_size=600, numbers_size=200, progress=False)
    )
    return out


@pytest.fixture(scope="module")
def multi_run(multi_data, tmp_path_factory):
    """A tiny multilingual model after a few updates: untrained, but a model like any other (its
    positions few, so that its endless translations end soon)."""
    out = tmp_path_factory.mktemp("runs") / "multi"
    tc = TrainConfig(
        data=str(multi_data),
        out=str(out),
        preset="tiny",
        batch_tokens=512,
        model={"max_len": 24},
        precision="fp32",
        warmup=5,
        max_steps=10,
        eval_every=10,
        eval_sentences=12,
        save_every=10,
        ema_decay=0.0,
    )
    train(tc, progress=False)
    return out


def language_token_ids(data: PreparedData) -> dict[int, str]:
    languages = data.languages
    return {data.src_tokenizer.token_id(languages.token_of(t)): t for t in languages.targets}


def test_every_source_starts_with_its_target_token_once(multi_data):
    data = PreparedData(multi_data)
    meta = data.meta
    assert meta["languages"]["pairs"] == PAIRS and meta["languages"]["token"] == "<2{lang}>"
    tokens = language_token_ids(data)
    assert sorted(tokens.values()) == ["de", "en", "es", "fr"]
    assert len(tokens) == 4 and min(tokens) >= 600  # appended to the learnt vocabulary
    for split in ("train", "valid", "test"):
        part = data.split(split)
        firsts = [int(part.pair(i)[0][0]) for i in range(len(part))]
        seconds = [int(part.pair(i)[0][1]) for i in range(len(part))]
        assert all(first in tokens for first in firsts)
        assert not any(second in tokens for second in seconds)  # added once, not twice
        assert not any(int(t) in tokens for i in range(len(part)) for t in part.pair(i)[1])
        counted = meta["languages"]["by_pair"]
        assert sum(found[split] for found in counted.values()) == len(part)
        if split != "train":  # each line's token is its pair's target
            targets = data.targets(split)
            assert [tokens[first] for first in firsts] == targets
            assert len(data.pair_names(split)) == len(data.text(split)[0])
            assert set(data.pair_names(split)) == set(PAIRS)


def test_source_text_that_spells_a_language_token_stays_text(multi_data):
    data = PreparedData(multi_data)
    token = data.src_tokenizer.token_id("<2fr>")
    assert token not in data.src_tokenizer.encode("<2fr> 12")
    prefix = [[token]]
    encoded = encode_sources(data.src_tokenizer, Segments(["<2fr> 12"], prefix), 64)
    assert encoded[0][0] == token and encoded[0].count(token) == 1


def test_a_prefix_the_text_already_starts_with_is_not_added_again():
    class Spelled:  # a tokenizer that reads a leading ">>fra<<" as its token, as OPUS-MT's does
        def encode_batch(self, texts):
            return [[7, 1] if text.startswith(">>fra<<") else [1] for text in texts]

    encoded = encode_sources(Spelled(), Segments([">>fra<< a", "a"], [[7], [7]]), 64)
    assert encoded == {0: [7, 1], 1: [7, 1]}


def test_temperature_weights():
    assert temperature_weights(np.array([1000, 1000]), 5).tolist() == [1.0, 1.0]
    assert temperature_weights(np.array([1000, 10]), 1).tolist() == [1.0, 1.0]
    weights = temperature_weights(np.array([1000, 10, 0]), 5)
    assert weights[0] == 1 and weights[1] == pytest.approx(100**0.8) and weights[2] == 0
    # the small pair's share: 10 * 39.8 / (1000 + 398) = 28%, (10/1000)^(1/5) of the large one's
    share = 10 * weights[1] / (1000 + 10 * weights[1])
    assert share / (1 - share) == pytest.approx((10 / 1000) ** 0.2)
    assert temperature_weights(np.array([10**6, 1]), 100).max() == 100  # at most MAX_WEIGHT


def write_tsv(path, rows):
    path.write_text("".join(f"{s}\t{t}\n" for s, t in rows), encoding="utf-8")
    return path


def test_pairs_from_files_are_sampled_by_temperature(tmp_path):
    both = [("Hallo Welt", "salut monde")]  # the same text in two language pairs: two examples
    large = write_tsv(
        tmp_path / "de-en.tsv", [(f"Haus {i}", f"house {i}") for i in range(2000)] + both
    )
    small = write_tsv(
        tmp_path / "de-fr.tsv", [(f"Baum {i}", f"arbre {i}") for i in range(40)] + both
    )
    opts = PrepareOptions(
        vocab_size=300,
        valid_fraction=0.01,
        test_fraction=0.01,
        progress=False,
        pairs=(f"de-en={large}", f"de_AT-FR={small}"),
    )
    meta = prepare([], tmp_path / "data", opts)
    languages = meta["languages"]
    assert languages["pairs"] == ["de-en", "de_at-fr"]
    assert meta["dropped_while_reading"] == {}  # no duplicate, nothing held out twice
    by_pair = languages["by_pair"]
    large_train = by_pair["de-en"]["train"]
    small_kept = 41 - by_pair["de_at-fr"]["valid"] - by_pair["de_at-fr"]["test"]
    weight = by_pair["de_at-fr"]["weight"]
    assert by_pair["de-en"]["weight"] == 1
    assert weight == pytest.approx((large_train / small_kept) ** (1 - 1 / 5), abs=1e-4)
    # each small pair used int(weight) or int(weight) + 1 times
    assert (
        int(weight) * small_kept <= by_pair["de_at-fr"]["train"] <= (int(weight) + 1) * small_kept
    )
    assert meta["splits"]["train"]["pairs"] == sum(p["train"] for p in by_pair.values())


def test_pair_mistakes_are_one_line_errors(tmp_path):
    good = write_tsv(tmp_path / "a.tsv", [("a b", "c d")] * 3)

    def fails(*pairs, inputs=()):
        with pytest.raises(DataError) as error:
            prepare(list(inputs), tmp_path / "out", PrepareOptions(pairs=pairs, progress=False))
        return str(error.value)

    assert "SRC-TGT" in fails(f"deen={good}")
    assert "SRC-TGT=FILE" in fails("de-en")
    assert "no such file" in fails(f"de-en={tmp_path / 'missing.tsv'}")
    assert "itself" in fails(f"de-de={good}")
    assert "not also as inputs" in fails(f"de-en={good}", inputs=[str(good)])
    assert not (tmp_path / "out").exists()
    with pytest.raises(DataError, match="language token"):
        prepare([], tmp_path / "out", PrepareOptions(pairs=(f"de-en={good}",), language_token="2x"))


def test_target_is_required_known_and_only_for_multilingual_models(multi_run, numbers_run):
    run = load_run(multi_run)
    with pytest.raises(RunError, match="translates into de, en, es, fr: give the target"):
        run.prefixes(None, 1)
    with pytest.raises(RunError, match=r"--target it: this model translates into de, en, es, fr"):
        run.prefixes("it", 1)
    assert run.prefixes("FR", 2) == run.prefixes(["fr", "fr"], 2)  # any spelling of the code
    with pytest.raises(ValueError, match="1 target languages for 2 texts"):
        run.prefixes(["fr"], 2)
    with pytest.raises(RunError, match="one language pair; leave out Request.target"):
        load_run(numbers_run).prefixes("de", 1)
    assert load_run(numbers_run).prefixes(None, 1) is None


def test_a_batch_mixing_targets_decodes_each_sentence_as_alone(multi_run):
    run = load_run(multi_run)
    texts = ["12", "345", "12", "7", "98765", "345"]
    targets = ["de", "en", "fr", "es", "fr", "de"]
    dc = DecodeConfig(beam_size=2, max_new_tokens=12)
    plain = TextModel(run.model, run.src_tokenizer, run.tgt_tokenizer)
    together = translate_segments(plain, Segments(texts, run.prefixes(targets, len(texts))), dc)
    for text, target, found in zip(texts, targets, together, strict=True):
        alone = translate_segments(plain, Segments([text], run.prefixes(target, 1)), dc)[0]
        assert [h.text for h in found] == [h.text for h in alone]
        assert [h.score for h in found] == pytest.approx([h.score for h in alone], abs=1e-4)
    assert run.translate(["12"], Request(target="fr", decoding=dc)) == [
        together[2][0].text
    ]  # the Python API alike


def test_cli_translate_and_evaluate_by_pair(multi_run, capsys, tmp_path):
    status, _, err = cli(capsys, "translate", "--checkpoint", str(multi_run), "12")
    assert status == 2 and "give the target language (--target)" in err
    status, out, _ = cli(
        capsys, "translate", "--checkpoint", str(multi_run), "--target", "es", "12", "3"
    )
    assert status == 0 and len(out.splitlines()) == 2
    status, _, err = cli(capsys, "translate", "--checkpoint", str(multi_run), "--target", "xx", "1")
    assert status == 2 and "this model translates into de, en, es, fr" in err
    status, out, _ = cli(capsys, "evaluate", "--checkpoint", str(multi_run), "--beam-size", "1")
    assert status == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert set(PAIRS) | {"mean"} <= set(lines)
    record = json.loads((multi_run / "evaluations.jsonl").read_text().splitlines()[-1])
    assert set(record["by_pair"]) == {*PAIRS, "mean"}
    bleus = [record["by_pair"][name]["bleu"] for name in PAIRS]
    assert record["by_pair"]["mean"]["bleu"] == pytest.approx(sum(bleus) / len(bleus))
    # a pair it was not trained on (zero-shot), from files
    (tmp_path / "de").write_text("zwölf\ndrei\n", encoding="utf-8")
    (tmp_path / "fr").write_text("douze\ntrois\n", encoding="utf-8")
    status, out, _ = cli(
        capsys,
        "evaluate",
        "--checkpoint",
        str(multi_run),
        "--src",
        str(tmp_path / "de"),
        "--ref",
        str(tmp_path / "fr"),
        "--target",
        "fr",
    )
    assert status == 0 and "2 sentences" in out
    status, _, _ = cli(
        capsys,
        "plot",
        "attention",
        "--checkpoint",
        str(multi_run),
        "--target",
        "fr",
        "12",
        "--out",
        str(tmp_path / "a.png"),
    )
    assert status == 0 and (tmp_path / "a-cross.png").is_file()


def test_languages_read_back_from_their_record():
    languages = Languages([parse_pair("de-en"), parse_pair("pt_BR-en")], ">>{lang}<<")
    again = Languages.from_meta({"languages": languages.record()})
    assert again.pairs == [("de", "en"), ("pt_br", "en")] and again.token_of("en") == ">>en<<"
    assert Languages.from_meta({}) is None


@pytest.fixture(scope="module")
def multi_server(multi_run):
    from vaswani.cli.serve import served_pairs
    from vaswani.config import ServeSettings
    from vaswani.serve import create_app

    run = load_run(multi_run)
    servers = {}
    for pivot in (True, False):
        app = create_app(
            settings=ServeSettings(precision="fp32"),
            pivot=pivot,
            served=served_pairs(run, None, None, multi_run, True),
        )
        servers[pivot] = Server(app)
    yield run, servers
    for server in servers.values():
        server.stop()


def test_a_served_multilingual_model_lists_every_pair_with_one_worker(multi_server):
    _, servers = multi_server
    status, languages = servers[False].request("GET", "/languages")
    assert status == 200
    assert {(lang["code"], t) for lang in languages for t in lang["targets"]} == {
        tuple(name.split("-")) for name in PAIRS
    }
    assert len(servers[False].app.state.workers) == 1  # six pairs, one model, one queue
    status, health = servers[False].request("GET", "/health")
    assert status == 200 and health["status"] == "ok"
    _, languages = servers[True].request("GET", "/languages")
    assert {"code": "de", "name": "German", "targets": ["en", "fr"]} in languages  # via en


def test_serving_asks_for_the_target_and_pivots_only_without_a_direct_pair(multi_server):
    run, servers = multi_server
    server = servers[True]
    status, body = server.request(
        "POST", "/translate", {"text": "12", "source": "digits", "target": "fr"}
    )
    assert status == 200 and body["translations"] == run.translate(["12"], Request(target="fr"))
    assert body["pivot"] is None  # digits->fr is trained; digits->en->fr is not taken
    status, body = server.request(
        "POST", "/translate", {"texts": ["zwölf", "drei"], "source": "de", "target": "fr"}
    )
    assert status == 200 and body["pivot"] == "en"
    assert body["translations"] == run.translate(
        run.translate(["zwölf", "drei"], Request(target="en")), Request(target="fr")
    )
    status, body = server.request(
        "POST", "/translate", {"q": "zwölf", "source": "de", "target": "fr"}
    )
    assert status == 200 and body["pivot"] == "en"
    status, body = server.request(
        "POST", "/translate", {"q": "7", "source": "digits", "target": "es"}
    )
    assert status == 200 and body["translatedText"] == run.translate(["7"], Request(target="es"))[0]
    assert "pivot" not in body
    status, body = servers[False].request(
        "POST", "/translate", {"text": "zwölf", "source": "de", "target": "fr"}
    )
    assert status == 422 and "de:en" in body["detail"]
    status, body = servers[False].request(
        "POST", "/translate", {"q": "zwölf", "source": "de", "target": "fr"}
    )
    assert status == 400 and "de:fr is not served" in body["error"]


def test_export_and_import_keep_the_languages(multi_run, tmp_path, capsys):
    status, _, _ = cli(
        capsys, "export", str(multi_run), "--to", "huggingface", "--out", str(tmp_path / "hf")
    )
    assert status == 0 and (tmp_path / "hf" / "vaswani_languages.json").is_file()
    status, out, _ = cli(
        capsys, "import-marian", str(tmp_path / "hf"), "--out", str(tmp_path / "run")
    )
    assert status == 0 and "translates into de, en, es, fr" in out
    original, again = load_run(multi_run), load_run(tmp_path / "run")
    assert again.languages.record() == original.languages.record()
    texts, dc = ["12", "345"], DecodeConfig(beam_size=2, max_new_tokens=12)
    assert again.translate(texts, Request(target="es", decoding=dc)) == original.translate(
        texts, Request(target="es", decoding=dc)
    )


def test_a_translation_memory_of_three_languages_gives_two_pairs(tmp_path):
    units = "".join(
        f'<tu><tuv xml:lang="en-US"><seg>open file {i}</seg></tuv>'
        f'<tuv xml:lang="de-DE"><seg>Datei {i} öffnen</seg></tuv>'
        f'<tuv xml:lang="fr-FR"><seg>ouvrir le fichier {i}</seg></tuv></tu>'
        for i in range(60)
    )
    memory = tmp_path / "memory.tmx"
    memory.write_text(
        '<?xml version="1.0" encoding="UTF-8"?><tmx version="1.4"><header '
        'srclang="en-US" segtype="sentence" datatype="plaintext" adminlang="en" '
        f'creationtool="t" creationtoolversion="1" o-tmf="t"/><body>{units}</body></tmx>',
        encoding="utf-8",
    )
    opts = PrepareOptions(
        vocab_size=300,
        progress=False,
        valid_fraction=0.2,
        pairs=(f"en-de={memory}", f"en-fr={memory}"),
    )
    meta = prepare([], tmp_path / "data", opts)
    assert [(c["pair"], c["kept"]) for c in meta["corpora"]] == [("en-de", 60), ("en-fr", 60)]
    # what a pair holds out, the other does not train on (the English sources are shared)
    held_out = meta["dropped_while_reading"]["in the valid or test split"]
    found = meta["languages"]["by_pair"].values()
    assert sum(f[s] for f in found for s in ("train", "valid", "test")) + held_out == 120
    data = PreparedData(tmp_path / "data")
    references = data.text("valid")[1]
    assert len(references) >= 10
    for name, reference in zip(data.pair_names("valid"), references, strict=True):
        assert ("öffnen" in reference) == (name == "en-de")
