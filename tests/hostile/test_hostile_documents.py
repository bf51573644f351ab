"""Hostile whole files (`vaswani translate --input FILE`): damaged and hostile files of every
format are one clear error and nothing is written."""

import io
import zipfile

import pytest
from lxml import etree

from helpers import translate_cli
from helpers_files import docx, epub, odt, pdf_of_objects, run, zip_bomb, zipped
from vaswani.documents.formats import DocumentError, read_document, translate_documents


def damaged_deflate(data: bytes, member: str) -> bytes:
    """A zip whose member's deflate stream has bytes flipped in its middle."""
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        info = z.getinfo(member)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    middle = start + info.compress_size // 2
    out = bytearray(data)
    out[middle : middle + 4] = bytes(b ^ 0xFF for b in out[middle : middle + 4])
    return bytes(out)


def twice(member: str) -> bytes:
    """A .docx with two members named `member`: the real body, then 12 characters."""
    import warnings

    source = io.BytesIO(docx(f"<w:p>{run('the real body of the document')}</w:p>"))
    with zipfile.ZipFile(source, "a") as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name
        z.writestr(member, "<w:document/>")
    return source.getvalue()


DOCTYPE_16 = (
    '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE d [<!ENTITY x "y">]>'
    '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    "<w:body><w:p><w:r><w:t>&x;</w:t></w:r></w:p></w:body></w:document>"
).encode("utf-16")

# --- Whole files (`vaswani translate --input FILE`): damaged and hostile files of every format --

