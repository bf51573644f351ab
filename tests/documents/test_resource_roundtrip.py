"""Whatever a model writes, an app's resource file stays readable and says exactly that: each
format's writer (quotes, escapes, XML, YAML's styles) is checked by property, any translation
written into a sample file and read back by the format's own reader (json, PyYAML, lxml) or
vaswani's, equal to what was written."""

import json
from pathlib import Path

import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lxml import etree

from vaswani.documents.appxml import android_text
from vaswani.documents.formats import format_of, read_document, translate_documents
from vaswani.documents.office import xml_text

TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from("ab Z9'\"\\&<>{}%#:-@?!*|[],\n\t é中😀\u2028\u0085\x7f\x01"),
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
    ),
    min_size=1,
    max_size=30,
).filter(lambda t: t.strip() and t == t.strip())

SAMPLES = {
    "en.json": '{\n  "a": "Open",\n  "b": ["Close"]\n}\n',
    "en.yml": "en:\n  a: Open\n  b: 'Close it'\n  c: \"Save\"\n  d: |\n    Two\n    lines\n",
    "a.properties": "# c\na = Open\nb: Close\n",
    "a.strings": '"a" = "Open";\n"b" = "Close";\n',
    "strings.xml": '<resources>\n  <string name="a">Open</string>\n</resources>\n',
    "a.resx": '<root>\n  <data name="a" xml:space="preserve"><value>Open</value></data>\n</root>\n',
}


def written(name: str, translation: str) -> bytes:
    document = read_document(SAMPLES[name].encode(), format_of(Path(name)), name)

    def model(texts, alignments, code):
        return [translation] * len(texts), [None] * len(texts)

    return translate_documents([document], model, "de")[0]


def read_back(name: str, data: bytes) -> list[str]:
    """The values of a written file, read by the format's own reader where there is one."""
    if name.endswith(".json"):
        found = json.loads(data)
        return [found["a"], found["b"][0]]
    if name.endswith(".yml"):
        found = yaml.safe_load(data)["de"]
        return [found[k].rstrip("\n") if k == "d" else found[k] for k in "abcd"]
    if name.endswith(".xml"):
        string = etree.fromstring(data).find("string")
        return [android_text("".join(string.itertext()))]
    if name.endswith(".resx"):
        return [etree.fromstring(data).find("data/value").text or ""]
    fmt = "properties" if name.endswith(".properties") else "strings"
    return read_document(data, fmt, name).texts()


def expected(name: str, translation: str) -> str:
    """What the format can hold of it: XML holds no control characters, a block of YAML no
    trailing spaces on a line."""
    if name.endswith((".xml", ".resx")):
        return xml_text(translation)
    return translation


@settings(max_examples=int(__import__("os").environ.get("ROUNDTRIP_EXAMPLES", 150)), deadline=None)
@given(name=st.sampled_from(sorted(SAMPLES)), translation=TEXT)
def test_any_translation_is_written_so_that_the_format_reads_it_back(name, translation):
    # Android's inner XML holds entities and backslash escapes as code (protected in the source,
    # so kept as they are): the rest of what a model writes is what is checked there
    assume(name != "strings.xml" or not ("&" in translation or "\\" in translation))
    data = written(name, translation)
    values = read_back(name, data)
    want = expected(name, translation)
    assert all(v == want for v in values), (name, translation, values, data)
