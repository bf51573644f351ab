"""A translated catalog builds: its placeholders, markup and accelerators kept by construction,
its plural forms those of the target language, its header filled, checked by gettext's own
`msgfmt -c` and translate-toolkit's pofilter checks; an entry that fails is left untranslated."""

import shutil
import subprocess

import polib
import pytest

from helpers import Mirror
from vaswani.documents.formats import read_document, translate_documents
from vaswani.documents.po import accelerator_of, plural_rule
from vaswani.documents.protect import protect
from vaswani.documents.spans import DEFAULT, NONE, Protection
from vaswani.translation.files import document_translator
from vaswani.translation.request import Request

TEMPLATE = r"""# A template as xgettext writes it.
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\n"
"Report-Msgid-Bugs-To: \n"
"POT-Creation-Date: 2026-11-26 10:00+0000\n"
"PO-Revision-Date: YEAR-MO-DA HO:MI+ZONE\n"
"Last-Translator: FULL NAME <EMAIL@ADDRESS>\n"
"Language-Team: LANGUAGE <LL@li.org>\n"
"Language: \n"
"MIME-Version: 1.0\n"
"Content-Type: text/plain; charset=CHARSET\n"
"Content-Transfer-Encoding: 8bit\n"
"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\n"

#: src/main.c:10
#, c-format
msgid "Invalid time period %s"
msgstr ""

#, c-format
msgid "%s (%s) - %s saved [%s/%s]\n"
msgstr ""

#, c-format
msgid "%-*s %d files"
msgstr ""

#, python-format
msgid "Hello %(name)s, you have %(count)d new messages"
msgstr ""

#, python-brace-format
msgid "Hello {name}, you have {count} new messages"
msgstr ""

msgid "Visit <a href=\"https://example.org\">our site</a> for help."
msgstr ""

msgid "_Open"
msgstr ""

msgid "Save _As…"
msgstr ""

msgid "_Quit"
msgstr ""

#, c-format
msgid "%s"
msgstr ""

#, no-c-format
msgid "100% sure"
msgstr ""

#, c-format
msgid "%d file copied"
msgid_plural "%d files copied"
msgstr[0] ""
msgstr[1] ""
"""


def translate_catalog(text, language, model=None):
    document = read_document(text.encode(), "po", "demo.pot")
    translate = document_translator(model or Mirror())
    return translate_documents([document], translate, language)[0]


def entries(data):
    return {e.msgid: e for e in polib.pofile(data.decode())}


@pytest.mark.parametrize(
    ("language", "forms"),
    [("ru", 3), ("ar", 6), ("ja", 1), ("de", 2), ("es", 2), ("fr", 2), ("pt_BR", 2), ("ca", 2)],
)
def test_plural_forms_of_the_target_and_a_filled_header(language, forms, tmp_path):
    data = translate_catalog(TEMPLATE, language)
    catalog = polib.pofile(data.decode())
    assert catalog.metadata["Language"] == language
    assert catalog.metadata["Plural-Forms"] == plural_rule(language)[1]
    assert "CHARSET" not in catalog.metadata["Content-Type"]
    plural = entries(data)["%d file copied"]
    assert sorted(plural.msgstr_plural) == list(range(forms))
    assert all(form.count("%d") == 1 for form in plural.msgstr_plural.values())
    if forms == 1:  # one form for every number: the plural's translation
        assert plural.msgstr_plural[0] == "COPIED %d FILES"  # before the word "files" was
    msgfmt = shutil.which("msgfmt")
    if msgfmt is not None:
        path = tmp_path / "out.po"
        path.write_bytes(data)
        done = subprocess.run([msgfmt, "-c", "-o", "/dev/null", str(path)], capture_output=True)
        assert done.returncode == 0, done.stderr.decode()


def test_plural_forms_are_gettexts_where_cldr_counts_a_form_for_exponents():
    # msginit's Spanish and French: 2 forms, where CLDR adds "many" for 1e6 (operand e)
    assert plural_rule("es") == (2, "nplurals=2; plural=(n != 1);")
    assert plural_rule("fr") == (2, "nplurals=2; plural=(n > 1);")
    assert plural_rule("pt-BR")[1] == plural_rule("fr")[1]
    assert plural_rule("sr@latin") == plural_rule("ru") and plural_rule("ru")[0] == 3
    assert plural_rule("ca")[0] == 2  # not in gettext's table: CLDR's without the exponent form