HOSTILE = {
    "bomb.docx": zip_bomb,
    "truncated.docx": lambda p: p.write_bytes(docx("<w:p/>")[:200]),
    "xxe.docx": lambda p: p.write_bytes(
        zipped(
            {
                "word/document.xml": '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM '
                '"file:///etc/passwd">]><d>&x;</d>'
            }
        )
    ),
    "entities.xlf": lambda p: p.write_text(
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
        '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"/>'
    ),
    "bad.po": lambda p: p.write_text('msgid "a\\q\nmsgstr ""\n'),
    "broken.srt": lambda p: p.write_text("1\n00:00:01,000 --> garbage\nHello\n"),
    "unclosed.html": lambda p: p.write_text("<p>Hello <b>world <i>and more</p>"),
    "latin1.md": lambda p: p.write_bytes("Grüße".encode("latin-1")),
    "huge-paragraph.html": lambda p: p.write_text("<p>" + "word " * 250_000 + "</p>"),
    "deep.html": lambda p: p.write_text("<p>" + "<span>" * 3000 + "x" + "</span>" * 3000 + "</p>"),
    "very-deep.html": lambda p: p.write_text("<p>" + "<b>" * 100_000 + "x</p>"),
    "deep.md": lambda p: p.write_text("*" * 1500 + "x" + "*" * 1500 + "\n"),
    "deep.srt": lambda p: p.write_text(
        "1\n00:00:01,000 --> 00:00:02,000\n" + "<i>" * 3000 + "x" + "</i>" * 3000 + "\n"
    ),
    "deep.epub": lambda p: p.write_bytes(
        epub("<html><body><p>" + "<span>" * 3000 + "x" + "</span>" * 3000 + "</p></body></html>")
    ),
    "section.html": lambda p: p.write_text("<p>a <![foo[ x ]]> b</p>"),
    "open-section.html": lambda p: p.write_text("<p>a <![ x"),
    "forever.srt": lambda p: p.write_text(
        "1\n99999999999:00:00,000 --> 99999999999:00:01,000\nHello.\n"
    ),
    "bad-timing.vtt": lambda p: p.write_text(
        "WEBVTT\n\n00:01.000 --> 00:02.000\nHello.\n\n00:03.000 - 00:04.000\nLost.\n"
    ),
    "deflate.docx": lambda p: p.write_bytes(
        damaged_deflate(docx("<w:p>" + run("word " * 2000) + "</w:p>"), "word/document.xml")
    ),
    "image-deflate.odt": lambda p: p.write_bytes(
        damaged_deflate(odt("<text:p>Hello</text:p>"), "Pictures/a.png")
    ),
    "twice.docx": lambda p: p.write_bytes(twice("word/document.xml")),
    "utf16-doctype.docx": lambda p: p.write_bytes(
        zipped({"[Content_Types].xml": "<Types/>", "word/document.xml": DOCTYPE_16})
    ),
    # the formats apps are localised in
    "entities.xml": lambda p: p.write_text(
        '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
        '<resources><string name="x">&b;</string></resources>'
    ),
    "external.xml": lambda p: p.write_text(
        '<?xml version="1.0"?><!DOCTYPE r SYSTEM "file:///etc/passwd" [<!ELEMENT r ANY>]>'
        '<resources><string name="x">Hi</string></resources>'
    ),
    "not-resources.xml": lambda p: p.write_text("<svg><text>Hello</text></svg>"),
    "entities.ts": lambda p: p.write_text(
        '<!DOCTYPE TS [<!ENTITY x SYSTEM "file:///etc/passwd">]><TS><context><message>'
        "<source>&x;</source><translation/></message></context></TS>"
    ),
    "entities.stringsdict": lambda p: p.write_text(
        '<!DOCTYPE plist [<!ENTITY a "lol">]><plist><dict><key>k</key><string>&a;</string>'
        "</dict></plist>"
    ),
    "xxe.resx": lambda p: p.write_text(
        '<!DOCTYPE root [<!ENTITY x SYSTEM "http://example.com/x">]><root><data name="a">'
        "<value>&x;</value></data></root>"
    ),
    "aliases.yml": lambda p: p.write_text(
        'a: &a ["lol", "lol", "lol"]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n'
    ),
    "tag.yml": lambda p: p.write_text('en:\n  x: !!python/object/apply:os.system ["id"]\n'),
    "local-tag.yaml": lambda p: p.write_text("en:\n  x: !secret Hello\n"),
    "deep.yml": lambda p: p.write_text("[" * 200_000 + "]" * 200_000 + "\n"),
    "broken.yml": lambda p: p.write_text("en:\n  a: [unclosed\n  b: x\n"),
    "deep.json": lambda p: p.write_text("[" * 1_000_000 + "]" * 1_000_000),
    "broken.json": lambda p: p.write_text('{"a": "Hello",}'),
    "deep.arb": lambda p: p.write_text('{"a": ' + '{"b": ' * 5000 + '"x"' + "}" * 5001),
    "list.arb": lambda p: p.write_text('["Hello"]'),
    "deep.xcstrings": lambda p: p.write_text('{"strings": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    "no-strings.xcstrings": lambda p: p.write_text('{"version": "1.0"}'),
    "broken.strings": lambda p: p.write_text('"a" = "Hello" "b";\n'),
    "unclosed.strings": lambda p: p.write_text('"a" = "Hello;\n'),
    "bad-utf16.strings": lambda p: p.write_bytes(b"\xff\xfe" + b"\x00\xd8" * 3),
    "bomb.pptx": zip_bomb,
    "bomb.odp": zip_bomb,
    "not-a-deck.pptx": lambda p: p.write_bytes(docx("<w:p/>")),
    "million-objects.pdf": lambda p: p.write_bytes(pdf_of_objects(1_000_000)),
    "not-really.pdf": lambda p: p.write_text("Hello, I am not a PDF"),
    "truncated.pdf": lambda p: p.write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Cat"),
    "xxe.pptx": lambda p: p.write_bytes(
        zipped(
            {
                "ppt/presentation.xml": "<p/>",
                "ppt/slides/slide1.xml": '<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                "<d>&x;</d>",
            }
        )
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_damaged_and_hostile_documents_are_one_clear_error_and_nothing_is_written(
    numbers_run, capsys, tmp_path, name
):
    source, target = tmp_path / name, tmp_path / f"out-{name}"
    HOSTILE[name](source)
    files = ["--input", str(source), "--output", str(target)]
    code, out, err = translate_cli(capsys, numbers_run, *files)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and str(source) in err
    assert not target.exists()


# --- What is read right is written right: markup byte for byte, targets XML can hold ----------


def upper(texts, alignments, code=None):
    """A stand-in translator: each text in upper case, each word aligned to itself."""
    found = [[(i, i) for i in range(len(t.split()))] if alignments else None for t in texts]
    return [t.upper() for t in texts], found


def test_cdata_and_conditional_comments_are_written_back_byte_for_byte():
    page = "<p>a <![CDATA[<b>x</b>]]> b <![if IE]>c<![endif]> d</p>"
    document = read_document(page.encode(), "html", "page.html")
    out = translate_documents([document], lambda t, a, c: (t, [None] * len(t)))[0].decode()
    assert out == page


def test_control_characters_from_a_glossary_never_break_a_docx():
    source = docx(f"<w:p>{run('Hello world')}</w:p>")
    document = read_document(source, "docx", "a.docx")
    out = translate_documents([document], lambda t, a, c: (["HALLO\x01 WELT\x0b"], [None]))[0]
    with zipfile.ZipFile(io.BytesIO(out)) as z:
        body = etree.fromstring(z.read("word/document.xml"))
    assert "".join(body.itertext()) == "HALLO WELT"


def test_a_bold_word_keeps_its_text_whatever_the_alignment():
    body = (
        f"<w:p>{run('Se levantaban madrugando ')}{run('y', bold=True)}{run(' enviándolos.')}</w:p>"
    )
    source = docx(body, styles='<w:style w:styleId="b"/>')
    translation = "They got up early and sent them."
    for alignment in ([], [(0, 0), (1, 1), (2, 3), (4, 5)], [(0, 4), (1, 0), (3, 1), (4, 2)]):
        document = read_document(source, "docx", "a.docx")
        out = translate_documents([document], lambda t, a, c, al=alignment: ([translation], [al]))[
            0
        ]
        with zipfile.ZipFile(io.BytesIO(out)) as z:
            xml = z.read("word/document.xml").decode()
        bold = xml.split("<w:b/></w:rPr>")[1].split("</w:t>")[0].split(">")[-1]
        assert bold.strip(), (alignment, xml)
        texts = [t.split(">")[-1] for t in xml.split("</w:t>")[:-1]]
        assert "".join(texts) == translation, texts  # every word once, in order


XLIFF_12 = (
    '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file '
    'source-language="en" datatype="plaintext" original="x"><body>'
    '<trans-unit id="1"><source>Open</source></trans-unit>'
    '<group translate="no"><trans-unit id="2"><source>Keep me</source></trans-unit></group>'
    "</body></file></xliff>"
)
XLIFF_20 = (
    '<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en">'
    '<file id="f"><unit id="1"><segment><source>Click <sc id="1"/>here now<ec startRef="1"/> '
    'please</source></segment></unit></file><file id="g" translate="no"><unit id="2"><segment>'
    "<source>Keep me</source></segment></unit></file></xliff>"
)


def test_xliff_units_inherit_translate_no():
    for data in (XLIFF_12, XLIFF_20):
        texts = read_document(data.encode(), "xliff", "a.xlf").texts()
        assert "Keep me" not in texts and len(texts) == 1, texts


def test_xliff_2_start_codes_stay_before_their_end_codes():
    for alignment in ([(0, 3), (1, 2), (2, 1), (3, 0)], [(1, 3), (2, 0)], []):
        document = read_document(XLIFF_20.encode(), "xliff", "a.xlf")
        out = translate_documents([document], lambda t, a, c, al=alignment: (["A B C D"], [al]))[
            0
        ].decode()
        target = out.split("<target>")[1].split("</target>")[0]
        assert target.index("<sc ") < target.index("<ec "), (alignment, target)
        etree.fromstring(out.encode())


@pytest.mark.parametrize("name", ["deep.html", "section.html", "forever.srt", "twice.docx"])
def test_hostile_documents_are_a_document_error_in_python_too(tmp_path, name):
    source = tmp_path / name
    HOSTILE[name](source)
    fmt = {"html": "html", "srt": "srt", "docx": "docx"}[name.rsplit(".", 1)[1]]
    with pytest.raises(DocumentError, match=name):
        read_document(source.read_bytes(), fmt, str(source))
