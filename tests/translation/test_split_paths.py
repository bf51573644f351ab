"""Every text path splits a text of several sentences, translates the sentences in one batch and
joins them back in the text's own spacing; --no-split and "split": false translate it whole."""

import pytest

from helpers import Server, cli
from vaswani.config import DecodeConfig
from vaswani.decoding.text import InputTooLong, Segments, TextModel, translate, translate_segments
from vaswani.serve import Served, ServeSettings, create_app
from vaswani.translation.engine import load_run
from vaswani.translation.request import Request

PARAGRAPH = "271493!  42?\t500181."
SENTENCES = ["271493!", "42?", "500181."]


@pytest.fixture(scope="module")
def loaded(numbers_run):
    return load_run(numbers_run)


@pytest.fixture(scope="module")
def alone(loaded):
    """Each sentence translated on its own, and the paragraph as one segment."""
    found = translate(
        TextModel(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer), [*SENTENCES, PARAGRAPH]
    )
    return found[:3], found[3]


def joined(alone) -> str:
    first, second, third = alone[0]
    return f"{first}  {second}\t{third}"


def test_a_paragraph_is_its_sentences_translated_alone_and_joined_in_its_spacing(loaded, alone):
    assert loaded.translate([PARAGRAPH, "", "42?"]) == [joined(alone), "", alone[0][1]]
    assert loaded.translate([PARAGRAPH], Request(split=False)) == [alone[1]]
    assert joined(alone) != alone[1]  # splitting changed what the model saw


def test_n_best_of_a_paragraph_joins_each_sentences_kth_best(loaded):
    dc = DecodeConfig(beam_size=3, n_best=3)
    model, src, tgt = loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer
    each = translate_segments(TextModel(model, src, tgt), Segments(SENTENCES), dc)
    request = Request(decoding=dc, language="en")
    found = loaded.translate_nbest([PARAGRAPH], request).found[0]
    assert [t.text for t in found] == [
        f"{each[0][k].text}  {each[1][k].text}\t{each[2][k].text}" for k in range(3)
    ]
    assert found[0].log_prob == pytest.approx(sum(e[0].log_prob for e in each))


def test_sentences_of_a_paragraph_over_the_position_limit_are_translated(loaded):
    limit = loaded.config.max_len
    long = " ".join(["500181."] * (limit // 3))  # ~4 tokens a sentence: over the limit whole
    with pytest.raises(InputTooLong, match="line 1 has"):
        loaded.translate([long], Request(split=False))
    found = loaded.translate([long])[0]
    assert found.count(" ") == long.count(" ")
    with pytest.raises(InputTooLong, match="line 2, sentence 2 has"):
        loaded.translate(["42", "42. " + "5" * 4 * limit])


def test_cli_splits_unless_no_split(numbers_run, capsys, alone):
    code, out, _ = cli(
        capsys, "translate", "--checkpoint", str(numbers_run), "--precision", "fp32", PARAGRAPH
    )
    assert code == 0 and out == joined(alone) + "\n"
    code, out, _ = cli(
        capsys,
        "translate",
        "--checkpoint",
        str(numbers_run),
        "--precision",
        "fp32",
        "--no-split",
        PARAGRAPH,
    )
    assert code == 0 and out == alone[1] + "\n"


def test_both_http_apis_split_unless_asked_not_to(loaded, alone):
    served = [Served(loaded, "en", "de")]
    server = Server(create_app(settings=ServeSettings(precision="fp32"), served=served))
    try:
        status, body = server.request("POST", "/translate", {"texts": [PARAGRAPH, " "]})
        assert status == 200 and body["translations"] == [joined(alone), ""]
        status, body = server.request("POST", "/translate", {"text": PARAGRAPH, "split": False})
        assert status == 200 and body["translations"] == [alone[1]]
        libre = {"q": PARAGRAPH, "source": "en", "target": "de"}
        status, body = server.request("POST", "/translate", libre)
        assert status == 200 and body["translatedText"] == joined(alone)
        status, body = server.request("POST", "/translate", {**libre, "split": False})
        assert status == 200 and body["translatedText"] == alone[1]
        status, body = server.request("POST", "/translate", {**libre, "split": "sometimes"})
        assert status == 400 and "split must be true or false" in body["error"]
    finally:
        server.stop()


def test_a_sentence_that_comes_again_is_translated_once(loaded, monkeypatch):
    import vaswani.decoding.text as text

    rows, decode = [], text.decode
    monkeypatch.setattr(
        text, "decode", lambda m, src, *a, **k: rows.append(len(src)) or decode(m, src, *a, **k)
    )
    found = loaded.translate(["42. 7.", "42.", "7. 42."])
    assert sum(rows) == 2  # "42." and "7.", each once
    first, second = loaded.translate(["42."], Request(split=False))[0], loaded.translate(["7."])[0]
    assert found == [f"{first} {second}", first, f"{second} {first}"]
