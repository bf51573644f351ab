"""PDF: the text layer translated and laid back where it was, with PyMuPDF (an optional extra,
`pip install 'vaswani[pdf]'`: PyMuPDF is AGPL-licensed, so vaswani does not depend on it; without
it a .pdf is one clear error).

Each text block of a page (a paragraph, a heading, a cell, as PyMuPDF groups the lines) is
translated whole. Its text is removed by a redaction of its rectangle (images and drawings under
it kept) and the translation written into the same rectangle, in the block's first font size and
colour, shrunk until it fits.

What is lost: the fonts (the translation is set in a standard sans-serif font, bold and italic
where the block's first span was), formatting inside a block (a bold word among plain ones),
hyphenation and justification; text drawn as images or paths (scans) is not read; forms,
annotations, links (put back where a redaction took them) and bookmarks are kept but not
translated; a block's lines are joined, so a block that held a list of short lines comes back as
one paragraph. The fonts the translations are set in are embedded once each, subset to the
glyphs used.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from vaswani.documents.formats import Document, DocumentError, DocumentOptions
from vaswani.documents.markup import Alignment

MAX_OBJECTS = 200_000
"""The most objects (cross-reference entries) of a PDF read: a 1,000-page report has tens of
thousands; a hostile file a million, which PyMuPDF would hold and walk."""
MAX_PAGES = 5_000
INSTALL = "reading .pdf files needs PyMuPDF (AGPL-licensed, optional): pip install 'vaswani[pdf]'"


def pymupdf(name: str) -> Any:
    try:
        import pymupdf as found
    except ImportError:
        raise DocumentError(f"{name}: {INSTALL}") from None
    return found


@dataclass
class Block:
    """A text block: its page, rectangle, text and how its first span was set."""

    page: int
    rect: tuple[float, float, float, float]
    text: str
    size: float
    color: int
    bold: bool
    italic: bool


@dataclass
class PdfFile(Document):
    document: Any
    blocks: list[Block]
    markup = False

    def texts(self) -> list[str]:
        return [block.text for block in self.blocks]

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        fitz = pymupdf("a .pdf")
        pages: dict[int, list[tuple[Block, str]]] = {}
        for block, translation in zip(self.blocks, translations, strict=True):
            pages.setdefault(block.page, []).append((block, translation))
        for number, mine in pages.items():
            changed = [fitz.Rect(b.rect) for b, t in mine if t != b.text]
            # a block kept as it was is written again where a redaction touches it
            mine = [
                (b, t) for b, t in mine if any(r.intersects(fitz.Rect(b.rect)) for r in changed)
            ]
            if not mine:
                continue
            page = self.document[number]
            links = page.get_links()  # a redaction removes the links it touches
            for block, _ in mine:
                page.add_redact_annot(fitz.Rect(block.rect), fill=False, cross_out=False)
            page.apply_redactions(  # the text only: images and drawings under it stay
                images=fitz.PDF_REDACT_IMAGE_NONE, graphics=fitz.PDF_REDACT_LINE_ART_NONE
            )
            for block, translation in mine:
                page.insert_htmlbox(fitz.Rect(block.rect), escape(translation), css=_css(block))
            kept = {tuple(link["from"]) for link in page.get_links()}
            for link in links:
                if tuple(link["from"]) not in kept:
                    page.insert_link(link)
        if language:
            self.document.set_language(language)
        # each insertion embeds the font it sets the text in: subset to the glyphs used, and
        # copies merged (a 140 KB report grew to 7.3 MB, one font embedded 231 times)
        self.document.subset_fonts()
        return self.document.tobytes(garbage=4, deflate=True)


def _css(block: Block) -> str:
    weight = "bold" if block.bold else "normal"
    style = "italic" if block.italic else "normal"
    return (
        f"* {{font-family: sans-serif; font-size: {block.size:.1f}px; color: #{block.color:06x};"
        f" font-weight: {weight}; font-style: {style}; margin: 0; padding: 0}}"
    )


def read_pdf(data: bytes, name: str, options: DocumentOptions) -> PdfFile:
    fitz = pymupdf(name)
    if not data.lstrip()[:5] == b"%PDF-":
        raise DocumentError(f"{name}: not a PDF file (no %PDF- header)")
    try:
        document = fitz.open(stream=data, filetype="pdf")
    except (RuntimeError, ValueError) as error:  # PyMuPDF's FileDataError is a RuntimeError
        raise DocumentError(f"{name}: not a readable PDF ({error})") from None
    if document.needs_pass:
        raise DocumentError(f"{name}: the PDF is encrypted; give one that opens without a password")
    if document.xref_length() > MAX_OBJECTS:
        raise DocumentError(
            f"{name}: {document.xref_length():,} objects, over the limit of {MAX_OBJECTS:,}"
        )
    if document.page_count > MAX_PAGES:
        raise DocumentError(f"{name}: {document.page_count:,} pages, over {MAX_PAGES:,}")
    blocks = []
    try:
        for number, page in enumerate(document):
            blocks += _blocks(number, page)
    except (RuntimeError, ValueError) as error:
        raise DocumentError(f"{name}: a page cannot be read ({error})") from None
    return PdfFile(document, blocks)


def _blocks(number: int, page: Any) -> list[Block]:
    found = []
    for block in page.get_text("dict")["blocks"]:
        spans = [s for line in block.get("lines", []) for s in line["spans"] if s["text"].strip()]
        if not spans:
            continue
        lines = [" ".join(s["text"].strip() for s in line["spans"]) for line in block["lines"]]
        text = " ".join(line for line in lines if line)
        first = spans[0]
        flags = first["flags"]
        found.append(
            Block(
                number,
                tuple(block["bbox"]),
                text,
                first["size"],
                first["color"],
                bool(flags & 16),
                bool(flags & 2),
            )
        )
    return found
