"""Word alignment from cross-attention: tokens summed to whitespace-separated words, segments'
alignments moved to their place in the whole text, and the CLI's and HTTP's machine-readable
output."""

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import Server, cli
from vaswani.serve import Served, ServeSettings, create_app
from vaswani.translation.align import (
    encode_words,
    join_alignments,
    token_words,
    word_alignment,
)
from vaswani.translation.engine import load_run
from vaswani.translation.segment import split_sentences

PARAGRAPH = "271493!  42?\t500181."


@pytest.fixture(scope="module")
def loaded(numbers_run):
    return load_run(numbers_run)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab9 .,!é\t\n")), max_size=40).filter(str.strip))
def test_tokens_fall_into_the_words_text_split_gives(loaded, text):
    tokenizer = loaded.src_tokenizer
    ids, words = encode_words(tokenizer, text)
    assert ids == tokenizer.encode(text) and words == sorted(words)  # words come in order
    groups = [[i for i, w in zip(ids, words, strict=True) if w == k] for k in sorted(set(words))]
    assert [tokenizer.decode(g).strip() for g in groups] == text.split()


class Pieces:
    """A SentencePiece-like vocabulary: a word's first piece is marked "▁"."""

    def vocabulary(self):
        return ["▁Hallo", "▁", "Wel", "t", "▁!", "9", "<2de>"]


def test_word_marks_start_words_where_no_offsets_are_given():
    # "Hallo Welt !9" as pieces: a lone mark stays with the word before, the next piece starts one
    assert token_words(Pieces(), [0, 1, 2, 3, 4, 5]) == [0, 0, 1, 1, 2, 2]
    assert token_words(Pieces(), [2, 3, 1, 5]) == [0, 0, 0, 1]


def test_each_target_word_goes_to_the_source_word_it_attends_to_most():
    # 3 target tokens (words 0, 0, 1) over 4 source tokens (words 0, 1, 1, 2)
    weights = torch.tensor(
        [[0.1, 0.5, 0.3, 0.1], [0.6, 0.1, 0.1, 0.2], [0.1, 0.1, 0.1, 0.7]]
    )  # target word 0: source word 1 gets 0.5+0.3+0.1+0.1 = 1.0 against 0.7 for word 0
    assert word_alignment(weights, [0, 1, 1, 2], [0, 0, 1]) == [(1, 0), (2, 1)]
    assert word_alignment(weights, [], [0, 0, 1]) == []


def test_segments_alignments_move_to_their_words_in_the_whole_text():
    text = split_sentences("Hallo Welt.  Wie geht es?\nGut.", "de")
    translations = ["Hello world.", "How are you doing?", "Fine."]
    alignments = [[(0, 0), (1, 1)], [(0, 0), (1, 1), (2, 2), (1, 3)], [(0, 0)]]
    assert join_alignments(text, translations, alignments) == [
        (0, 0),
        (1, 1),
        (2, 2),
        (3, 3),
        (3, 5),
        (4, 4),
        (5, 6),
    ]


def test_jsonl_gives_translation_confidence_and_alignment_per_line(numbers_run, capsys):
    args = (
        "translate",
        "--checkpoint",
        str(numbers_run),
        "--precision",
        "fp32",
        PARAGRAPH,
        "",
        "42",
    )
    _, plain, _ = cli(capsys, *args)
    code, out, _ = cli(capsys, *args, "--output-format", "jsonl", "--alignments")
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["translation"] for r in records] == plain.splitlines()
    assert records[0]["alignment"] == "0-0 1-1 2-2"  # one word a sentence, aligned in place
    assert records[1] == {"translation": "", "confidence": 1.0, "alignment": ""}
    assert all(0 < r["confidence"] <= 1 for r in records)
    code, out, _ = cli(capsys, *args, "--alignments")
    assert out.splitlines()[0] == f"{plain.splitlines()[0]} ||| 0-0 1-1 2-2"


def test_http_answers_confidences_always_and_alignments_when_asked(loaded):
    served = [Served(loaded)]
    server = Server(create_app(settings=ServeSettings(precision="fp32"), served=served))
    try:
        status, body = server.request("POST", "/translate", {"texts": [PARAGRAPH, ""]})
        assert status == 200 and body["alignments"] is None
        assert 0 < body["confidences"][0] <= 1 and body["confidences"][1] == 1.0
        asked = {"texts": [PARAGRAPH, ""], "alignments": True}
        status, body = server.request("POST", "/translate", asked)
        assert status == 200 and body["alignments"] == ["0-0 1-1 2-2", ""]
    finally:
        server.stop()
