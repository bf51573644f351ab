import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vaswani.config import ModelConfig
from vaswani.data.tokenizer import SubwordTokenizer

TEXTS = [
    "Das ist ein kleines Haus.",
    "Die Straße ist 347 Meter lang.",
    "this is a small house",
    "Größe, Übermut und Ärger",
    "zweihundertsiebenundvierzig",
] * 20


@pytest.fixture(scope="module")
def tokenizer() -> SubwordTokenizer:
    return SubwordTokenizer.train(TEXTS, vocab_size=320)


def test_special_ids_match_the_model_config(tokenizer):
    cfg = ModelConfig()
    assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id) == (
        cfg.pad_id,
        cfg.bos_id,
        cfg.eos_id,
    )
    assert tokenizer.unk_id == 3


@pytest.mark.parametrize(
    "text",
    [
        "Das ist ein kleines Haus.",
        "  leading and  double spaces ",
        "Emoji 🙂 und ñ, 中文",
        "a\tb\rc",
    ],
)
def test_round_trip(tokenizer, text):
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_digits_are_single_tokens(tokenizer):
    ids = tokenizer.encode("347")
    assert tokenizer.tokens(ids) == ["3", "4", "7"]
    # Even after training on "347" many times, no merge spans digits.
    assert len(tokenizer.encode("Die Straße ist 347 Meter lang.")) > len(
        tokenizer.encode("Die Straße ist")
    )


def test_decode_drops_specials_and_ids_outside_the_vocabulary(tokenizer):
    ids = [
        tokenizer.bos_id,
        *tokenizer.encode("Haus"),
        tokenizer.eos_id,
        tokenizer.pad_id,
        10**6,
        -1,
    ]
    assert tokenizer.decode(ids) == "Haus"


def test_save_and_load_round_trip(tokenizer, tmp_path):
    tokenizer.save(tmp_path / "tokenizer.json")
    loaded = SubwordTokenizer.load(tmp_path / "tokenizer.json")
    assert loaded.encode("Größe 12") == tokenizer.encode("Größe 12")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a vaswani tokenizer file"):
        SubwordTokenizer.load(tmp_path / "bad.json")


def test_vocabulary_size_below_the_byte_alphabet_is_refused():
    with pytest.raises(ValueError, match="at least 260"):
        SubwordTokenizer.train(TEXTS, vocab_size=100)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_any_unicode_encodes_within_the_vocabulary_and_decodes(tokenizer, text):
    ids = tokenizer.encode(text)
    assert all(0 <= i < tokenizer.vocab_size for i in ids)
    assert tokenizer.unk_id not in ids
    assert isinstance(tokenizer.decode(ids), str)


@pytest.mark.parametrize("text", ["<unk>", "a </s> b", "<s><pad>", "x<unk>y"])
def test_text_spelling_a_special_token_is_ordinary_text(tokenizer, text):
    ids = tokenizer.encode(text)
    assert not set(ids) & {tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id}
    assert tokenizer.decode(ids) == text
    assert tokenizer.encode_batch([text]) == [ids]


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.integers(-5, 400)))
def test_any_id_sequence_decodes(tokenizer, ids):
    assert isinstance(tokenizer.decode(ids), str)
