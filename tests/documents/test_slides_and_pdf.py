"""Slide decks (.pptx made by python-pptx, .odp) and PDF (made and read back by PyMuPDF, the
optional `pdf` extra): text translated where it was, the rest of the file kept; without PyMuPDF
a .pdf is one clear error."""

import io
import sys
import zipfile

import pytest

from helpers_files import upper_file, zipped
from vaswani.documents.formats import (
    DocumentError,
    available,
    read_document,
)

translated = upper_file


def deck() -> bytes:
    pptx = pytest.importorskip("pptx")
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    slides = pptx.Presentation()
    first = slides.slides.add_slide(slides.slide_layouts[1])
    first.shapes.title.text = "Quarterly results"
    body = first.placeholders[1].text_frame
    body.text = "Revenue grew"
    runs = body.add_paragraph()
    runs.add_run().text = "Costs "
    bold = runs.add_run()
    bold.text, bold.font.bold = "fell sharply", True
    first.notes_slide.notes_text_frame.text = "Thank the team"
    second = slides.slides.add_slide(slides.slide_layouts[5])
    second.shapes.title.text = "In numbers"
    table = second.shapes.add_table(1, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(0, 1).text = "First cell", "Second cell"
    data = CategoryChartData()
    data.categories = ["East", "West"]
    data.add_series("Sales", (1, 2))
    chart = second.shapes.add_chart(
        XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(3), Inches(4), Inches(3), data
    ).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Sales by region"
    out = io.BytesIO()
    slides.save(out)
    return out.getvalue()


def test_a_pptx_has_its_slides_notes_tables_and_chart_titles_translated():
    pptx = pytest.importorskip("pptx")
    source = deck()
    out = pptx.Presentation(io.BytesIO(translated(source, "pptx")))
    first, second = out.slides
    title, body = first.shapes.title, first.placeholders[1].text_frame
    assert title.text_frame.text == "QUARTERLY RESULTS"
    assert [(r.text, r.font.bold) for r in body.paragraphs[1].runs] == [
        ("COSTS ", None),
        ("FELL SHARPLY", True),
    ]
    assert first.notes_slide.notes_text_frame.text == "THANK THE TEAM"
    table = next(s for s in second.shapes if s.has_table).table
    assert [table.cell(0, 0).text, table.cell(0, 1).text] == ["FIRST CELL", "SECOND CELL"]
    chart = next(s for s in second.shapes if s.has_chart).chart
    assert chart.chart_title.text_frame.text == "SALES BY REGION"
    before, after = (zipfile.ZipFile(io.BytesIO(d)) for d in (source, translated(source, "pptx")))
    assert before.namelist() == after.namelist()
    for name in before.namelist():  # layouts, masters, themes, the chart's data: as they were
        if not name.startswith(("ppt/slides/slide", "ppt/notesSlides/", "ppt/charts/chart")):
            assert before.read(name) == after.read(name), name


def test_an_odp_has_its_slides_and_notes_translated():
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
        'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"'
    )
    content = (
        f"<office:document-content {ns}><office:body><office:presentation>"
        '<draw:page draw:name="one"><draw:frame><draw:text-box>'
        '<text:p>Slide <text:span text:style-name="b">title</text:span></text:p>'
        "</draw:text-box></draw:frame><presentation:notes><draw:frame><draw:text-box>"
        "<text:p>A note</text:p></draw:text-box></draw:frame></presentation:notes></draw:page>"
        "</office:presentation></office:body></office:document-content>"
    )
    source = zipped(
        {"mimetype": "application/vnd.oasis.opendocument.presentation", "content.xml": content}
    )
    out = zipfile.ZipFile(io.BytesIO(translated(source, "odp"))).read("content.xml").decode()
    assert '<text:p>SLIDE <text:span text:style-name="b">TITLE</text:span></text:p>' in out
    assert "<text:p>A NOTE</text:p>" in out


def a_pdf() -> bytes:
    fitz = pytest.importorskip("pymupdf")
    document = fitz.open()
    page = document.new_page()
    page.insert_text((72, 72), "The house is small.", fontsize=18, color=(0, 0, 1))
    page.insert_textbox(
        fitz.Rect(72, 100, 400, 300),
        "A paragraph long enough to wrap over two lines of its box, as paragraphs do.",
        fontsize=11,
    )
    picture = fitz.Pixmap(fitz.csRGB, fitz.IRect(0, 0, 8, 8), False)
    picture.clear_with(200)
    page.insert_image(fitz.Rect(72, 320, 120, 368), pixmap=picture)
    return document.tobytes()


def test_a_pdf_text_layer_is_translated_where_it_was_and_its_images_kept():
    fitz = pytest.importorskip("pymupdf")
    source = a_pdf()
    before, after = (
        fitz.open(stream=source),
        fitz.open(stream=translated(source, "pdf", language="fr")),
    )
    old, new = before[0].get_text("blocks"), after[0].get_text("blocks")
    texts = [b[4].replace("\n", " ").strip() for b in new if b[6] == 0]
    assert texts == [
        "THE HOUSE IS SMALL.",
        "A PARAGRAPH LONG ENOUGH TO WRAP OVER TWO LINES OF ITS BOX, AS PARAGRAPHS DO.",
    ]
    for was, now in zip([b for b in old if b[6] == 0], [b for b in new if b[6] == 0], strict=True):
        assert abs(was[0] - now[0]) < 3 and abs(was[1] - now[1]) < 6  # where it was
    assert len(after[0].get_images()) == 1
    assert after.language == "fr"


def test_a_pdf_embeds_each_font_once_and_keeps_its_links():
    fitz = pytest.importorskip("pymupdf")
    document = fitz.open()
    for number in range(40):
        page = document.new_page()
        page.insert_text((72, 72), f"Chapter {number}: the house is small.", fontsize=14)
        page.insert_text((72, 100), "See the next chapter for more.", fontsize=11)
    for number, page in enumerate(document):  # each page's link to the next
        to_next = {"kind": fitz.LINK_GOTO, "from": fitz.Rect(70, 88, 300, 104)}
        page.insert_link({**to_next, "page": (number + 1) % 40})
    document[0].insert_link(
        {"kind": fitz.LINK_URI, "from": fitz.Rect(70, 60, 300, 76), "uri": "https://example.org"}
    )
    source = document.tobytes()
    out = fitz.open(stream=translated(source, "pdf"))
    assert "SEE THE NEXT CHAPTER" in out[0].get_text()
    links = [
        (k, link["kind"], link.get("page"), link.get("uri"))
        for k in range(40)
        for link in out[k].get_links()
    ]
    assert len(links) == 41 and (0, fitz.LINK_URI, None, "https://example.org") in links
    assert (3, fitz.LINK_GOTO, 4, None) in links  # internal links kept, to their pages
    fonts = {font[0] for k in range(40) for font in out.get_page_fonts(k)}
    assert len(fonts) <= 3  # the same fonts on every page, not one a text block
    assert len(out.tobytes()) < len(source) + 150_000  # 40 pages: not 40 fonts


def test_a_pdf_without_pymupdf_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymupdf", None)  # an import of it fails, as if absent
    with pytest.raises(DocumentError, match=r"report.pdf: .*pip install 'vaswani\[pdf\]'"):
        read_document(b"%PDF-1.7\n", "pdf", "report.pdf")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert ".pdf" not in available() and ".pptx" in available()