ENGLISH = TEMPLATE.replace('"Language: \\n"', '"Language: en\\n"').replace(
    "nplurals=INTEGER; plural=EXPRESSION;", "nplurals=2; plural=(n != 1);"
)


def test_a_catalog_of_another_language_gets_the_targets_language_and_plural_forms():
    assert '"Language: en\\n"' in ENGLISH  # Django's English source catalogs
    catalog = polib.pofile(translate_catalog(ENGLISH, "ru").decode())
    assert catalog.metadata["Language"] == "ru"
    assert catalog.metadata["Plural-Forms"] == plural_rule("ru")[1]
    assert sorted(entries(str(catalog).encode())["%d file copied"].msgstr_plural) == [0, 1, 2]
    # a catalog of the target language keeps its translators' Plural-Forms (Django's Russian: 4)
    russian = ENGLISH.replace("Language: en", "Language: ru_RU").replace(
        "nplurals=2; plural=(n != 1);",
        "nplurals=4; plural=(n%10==1 ? 0 : n%10==2 ? 1 : n==3 ? 2 : 3);",
    )
    catalog = polib.pofile(translate_catalog(russian, "ru").decode())
    assert (
        catalog.metadata["Language"] == "ru_RU" and "nplurals=4" in catalog.metadata["Plural-Forms"]
    )
    assert len(entries(str(catalog).encode())["%d file copied"].msgstr_plural) == 4


def test_what_the_tools_check_is_kept_and_nothing_else_changes():
    data = translate_catalog(TEMPLATE, "fr")
    found = entries(data)
    assert found["Invalid time period %s"].msgstr == "PERIOD %s TIME INVALID"  # after "period"
    assert found["%s (%s) - %s saved [%s/%s]\n"].msgstr == "%s (%s) - %s SAVED [%s/%s]\n"
    assert found["%-*s %d files"].msgstr.split().count("%-*s") == 1
    assert "%(name)s" in found["Hello %(name)s, you have %(count)d new messages"].msgstr
    link = found['Visit <a href="https://example.org">our site</a> for help.'].msgstr
    assert '<a href="https://example.org">' in link and link.count("</a>") == 1
    assert [found[k].msgstr for k in ("_Open", "_Quit", "%s")] == ["_OPEN", "_QUIT", "%s"]
    assert found["Save _As…"].msgstr.count("_") == 1
    assert found["100% sure"].msgstr == "SURE 100%"  # no-c-format: the % is text
    assert all("fuzzy" in e.flags for e in found.values() if e.msgid)
    checks = pytest.importorskip("translate.filters.checks")
    checker = checks.GnomeChecker()
    for entry in found.values():
        if entry.msgid and not entry.msgid_plural:
            for name in ("printf", "pythonbraceformat", "xmltags", "accelerators", "newlines"):
                assert getattr(checker, name)(entry.msgid, entry.msgstr), (name, entry.msgstr)


def test_an_entry_that_fails_a_check_is_left_untranslated_whole():
    model = Mirror()
    model.extra = " %q"  # a model that invents what no syntax reads but printf would
    found = entries(translate_catalog(TEMPLATE, "de", model))
    assert found["Invalid time period %s"].msgstr == ""
    assert found["Invalid time period %s"].flags == ["c-format"]  # not marked fuzzy either
    assert set(found["%d file copied"].msgstr_plural.values()) == {""}


def test_the_catalogs_accelerator_is_the_marker_its_labels_use():
    assert accelerator_of(["_Open", "Save _As", "file_name", "R&D"]) == "_"
    assert accelerator_of(["&Open", "Save &As", "snake_case"]) == "&"
    assert accelerator_of(["file_name", "plain text"]) is None
    assert plural_rule("xx-unknown") is None


HOSTILE = [
    "{",
    "}{ %s {{{x}}} %(",
    "{n, plural, one {{m, select, x {# {n, plural, other {deep}}}}} other {#}}",
    "{n, plural, one {unclosed}",
    "%s",
    "<b><i>crossed</b></i> %d",
    " ".join(f"w{k} %s" for k in range(5000)),
]


