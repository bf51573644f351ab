"""Sentence splitting: whole sentences, never inside decimals, ordinals and abbreviations, and the
text's own spacing back exactly."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vaswani.translation.segment import Segmented, split_sentences


@pytest.mark.parametrize(
    ("language", "sentence"),
    [
        ("de", "Der Wert ist 3.5 Prozent höher als im Vorjahr."),
        ("de", "Wir treffen uns am 1. Januar in Berlin."),
        ("de", "Das gilt z. B. für alle Dateien im Ordner."),
        ("de", "Dr. Müller kommt um 10 Uhr."),
        ("en", "Mr. Smith met Dr. Jones at 5 p.m. on Monday."),
        ("en", "This applies to e.g. all files in the folder."),
        ("es", "Hay muchos ríos, p. ej. el Ebro y el Tajo."),
        ("es", "El Sr. García llegó ayer."),
    ],
)
def test_decimals_ordinals_and_abbreviations_do_not_split(language, sentence):
    assert split_sentences(f"{sentence} {sentence}", language).sentences == (sentence, sentence)


def test_the_texts_own_spacing_line_and_paragraph_breaks_come_back():
    text = "  Hallo Welt.  Wie geht es dir?\tGut.\n\nNeuer Absatz. Ende\r\nzweite Zeile\n"
    found = split_sentences(text, "de-DE")
    assert found.sentences == (
        "Hallo Welt.",
        "Wie geht es dir?",
        "Gut.",
        "Neuer Absatz.",
        "Ende",
        "zweite Zeile",
    )
    assert found.gaps == ("  ", "  ", "\t", "\n\n", " ", "\r\n", "\n")
    translated = found.join(["Hello world.", "How are you?", "Fine.", "New paragraph.", "End", "2"])
    assert translated == "  Hello world.  How are you?\tFine.\n\nNew paragraph. End\r\n2\n"


def test_a_line_is_never_joined_with_the_next():
    found = split_sentences("eine Zeile ohne Punkt\nund noch eine", "de")
    assert found.sentences == ("eine Zeile ohne Punkt", "und noch eine")


def test_empty_and_blank_texts_have_no_sentences_and_keep_their_spaces():
    assert split_sentences("", "en") == Segmented((), ("",))
    assert split_sentences(" \n ", "en").join([]) == " \n "
    with pytest.raises(ValueError, match="1 translations for 2 sentences"):
        split_sentences("One. Two.", "en").join(["Eins."])


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .?!\n\t\r,3")), max_size=60))
def test_any_text_joins_back_to_itself(text):
    for language in ("en", "de", "xx"):  # xx: a language sentencex knows nothing of
        found = split_sentences(text, language)
        assert found.join(list(found.sentences)) == text
        assert all(s == s.strip() and s and "\n" not in s for s in found.sentences)
