"""Code inside prose, protected by default (`vaswani.documents.spans.CODE`): what translators
keep by habit is kept by construction, prose is left to the model, and the check sees every
kind (a letter glued to code, an empty translation)."""

import json

import pytest

from helpers import Mirror
from vaswani.documents.formats import read_document, translate_documents
from vaswani.documents.protect import protect
from vaswani.documents.spans import CODE, DEFAULT, Protection, check, spans
from vaswani.translation import pipeline
from vaswani.translation.files import document_translator
from vaswani.translation.request import Request

KINDS = [
    ("'GIT_AUTHOR_DATE' already given", ["GIT_AUTHOR_DATE"]),
    ("setsockopt SO_RCVBUF failed", ["SO_RCVBUF"]),
    ("locale_to_utf8: conversion failed", ["locale_to_utf8"]),
    ("Call os.path.join() with fontSize set", ["os.path.join()", "fontSize"]),
    ("Run close() first", ["close()"]),
    ("--delete only accepts one file", ["--delete"]),
    ("usage: git submodule set-branch [-q|--quiet]", ["-q", "--quiet"]),
    ("Failed to parse --dirstat/-X option", ["--dirstat", "-X"]),  # options side by side
    ("Options '-Aru' are incompatible with 'status -uno'", ["-Aru", "-uno"]),  # clusters
    ("Move with KP_Page_Down", ["KP_Page_Down"]),
    ("fsmonitor_ipc__send_query: invalid path", ["fsmonitor_ipc__send_query"]),
    ("included by includeIf.hasconfig", ["includeIf.hasconfig"]),  # dotted before camelCase
    ("append to .git/FETCH_HEAD or a .warc.gz file", [".git/FETCH_HEAD", ".warc.gz"]),
    ("Use --file=FILE here", ["--file"]),  # the metavar is the translators' to translate
    ("usage: $dashless $USAGE", ["$dashless", "$USAGE"]),
    ("Read the <1>terms</1> first.", ["<1>", "</1>"]),
    ("__NAME__ is ready", ["__NAME__"]),
    ("Welcome to @@app_name@@", ["@@app_name@@"]),
    ("Needs version 1.2.3-rc1 or later", ["1.2.3-rc1"]),
    ("en", ["en"]),
    ("pt_BR", ["pt_BR"]),
    ("use the given strategy (manual/ours/union/cat_sort_uniq)", ["cat_sort_uniq"]),  # a list
    ("only use git_env_*() value as exit code", ["git_env_*()"]),  # a family of calls
    ("the '--no-[external-commands|aliases]' options", ["--no-[external-commands|aliases]"]),
]


@pytest.mark.parametrize(("text", "code"), KINDS)
def test_each_kind_of_code_is_a_span(text, code):
    assert [s.text for s in spans(text, Protection()) if s.syntax in CODE or s.text in code] == code


def test_an_attribute_read_from_a_named_placeholder_is_kept_with_it():
    """Django: `“%(class_name)s.allow_empty” is False.`: the attribute is code, the full stop
    and the next sentence are not."""
    python = Protection(syntaxes=DEFAULT | {"python"})
    text = "Empty list and “%(class_name)s.allow_empty” is False. %(name)s. Next"
    assert [s.text for s in spans(text, python)] == ["%(class_name)s.allow_empty", "%(name)s"]


@pytest.mark.parametrize(
    "prose",
    [
        "Send an e-mail to a non-empty list",
        "GitHub and PayPal are names",  # CamelCase product names are words
        "Open the file(s), e.g. the first one.",
        "It is a well-known re-enable - done.",
        "Version 3.14 of the app",
        "No",
        "it",
        "--Long Link--",  # tar's decoration, not an option
        "%sPlease retry",  # printf then a word: the word is prose
        "Read and/or write input/output. Then stop.",
    ],
)
def test_prose_is_left_alone(prose):
    assert [s.text for s in spans(prose, Protection()) if s.syntax in CODE] == []


def test_a_word_with_the_catalogs_accelerator_is_no_identifier():
    assert [s.text for s in spans("Page or_dering", Protection())] == ["or_dering"]
    assert spans("Page or_dering", Protection(accelerator="_")) == []


def test_the_check_fails_a_letter_glued_to_code_and_an_empty_translation():
    ruby = Protection(Protection().syntaxes | {"ruby"})
    source = "Could not authenticate you because %{reason}."
    found = spans(source, ruby)
    assert check(source, "No se pudo porque %{reason}s.", ruby, found) == "placeholder glued"
    assert check(source, "No se pudo porque %{reason}.", ruby, found) is None
    glued = "Run ls_files now"  # glued in the source: may stay glued
    assert check(glued, "Ejecute ls_filesx", Protection(), spans(glued, Protection())) == (
        "placeholders"  # another identifier altogether
    )
    assert check("Open", "  ", Protection(), []) == "empty"
    # msgfmt: a msgid and its msgstr both end with a newline, or neither does
    assert check("a\nb", "x\ny\n", Protection(), []) == "newlines"
    assert check("a\nb\n", "x\ny\n", Protection(), []) is None
    # placement never glues a letter to code the source kept apart
    protected = protect("{count}.", Protection())
    assert protected.place("NEU .", []).text == "{count} NEU ."


class Dropping(Mirror):
    """A model that answers nothing."""

    def segments(self, segments, request=None, progress=None):
        return [[pipeline.Translation("", 0.0, -1.0, 2)] for _ in segments.texts]


def test_no_translation_is_written_empty_and_a_value_of_code_is_kept():
    found = pipeline.translate(Dropping(), ["Open the file", "--verbose"], Request())
    assert [options[0].text for options in found.found] == ["Open the file", "--verbose"]
    assert [options[0].unsafe for options in found.found] == ["empty", None]
    data = json.dumps(
        {"locale": "en", "title": "__NAME__", "key": "app.menu.open", "text": "Open <0>it</0>"}
    ).encode()
    document = read_document(data, "json", "en.json")
    out = json.loads(translate_documents([document], document_translator(Mirror()), "es")[0])
    assert out["locale"] == "en" and out["title"] == "__NAME__" and out["key"] == "app.menu.open"
    assert out["text"].count("<0>") == 1 and out["text"].count("</0>") == 1


def test_hostile_code_unbalanced_tags_many_options_and_only_code():
    unbalanced = "Press <0>here and <1>there</1> <0>"
    assert [s.text for s in spans(unbalanced, Protection())] == ["<0>", "<1>", "</1>", "<0>"]
    placed = protect(unbalanced, Protection())
    answer = placed.place(" ".join(placed.text.split()[::-1]).upper(), [])
    assert placed.check(answer.text) is None and answer.text.count("<0>") == 2
    many = " ".join(f"--option-{k}" for k in range(10_000))
    assert len(spans(many, Protection())) == 10_000  # linear: each found once
    only = "--verbose $HOME __NAME__ <0></0>"
    kept = pipeline.translate(Mirror(), [only], Request())
    assert kept.found[0][0].text == only
