"""Small real files of each zipped format, written as the applications write them (the parts a
reader needs), for the document tests."""

import io
import zipfile
from pathlib import Path

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
MC = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" mc:Ignorable="w14"'
W14 = 'xmlns:w14="http://schemas.microsoft.com/office/word/2010/wordml"'
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")


def zipped(members: dict[str, bytes | str], stored: tuple[str, ...] = ()) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in members.items():
            kind = zipfile.ZIP_STORED if name in stored else zipfile.ZIP_DEFLATED
            z.writestr(zipfile.ZipInfo(name), data, compress_type=kind)
    return out.getvalue()


def docx(body: str, styles: str = "<w:styles/>", parts: dict[str, str] | None = None) -> bytes:
    """A .docx whose body is `body` (w:p elements); `parts`: more parts (headers, footnotes) by
    name, each the inside of its root element."""
    document = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        f"<w:document {W} {MC} {W14}><w:body>{body}<w:sectPr/></w:body></w:document>"
    )
    return zipped(
        {
            "[Content_Types].xml": '<?xml version="1.0"?><Types xmlns="http://schemas.'
            'openxmlformats.org/package/2006/content-types"/>',
            "word/document.xml": document,
            "word/styles.xml": f'<?xml version="1.0"?><w:styles {W}>{styles}</w:styles>',
            "word/media/image1.png": PNG,
            **{
                f"word/{name}.xml": f'<?xml version="1.0"?><w:{name.rstrip("0123456789")} {W}>'
                f"{inside}</w:{name.rstrip('0123456789')}>"
                for name, inside in (parts or {}).items()
            },
        }
    )


def run(text: str, bold: bool = False) -> str:
    props = "<w:rPr><w:b/></w:rPr>" if bold else ""
    return f'<w:r>{props}<w:t xml:space="preserve">{text}</w:t></w:r>'


def odt(body: str) -> bytes:
    text = 'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
    office = 'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {office} {text}>'
        f"<office:body><office:text>{body}</office:text></office:body>"
        "</office:document-content>"
    )
    return zipped(
        {
            "mimetype": "application/vnd.oasis.opendocument.text",
            "content.xml": content,
            "META-INF/manifest.xml": "<manifest/>",
            "Pictures/a.png": PNG,
        },
        stored=("mimetype",),
    )


def epub(chapter: str) -> bytes:
    return zipped(
        {
            "mimetype": "application/epub+zip",
            "META-INF/container.xml": "<container/>",
            "OEBPS/content.opf": "<package/>",
            "OEBPS/ch1.xhtml": chapter,
            "OEBPS/style.css": "p { margin: 0 }",
        },
        stored=("mimetype",),
    )


def zip_bomb(path: Path) -> None:
    """A .docx whose document part unpacks to 256 MB of zeros (256 kB packed)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        with z.open("word/document.xml", "w", force_zip64=True) as member:
            chunk = b"\0" * (1 << 24)
            for _ in range(16):
                member.write(chunk)


def pdf_of_objects(count: int) -> bytes:
    """A PDF of no pages whose cross-reference stream declares `count` objects (all but three
    pointing at its header): 4 kB that a reader would hold and walk as a million objects."""
    import zlib

    out = b"%PDF-1.5\n"
    offsets = []
    for body in (b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (len(offsets), body)
    xref = len(out)
    rows = bytes(4) + b"".join(bytes([1]) + at.to_bytes(2, "big") + b"\0" for at in offsets)
    rows += bytes([1]) + xref.to_bytes(2, "big") + b"\0" + bytes([1, 0, 9, 0]) * (count - 4)
    data = zlib.compress(rows, 9)
    head = b"<< /Type /XRef /Size %d /W [1 2 1] /Root 1 0 R /Filter /FlateDecode /Length %d >>"
    out += b"3 0 obj\n" + head % (count, len(data)) + b"\nstream\n" + data + b"\nendstream\n"
    return out + b"endobj\nstartxref\n%d\n%%%%EOF\n" % xref


def upper(texts, alignments, code=None):
    """A stand-in translator: each text in upper case, its words aligned in place."""
    from vaswani.documents.markup import words

    found = [[(i, i) for i in range(len(words(t)))] if alignments else None for t in texts]
    return [t.upper() for t in texts], found


def upper_file(data: bytes, fmt: str, options=None, language="de") -> bytes:
    """A file of format `fmt` translated whole by `upper`."""
    from vaswani.documents.formats import DocumentOptions, read_document, translate_documents

    document = read_document(data, fmt, f"test.{fmt}", options or DocumentOptions())
    return translate_documents([document], upper, language)[0]
