"""Where each file of a project's tree goes in the translated tree (`mirrored`), named as its
platform names a language's files; files that are not the source's strings are left out (None)."""

from pathlib import PurePath

import pytest

from vaswani.documents.projects import android_locale, mirrored

CASES = [
    ("res/values/strings.xml", "android", "res/values-fr/strings.xml"),
    ("res/values-night/strings.xml", "android", "res/values-fr-night/strings.xml"),
    ("res/values-en/strings.xml", "android", "res/values-fr/strings.xml"),
    ("res/values-de/strings.xml", "android", None),  # another language's
    ("res/values-en-rGB/strings.xml", "android", None),  # a regional variant of the source
    ("res/layout/main.xml", "android", None),
    ("ios/en.lproj/Localizable.strings", "strings", "ios/fr.lproj/Localizable.strings"),
    ("ios/Base.lproj/Main.strings", "strings", "ios/fr.lproj/Main.strings"),
    ("ios/it.lproj/Localizable.strings", "strings", None),
    ("Localizable.xcstrings", "xcstrings", "Localizable.xcstrings"),
    ("src/locales/en/common.json", "json", "src/locales/fr/common.json"),
    ("src/locales/de/common.json", "json", None),
    ("package.json", "json", None),
    ("config/locales/en.yml", "yaml", "config/locales/fr.yml"),
    (".github/workflows/ci.yml", "yaml", None),
    (
        "src/main/resources/messages.properties",
        "properties",
        "src/main/resources/messages_fr.properties",
    ),
    (
        "src/main/resources/Messages_en.properties",
        "properties",
        "src/main/resources/Messages_fr.properties",
    ),
    ("android/gradle.properties", "properties", None),
    ("lib/l10n/app_en.arb", "arb", "lib/l10n/app_fr.arb"),
    ("translations/app.ts", "qt", "translations/app_fr.ts"),
    ("Properties/Strings.resx", "resx", "Properties/Strings.fr.resx"),
    ("docs/guide.md", "markdown", "docs/guide.md"),
]


@pytest.mark.parametrize(("path", "fmt", "expected"), CASES)
def test_each_platform_names_the_target_as_it_does(path, fmt, expected):
    found = mirrored(PurePath(path), fmt, "en", "fr")
    assert found == (None if expected is None else PurePath(expected))


def test_regions_and_scripts_are_written_in_each_platforms_way():
    assert android_locale("pt-BR") == "pt-rBR" and android_locale("zh-Hans") == "b+zh+Hans"
    assert mirrored(PurePath("values/strings.xml"), "android", "en", "pt-BR") == PurePath(
        "values-pt-rBR/strings.xml"
    )
    assert mirrored(PurePath("messages.properties"), "properties", "en", "pt-BR") == PurePath(
        "messages_pt_BR.properties"
    )
    assert mirrored(PurePath("en.lproj/a.strings"), "strings", "en", "pt-BR") == PurePath(
        "pt-BR.lproj/a.strings"
    )


def test_an_unknown_source_leaves_out_what_only_its_name_would_mark():
    assert mirrored(PurePath("values/strings.xml"), "android", None, "fr") == PurePath(
        "values-fr/strings.xml"
    )
    assert mirrored(PurePath("locales/en/app.json"), "json", None, "fr") is None
    assert mirrored(PurePath("src/app.json"), "json", "en", "fr") is None  # src is no language
