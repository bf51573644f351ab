"""EPUB books: each chapter (the zip's XHTML files) translated as an HTML page
(`vaswani.documents.html`); the package file, styles, images and fonts written back as they were.
The zip is read within the limits of `vaswani.documents.office.Zipped`."""

from __future__ import annotations

from dataclasses import dataclass

from vaswani.documents.formats import Document, DocumentError, DocumentOptions, decoded
from vaswani.documents.html import HtmlDocument, HtmlError
from vaswani.documents.markup import Alignment
from vaswani.documents.office import Zipped

CHAPTERS = (".xhtml", ".html", ".htm")


@dataclass
class Book(Document):
    zipped: Zipped
    chapters: dict[str, HtmlDocument]
    markup = True

    def texts(self) -> list[str]:
        return [text for chapter in self.chapters.values() for text in chapter.texts()]

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        start = 0
        for name, chapter in self.chapters.items():
            end = start + len(chapter.texts())
            page = chapter.rebuild(translations[start:end], alignments[start:end], language)
            self.zipped.replaced[name] = page.encode("utf-8")
            start = end
        return self.zipped.write()


def read_epub(data: bytes, name: str, options: DocumentOptions) -> Book:
    zipped = Zipped(data, name, options)
    if "META-INF/container.xml" not in zipped.names():
        raise DocumentError(f"{name}: no META-INF/container.xml in it; not an EPUB")
    chapters = {}
    for member in zipped.names():
        if member.lower().endswith(CHAPTERS):
            text = decoded(zipped.read(member), f"{name}: {member}")
            if "<!DOCTYPE" in text and "<!ENTITY" in text:
                raise DocumentError(f"{name}: {member} declares entities; refused")
            try:
                chapters[member] = HtmlDocument.parse(text)
            except HtmlError as error:
                raise DocumentError(f"{name}: {member}: {error}") from None
    return Book(zipped, chapters)
