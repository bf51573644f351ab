"""Every resource reader is total: any bytes under a format's extension give a translation or one
`DocumentError`, never another exception, and whatever is written parses with the format's own
parser (json, PyYAML, lxml, plistlib, polib and `msgfmt -c`; vaswani's own reader for .properties
and .strings, which have none in Python). Hypothesis mutates a real-looking file of each format
with the pieces its grammar is made of, and builds files from that grammar.

FUZZ_EXAMPLES sets the examples per format (default 40: the suite's share of time)."""

import json
import os
import plistlib
import shutil
import subprocess

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from helpers import Mirror
from vaswani.documents.formats import DocumentError, read_document, translate_documents
from vaswani.translation.files import document_translator

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", 40))

SEEDS = {
    "po": 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
    '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n#, c-format\nmsgid "Open %s"\n'
    'msgstr ""\n\nmsgid "one file"\nmsgid_plural "%d files"\nmsgstr[0] ""\nmsgstr[1] ""\n',
    "properties": "# comment\na = Open {0} now\nb: Close \\\n    it\nc\\ d=\\u00e9t\\u00e9\n",
    "strings": '/* c */\n"a" = "Open %@";\n"b" = "Close\\n";\nkey = "\\U00e9t\\u00e9";\n',
    "json": '{"a": "Open {name}", "b": ["Close", {"c": "Save {{x}}"}], "n": 3}',
    "arb": '{"@@locale": "en", "a": "Open {n, plural, one{# file} other{# files}}", "@a": {}}',
    "xcstrings": '{"sourceLanguage": "en", "strings": {"Open": {}, "k": {"localizations": '
    '{"en": {"stringUnit": {"state": "translated", "value": "Close %@"}}}}}, "version": "1.0"}',
    "yaml": "en:\n  a: Open %{name}\n  b: 'Close it'\n  c: |\n    Two\n    lines\n  d: [x, y]\n",
    "android": '<?xml version="1.0" encoding="utf-8"?>\n<resources>\n'
    '<string name="a">Open <b>%1$s</b></string>\n<string-array name="b"><item>Close</item>'
    '</string-array>\n<plurals name="c"><item quantity="one">%d file</item>'
    '<item quantity="other">%d files</item></plurals>\n</resources>\n',
    "qt": '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE TS>\n<TS version="2.1">\n<context>'
    '<name>W</name><message><source>&amp;Open %1</source><translation type="unfinished"/>'
    '</message><message numerus="yes"><source>%n file(s)</source><translation type='
    '"unfinished"><numerusform></numerusform></translation></message></context>\n</TS>\n',
    "resx": '<?xml version="1.0" encoding="utf-8"?>\n<root><data name="a" xml:space="preserve">'
    '<value>Open {0}</value></data><data name="b"><value>Close</value></data></root>\n',
    "stringsdict": plistlib.dumps(
        {
            "files": {
                "NSStringLocalizedFormatKey": "%#@n@ here",
                "n": {
                    "NSStringFormatSpecTypeKey": "NSStringPluralRuleType",
                    "NSStringFormatValueTypeKey": "d",
                    "one": "%d file",
                    "other": "%d files",
                },
            }
        }
    ).decode(),
}
NAMES = {
    "po": "a.po",
    "properties": "messages.properties",
    "strings": "Localizable.strings",
    "json": "en.json",
    "arb": "app_en.arb",
    "xcstrings": "Localizable.xcstrings",
    "yaml": "en.yml",
    "android": "strings.xml",
    "qt": "app.ts",
    "resx": "Strings.resx",
    "stringsdict": "Localizable.stringsdict",
}
PIECES = [
    *["\\", '"', "'", "<", ">", "&", "&amp;", "&#0;", "{", "}", "{0}", "%s", "%1$@", "%n", "#"],
    *["\\u", "\\ud800", "\\uD83D\\uDE00", "\\UD800", "\\uZZZZ", "\n", "\r", "\r\n", "\t", " "],
    *["=", ":", "!", ";", ",", "/*", "*/", "//", "[", "]", "-", "- ", "*a", "&a ", "!!str "],
    *["null", "0", "true", "[]", "{}", '"x": null', '"localizations": null', '"k": ["v"]'],
    *["</string>", "<b>", "</b>", "<xi:include/>", "<![CDATA[", "]]>", "<!--", "-->", "<br/>"],
    *["<!DOCTYPE x>", "<integer>1</integer>", "<string>s</string>", "<key>one</key>", "<dict>"],
    *['msgid "x"\n', 'msgstr ""\n', 'msgid_plural "y"\n', 'msgstr[0] ""\n', "#, fuzzy\n"],
    *['"Plural-Forms: nplurals=99999999999; plural=n;\\n"\n', '"Language: ru\\n"\n'],
    *["é", "😀", "\u2028", "\x00", "\x7f", "\ufeff", "a" * 300],
]
MUTATIONS = st.lists(
    st.tuples(
        st.integers(0, 10**6),
        st.sampled_from(["insert", "delete", "replace"]),
        st.sampled_from(PIECES),
    ),
    min_size=1,
    max_size=6,
)