def test_hostile_messages_give_a_catalog_that_builds(tmp_path):
    entries_text = "".join(
        f'#, c-format\nmsgid "{message}"\nmsgstr ""\n\n' for message in HOSTILE
    ).replace('#, c-format\nmsgid "{', 'msgid "{')
    data = translate_catalog(entries_text, "de")
    found = entries(data)
    for message in HOSTILE:
        out = found[message].msgstr
        assert out == "" or protect_check(message, out), (message[:40], out[:80])
    assert found["%s"].msgstr == "%s"  # nothing but code: kept
    msgfmt = shutil.which("msgfmt")
    if msgfmt is not None:
        path = tmp_path / "hostile.po"
        path.write_bytes(data)
        done = subprocess.run([msgfmt, "-c", "-o", "/dev/null", str(path)], capture_output=True)
        assert done.returncode == 0, done.stderr.decode()[:500]


def protect_check(source, result):
    return protect(source, Protection(DEFAULT | {"printf"})).check(result) is None


def test_a_catalogs_code_and_the_users_own_patterns_together():
    catalog = '#, c-format\nmsgid "Version @V@ of %s"\nmsgstr ""\n'
    mine = Protection(patterns=(r"@\w+@",))
    document = read_document(catalog.encode(), "po", "own.po")
    translate = document_translator(Mirror(), Request(protect=mine))
    out = entries(translate_documents([document], translate, "de")[0])["Version @V@ of %s"]
    assert out.msgstr.count("@V@") == 1 and out.msgstr.count("%s") == 1
    document = read_document(catalog.encode(), "po", "own.po")  # the first was filled
    translate = document_translator(Mirror(), Request(protect=NONE))
    out = entries(translate_documents([document], translate, "de")[0])["Version @V@ of %s"]
    assert out.msgstr == "%S OF @V@ VERSION"  # --no-protect: every character to the model


DJANGO = r"""# This file is distributed under the same license as the Django package.
#
msgid ""
msgstr ""
"Project-Id-Version: django\n"
"Language: es\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"
"Content-Type: text/plain; charset=UTF-8\n"

#: contrib/admin/actions.py:17 contrib/admin/templates/admin/base.html:42
#: contrib/auth/forms.py:88
#, python-format
msgid ""
"Successfully deleted %(count)d %(items)s, and this sentence is long enough to "
"be wrapped by the tools that wrote it."
msgstr ""

#: core/validators.py:12
msgid "Enter a valid value."
msgstr "Introduzca un valor válido."

#. Translators: a comment kept as it is
#: db/models/fields.py:99
#, python-format
msgid "%(model)s with this %(field)s already exists."
msgid_plural "%(model)s with these %(field)s already exist."
msgstr[0] ""
msgstr[1] ""

#~ msgid "An old message"
#~ msgstr "Un mensaje viejo"
"""


def test_a_catalog_keeps_its_layout_only_msgstr_and_flag_lines_change():
    data = translate_catalog(DJANGO, "es")
    before, after = DJANGO.splitlines(), data.decode().splitlines()
    removed = [line for line in before if line not in after]
    added = [line for line in after if line not in before]
    assert all(line.startswith(("msgstr", '"', "#,")) for line in removed + added), added
    assert (
        '"Successfully deleted %(count)d %(items)s, and this sentence is long enough to "' in after
    )
    assert (
        "#: contrib/auth/forms.py:88" in after
        and "#. Translators: a comment kept as it is" in after
    )
    assert "#, fuzzy, python-format" in after  # fuzzy first, as gettext writes it
    assert after[-2:] == before[-2:]  # the obsolete entry as it was
    # nothing new to translate: not a byte changes
    done = DJANGO.replace('msgstr ""\n\n#: core', 'msgstr "Hecho %(count)d %(items)s"\n\n#: core')
    done = done.replace('msgstr[0] ""\nmsgstr[1] ""', 'msgstr[0] "uno"\nmsgstr[1] "otros"')
    assert translate_catalog(done, "es").decode() == done
