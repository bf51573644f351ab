"""Whole files of every format: the text translated, inline formatting carried, everything else
kept; read through `translate_documents` with a stand-in translator (upper case, each word
aligned to itself), so that what each format keeps can be checked exactly."""

import zipfile

import pytest

from helpers_files import PNG, docx, epub, odt, run, upper, upper_file
from vaswani.documents.formats import (
    DocumentOptions,
    read_document,
    translate_documents,
)

translated = upper_file


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(__import__("io").BytesIO(data)) as z:
        return {name: z.read(name) for name in z.namelist()}


def test_docx_runs_keep_their_formatting_around_the_translated_words():
    body = (
        f"<w:p>{run('Click ')}{run('the big', bold=True)}{run(' button.')}</w:p>"
        '<w:p><w:hyperlink r:id="x" xmlns:r="urn:r">'
        f"{run('a link')}</w:hyperlink><w:r><w:tab/></w:r>{run('after tab')}</w:p>"
    )
    source = docx(body, styles='<w:style w:styleId="b"/>')
    out = members(translated(source, "docx"))
    before = members(source)
    assert [n for n in out] == [n for n in before]  # same members, same order
    for name in ("word/styles.xml", "word/media/image1.png", "[Content_Types].xml"):
        assert out[name] == before[name]
    document = out["word/document.xml"].decode()
    assert '<w:t xml:space="preserve">CLICK </w:t>' in document
    assert '<w:rPr><w:b/></w:rPr><w:t xml:space="preserve">THE BIG</w:t>' in document
    assert "A LINK</w:t></w:r></w:hyperlink><w:r><w:tab/></w:r>" in document
    assert 'mc:Ignorable="w14"' in document and "xmlns:w14=" in document  # Word needs both


def test_docx_tables_headers_footers_and_footnotes_are_translated():
    cell = f"<w:tbl><w:tr><w:tc><w:p>{run('in a cell')}</w:p></w:tc></w:tr></w:tbl>"
    parts = {
        "header1": f"<w:p>{run('the header')}</w:p>",
        "footer1": f"<w:p>{run('the footer')}</w:p>",
        "footnotes": f'<w:footnote w:id="1"><w:p>{run("a footnote")}</w:p></w:footnote>',
    }
    out = members(translated(docx(cell, parts=parts), "docx"))
    assert "IN A CELL" in out["word/document.xml"].decode()
    assert "THE HEADER" in out["word/header1.xml"].decode()
    assert "THE FOOTER" in out["word/footer1.xml"].decode()
    assert "A FOOTNOTE" in out["word/footnotes.xml"].decode()


def test_odt_spans_and_links_keep_their_text_and_pictures_stay():
    body = (
        '<text:p text:style-name="P1">Hello <text:span text:style-name="T1">big</text:span>'
        '<text:s text:c="2"/>world, <text:a xlink:href="http://x" '
        'xmlns:xlink="http://www.w3.org/1999/xlink">link</text:a>.</text:p>'
        "<text:h>A heading</text:h>"
    )
    source = odt(body)
    out = members(translated(source, "odt"))
    assert out["Pictures/a.png"] == PNG and out["mimetype"] == members(source)["mimetype"]
    content = out["content.xml"].decode()
    assert '<text:span text:style-name="T1">BIG</text:span><text:s text:c="2"/>WORLD,' in content
    assert 'xlink:href="http://x">LINK</text:a>.</text:p>' in content
    assert "<text:h>A HEADING</text:h>" in content
    with zipfile.ZipFile(__import__("io").BytesIO(translated(source, "odt"))) as z:
        assert z.infolist()[0].filename == "mimetype"
        assert z.infolist()[0].compress_type == zipfile.ZIP_STORED  # as ODF requires


def test_epub_chapters_are_translated_as_pages_and_the_rest_kept():
    chapter = (
        '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
        "<head><title>One</title></head><body><p>It was <i>dark</i>.<br/>Then light.</p>"
        "</body></html>"
    )
    out = members(translated(epub(chapter), "epub"))
    assert out["OEBPS/style.css"] == b"p { margin: 0 }"
    page = out["OEBPS/ch1.xhtml"].decode()
    assert "<p>IT WAS <i>DARK</i>.<br/>THEN LIGHT.</p>" in page
    assert '<html xmlns="http://www.w3.org/1999/xhtml" lang="de">' in page


PO = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

#. a comment for translators
#: src/main.c:12
msgctxt "menu"
msgid "Open file"
msgstr ""

msgid "Done"
msgstr "Fertig"