def mutated(seed: str, edits: list[tuple[int, str, str]]) -> bytes:
    text = seed
    for where, kind, piece in edits:
        at = where % (len(text) + 1)
        if kind == "insert":
            text = text[:at] + piece + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + len(piece) :]
        else:
            text = text[:at] + piece + text[at + len(piece) :]
    return text.encode("utf-8", "surrogatepass")


stand_in = document_translator(Mirror())
"""The pipeline users get (code protected, translations checked) over a stand-in model."""


MSGFMT = shutil.which("msgfmt")


def parses(fmt: str, data: bytes, name: str) -> None:
    """An AssertionError (or the parser's own) unless the format's own parser reads `data`."""
    if fmt in ("json", "arb", "xcstrings"):
        json.loads(data)
    elif fmt == "yaml":
        yaml.safe_load(data)
    elif fmt in ("android", "qt", "resx"):
        etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
    elif fmt == "stringsdict":
        plistlib.loads(data)
    elif fmt == "po":
        import polib

        polib.pofile(data.decode("utf-8"))
        if MSGFMT is not None:
            done = subprocess.run(
                [MSGFMT, "-c", "-o", os.devnull, "-"], input=data, capture_output=True
            )
            assert done.returncode == 0, done.stderr.decode(errors="replace")
    else:  # .properties, .strings: read again by vaswani's reader, the grammar's
        read_document(data, fmt, name)


def translated_or_refused(fmt: str, data: bytes) -> None:
    name = NAMES[fmt]
    try:
        document = read_document(data, fmt, name)
        out = translate_documents([document], stand_in, "de")[0]
    except DocumentError:
        return  # one clear error: what a damaged file must give
    if fmt == "po" and MSGFMT is not None:
        try:  # an entry translated wrongly already is kept as it was: msgfmt -c refuses both
            parses(fmt, data, name)
        except AssertionError:
            return
    parses(fmt, out, name)


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_the_seed_files_translate_and_parse(fmt):
    data = SEEDS[fmt].encode()
    document = read_document(data, fmt, NAMES[fmt])
    assert document.texts(), fmt  # a seed that the reader reads nothing of fuzzes nothing
    parses(fmt, translate_documents([document], stand_in, "de")[0], NAMES[fmt])


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_a_mutated_file_is_translated_or_refused_never_a_crash(fmt):
    @FUZZ
    @given(edits=MUTATIONS)
    def check(edits):
        translated_or_refused(fmt, mutated(SEEDS[fmt], edits))

    check()


KEY = st.text(st.sampled_from("abc_.-9 é:=\\{}\"'#!"), min_size=1, max_size=6)
VALUE = st.lists(
    st.one_of(st.sampled_from(PIECES), st.characters(exclude_categories=("Cs",))), max_size=8
).map("".join)


@FUZZ
@given(entries=st.lists(st.tuples(KEY, VALUE, st.sampled_from([" = ", "=", ":", " "])), max_size=6))
def test_properties_from_the_grammar(entries):
    lines = "\n".join(f"{key}{separator}{value}" for key, value, separator in entries)
    translated_or_refused("properties", lines.encode("utf-8", "surrogatepass"))


@FUZZ
@given(entries=st.lists(st.tuples(KEY, VALUE), max_size=6))
def test_strings_from_the_grammar(entries):
    quoted = lambda t: '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'  # noqa: E731
    lines = "\n".join(f"{quoted(k)} = {quoted(v)};" for k, v in entries)
    translated_or_refused("strings", lines.encode("utf-8", "surrogatepass"))


@FUZZ
@given(entries=st.lists(st.tuples(KEY, VALUE), max_size=6), flag=st.sampled_from(["", "c-format"]))
def test_po_from_the_grammar(entries, flag):
    def c_string(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    header = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
    seen, body = set(), []
    for key, value in entries:
        if key in seen:
            continue
        seen.add(key)
        body.append(f"#, {flag}\n" * bool(flag) + f'msgid {c_string(key + value)}\nmsgstr ""\n')
    data = (header + "\n".join(body)).encode("utf-8", "surrogatepass")
    translated_or_refused("po", data)


@FUZZ
@given(values=st.lists(VALUE, min_size=1, max_size=6))
def test_json_and_android_from_their_grammar(values):
    as_json = json.dumps({f"k{n}": v for n, v in enumerate(values)})
    translated_or_refused("json", as_json.encode("utf-8", "surrogatepass"))
    strings = "".join(f'<string name="k{n}">{v}</string>' for n, v in enumerate(values))
    translated_or_refused(
        "android", f"<resources>{strings}</resources>".encode("utf-8", "surrogatepass")
    )
