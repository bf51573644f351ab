"""The one language type (`vaswani.languages.Language`): every spelling users, files and
platforms write read alike, compared, and spelt for each platform's names."""

import pytest

from vaswani.languages import Language, LanguageError, base_of, language_matches


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("de", "de"),
        ("DE", "de"),
        ("de_AT", "de-AT"),
        ("pt-br", "pt-BR"),
        ("zh_hant", "zh-Hant"),
        ("es-419", "es-419"),
        ("sr@latin", "sr"),  # POSIX's modifier
        ("es_ES.UTF-8", "es-ES"),  # a locale's charset
    ],
)
def test_every_spelling_reads_as_one_language(text, tag):
    assert Language.parse(text).tag == tag


@pytest.mark.parametrize("text", ["", "  ", "de en", "1x", "b+zh+Hans", "-"])
def test_what_is_no_language_is_refused_naming_it(text):
    with pytest.raises(LanguageError, match="not a language"):
        Language.parse(text)
    assert base_of(text) == "" and not language_matches(text, "de")


def test_a_bare_language_matches_its_regions_and_a_region_only_itself():
    assert language_matches("es-MX", "es") and language_matches("ES", "es")
    assert language_matches("pt_BR", "pt-br") and not language_matches("pt", "pt-BR")
    assert not language_matches("pt-PT", "pt_BR") and not language_matches("es", None)


def test_each_platform_spells_its_names():
    assert [Language.parse("pt-BR").spelt(p) for p in ("bcp47", "posix", "android")] == [
        "pt-BR",
        "pt_BR",
        "pt-rBR",
    ]
    assert Language.parse("zh-Hans").spelt("android") == "b+zh+Hans"
    assert Language.parse("es").spelt("android") == "es" and base_of("de_AT") == "de"