msgid "one file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""
"""


def test_po_fills_empty_entries_fuzzy_keeps_translations_and_plurals():
    out = translated(PO.encode(), "po").decode()
    assert '#. a comment for translators\n#: src/main.c:12\n#, fuzzy\nmsgctxt "menu"' in out
    assert 'msgid "Open file"\nmsgstr "OPEN FILE"' in out
    assert 'msgid "Done"\nmsgstr "Fertig"' in out  # kept
    assert 'msgstr[0] "ONE FILE"\nmsgstr[1] "%D FILES"' in out
    assert '"Language: de\\n"' in out
    again = translated(PO.encode(), "po", DocumentOptions(fuzzy=False, overwrite=True)).decode()
    assert "fuzzy" not in again and 'msgstr "DONE"' in again


def test_subtitles_keep_numbers_and_timings_and_share_a_sentence_over_its_cues():
    srt = (
        "1\r\n00:00:01,000 --> 00:00:02,000\r\nThe quick brown\r\nfox jumps\r\n\r\n"
        "2\r\n00:00:02,500 --> 00:00:04,000\r\nover the dog.\r\n\r\n"
        "3\r\n00:00:05,000 --> 00:00:06,000\r\nEnd.\r\n"
    )
    out = translated(srt.encode(), "srt").decode()
    assert out == (
        "1\r\n00:00:01,000 --> 00:00:02,000\r\nTHE QUICK BROWN\r\nFOX JUMPS\r\n\r\n"
        "2\r\n00:00:02,500 --> 00:00:04,000\r\nOVER THE DOG.\r\n\r\n"
        "3\r\n00:00:05,000 --> 00:00:06,000\r\nEND.\r\n"
    )
    vtt = (
        "WEBVTT\n\nNOTE kept as it is\n\nintro\n00:01.000 --> 00:02.000 align:start\n"
        "<v Bob>Hello <i>there</i>.</v>\n\n00:03.000 --> 00:04.000\n<c.loud>Go <b>now,\n"
    )
    assert translated(vtt.encode(), "vtt").decode() == vtt.replace(
        "Hello <i>there</i>.", "HELLO <i>THERE</i>."
    ).replace("Go <b>now,", "GO <b>NOW,")


@pytest.mark.parametrize("version", ["1.2", "2.0"])
def test_xliff_targets_carry_the_inline_codes_and_a_review_state(version):
    if version == "1.2":
        xml = (
            '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file '
            'source-language="en" datatype="plaintext" original="x"><body><trans-unit id="1">'
            '<source>Click <g id="1">the big</g> button<x id="2"/> now</source></trans-unit>'
            '<trans-unit id="2" translate="no"><source>Keep</source></trans-unit>'
            "</body></file></xliff>"
        )
        expected = (
            '<target state="needs-review-translation">CLICK <g id="1">THE BIG</g> BUTTON'
            '<x id="2"/> NOW</target>'
        )
    else:
        xml = (
            '<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en">'
            '<file id="f"><unit id="1"><segment><source>Press <pc id="1">here</pc> '
            '<ph id="2" disp="{0}"/> today</source></segment></unit></file></xliff>'
        )
        expected = '<target>PRESS <pc id="1">HERE</pc> <ph id="2" disp="{0}"/> TODAY</target>'
    out = translated(xml.encode(), "xliff").decode()
    assert expected in out.replace(f' xmlns="urn:oasis:names:tc:xliff:document:{version}"', "")
    assert "KEEP" not in out


def test_markdown_keeps_code_urls_and_structure():
    md = (
        "# A *big* title\n\nSome **bold words**, `code x` and a [link](http://x.org/a_(b)) end.\n"
        "Second line.\n\n> quoted text\n\n- item one\n\n```python\nprint('hi')\n```\n\n"
        "| a | b c |\n|---|-----|\n| one | two |\n\n"
        "[![badge](https://x/b.svg)](https://x/ci) see [the guide][] or <https://x.org>\nnow.\n\n"
        "[the guide]: https://x/guide\n"
    )
    assert translated(md.encode(), "markdown").decode() == (
        "# A *BIG* TITLE\n\nSOME **BOLD WORDS**, `code x` AND A [LINK](http://x.org/a_(b)) END. "
        "SECOND LINE.\n\n> QUOTED TEXT\n\n- ITEM ONE\n\n```python\nprint('hi')\n```\n\n"
        "| A | B C |\n|---|-----|\n| ONE | TWO |\n\n"
        "[![badge](https://x/b.svg)](https://x/ci) SEE [THE GUIDE][] OR <https://x.org> NOW.\n\n"
        "[the guide]: https://x/guide\n"
    )


def test_a_long_file_is_translated_a_chunk_at_a_time_with_the_same_result(monkeypatch):
    import vaswani.documents.formats as files

    cues = "\n\n".join(
        f"{i}\n00:00:0{i},000 --> 00:00:0{i},500\nCue <i>number</i> {i}." for i in range(1, 8)
    )
    whole = translated(cues.encode(), "srt")
    calls = []

    def counted(texts, alignments, code=None):
        calls.append(len(texts))
        return upper(texts, alignments, code)

    monkeypatch.setattr(files, "CHUNK_TEXTS", 3)
    document = read_document(cues.encode(), "srt", "test.srt", DocumentOptions())
    assert translate_documents([document], counted, "de")[0] == whole
    assert calls == [3, 3, 1]
