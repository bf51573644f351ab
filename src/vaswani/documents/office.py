"""Word (.docx), PowerPoint (.pptx) and LibreOffice (.odt, .odp) documents, and the zip files
that hold them and EPUBs.

Each paragraph (body, tables, headers, footers, footnotes; a deck's slides, notes, charts) is
translated whole. Its text lives in *slots*: DOCX's `<w:t>` elements (inside runs of different
formatting, hyperlinks, ...), PPTX's runs' `<a:t>`, ODT's and ODP's text and tail text of
`<text:p>`, `<text:span>`, `<text:a>`. The translation is shared out among
the slots by word alignment (`vaswani.documents.markup`: each slot is an element around its
words), so a word in bold comes back in bold around its translation; nothing else of the XML is
changed, and every other member of the zip (styles, images, settings) is written back as it was.

Zips and XML from outside are hostile until read: a zip with too many members, too many bytes
unpacked, or a member packed too tightly (a zip bomb) is refused before it is unpacked, and XML
with a document type declaration (entities, external references) is refused before it is
parsed.
"""

from __future__ import annotations

import bisect
import io
import itertools
import math
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Any

from vaswani.documents.formats import Document, DocumentError, DocumentOptions
from vaswani.documents.markup import PARTS, Alignment, Element, Tagged, units

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
DOCX_PARTS = re.compile(r"word/(document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml")
ODT_PARTS = re.compile(r"content\.xml|styles\.xml")
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
PPTX_PARTS = re.compile(
    r"ppt/(slides/slide|notesSlides/notesSlide|charts/chart|diagrams/data)\d+\.xml"
)
"""A deck's slides, their notes, its charts (titles, labels) and SmartArt; not its layouts and
masters, whose text is a template's prompts."""
SPACES = {W + "tab", W + "br", W + "cr", TEXT + "s", TEXT + "tab", TEXT + "line-break", A + "br"}
"""Elements that stand for white space between a paragraph's words."""


class Zipped:
    """A zip's members, read within limits, and written back with some replaced."""

    def __init__(self, data: bytes, name: str, options: DocumentOptions) -> None:
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
            raise DocumentError(f"{name}: not a readable zip ({error})") from None
        if len(infos) > options.max_members:
            raise DocumentError(f"{name}: {len(infos)} zip members, over {options.max_members}")
        names = [info.filename for info in infos]
        if len(set(names)) < len(names):  # which of two is "the" document differs by reader
            twice = next(n for n in names if names.count(n) > 1)
            raise DocumentError(
                f"{name}: two zip members are named {twice}; a damaged or forged file"
            )
        total = sum(info.file_size for info in infos)
        if total > options.max_unpacked_bytes:
            raise DocumentError(
                f"{name}: {total:,} bytes unpacked, over the limit of "
                f"{options.max_unpacked_bytes:,}"
            )
        for info in infos:
            if info.file_size > options.max_ratio * max(info.compress_size, 1) + 1024:
                raise DocumentError(
                    f"{name}: {info.filename} unpacks {info.file_size / max(info.compress_size, 1):,.0f}"
                    f" times its packed size (over {options.max_ratio}): a zip bomb?"
                )
        try:  # every member unpacked once, in chunks: damage is found before any work
            bad = self.zip.testzip()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError, zlib.error) as e:
            raise DocumentError(f"{name}: a zip member cannot be unpacked ({e})") from None
        if bad is not None:
            raise DocumentError(f"{name}: {bad} is damaged (its checksum does not match)")
        self.name, self.infos, self.options = name, infos, options
        self.replaced: dict[str, bytes] = {}

    def names(self) -> list[str]:
        return [info.filename for info in self.infos]

    def read(self, member: str) -> bytes:
        """A member's bytes, never more than its declared size (a lying header is an error)."""
        info = self.zip.getinfo(member)
        try:
            with self.zip.open(info) as stream:
                data = stream.read(info.file_size + 1)
        except (
            zipfile.BadZipFile,
            OSError,
            ValueError,
            EOFError,
            RuntimeError,
            zlib.error,
        ) as error:
            raise DocumentError(f"{self.name}: {member} cannot be unpacked ({error})") from None
        if len(data) > info.file_size:
            raise DocumentError(f"{self.name}: {member} is larger than its zip entry says")
        return data

    def write(self) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as target:
            for info in self.infos:
                data = self.replaced.get(info.filename)
                target.writestr(info, data if data is not None else self.read(info.filename))
        return out.getvalue()


KNOWN_DTDS = frozenset({"-//Apple//DTD PLIST 1.0//EN", "-//Apple Computer//DTD PLIST 1.0//EN"})
"""The public DTDs a file may name (never loaded): a property list's, as Xcode writes it."""


def parse_xml(data: bytes, where: str, doctype: bool = False) -> Any:
    """An lxml tree of XML from a file: no DTD, no entities, no network; prefixes kept.
    `doctype`: a bare document type declaration is read (a plist's, Qt's `<!DOCTYPE TS>`),
    never one with declarations inside (entities), and the DTD it names is never loaded."""
    from lxml import etree

    refused = f"{where}: XML with a document type declaration (entities) is refused"
    if b"<!ENTITY" in data or (not doctype and b"<!DOCTYPE" in data):
        raise DocumentError(refused)
    if re.search(rb"<!DOCTYPE[^>\[]*\[", data):
        raise DocumentError(refused)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as error:
        raise DocumentError(f"{where}: not well-formed XML ({error})") from None
    docinfo = root.getroottree().docinfo
    declared = docinfo.internalDTD
    if not doctype and (docinfo.doctype or declared is not None):  # UTF-16 passed the bytes check
        raise DocumentError(refused)
    if docinfo.system_url and docinfo.public_id not in KNOWN_DTDS:
        raise DocumentError(
            f"{where}: XML whose document type names a DTD ({docinfo.system_url[:100]}) is "
            "refused: vaswani never loads one, and its format has none; remove the DOCTYPE"
        )
    if declared is not None and (list(declared.iterentities()) or list(declared.iterelements())):
        raise DocumentError(refused)
    return root


def serialize(root: Any) -> bytes:
    from lxml import etree

    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """`text` without the characters XML 1.0 cannot hold (control characters a glossary or a
    memory brought in): written as they are, they would make the part unreadable."""
    return _NOT_XML.sub("", text)


@dataclass
class Slot:
    """Where a piece of a paragraph's text lives: `node.text` or `node.tail`."""

    node: Any
    attribute: str

    def get(self) -> str:
        return getattr(self.node, self.attribute) or ""

    def set(self, text: str) -> None:
        setattr(self.node, self.attribute, xml_text(text))
        if self.node.tag == W + "t":
            self.node.set(XML_SPACE, "preserve")


@dataclass
class Paragraph:
    """A paragraph's text slots and the white space between them, as `Tagged` text whose
    elements are the slots."""

    slots: list[Slot | str] = field(default_factory=list)

    def tagged(self) -> Tagged:
        text, root = "", Element("")
        for k, slot in enumerate(self.slots):
            if isinstance(slot, str):
                text += slot
                continue
            start = len(text)
            text += slot.get()
            root.children.append(Element(f"\ue000{k}\ue001", f"\ue000/{k}\ue001", start, len(text)))
        return Tagged(text, root)

    def fill(self, translation: str, alignment: Alignment | None) -> None:
        """Share the translation out among the slots in order, each its words (`share`): a slot
        that had words gets some (a bold word comes back bold, never as an empty run); the
        space between two slots' words goes to the slot before, or to the next where that one
        began with a space, and is left out where a tab or space element stands between."""
        tagged = self.tagged()
        elements = tagged.root.children
        owners = share(tagged, translation, alignment or [])
        texts: list[list[str]] = [[] for _ in elements]
        target = units(translation)
        previous, at = None, 0
        for q, e in owners:
            start, end = target[q]
            gap = translation[at:start]
            if previous is None or previous == e:
                texts[e].append(gap)
            elif gap.strip() or not self.spaced(elements, previous, e):
                starts_spaced = tagged.text[elements[e].start : elements[e].end][:1].isspace()
                texts[e if starts_spaced else previous].append(gap)
            texts[e].append(translation[start:end])
            previous, at = e, end
        if previous is not None:
            texts[previous].append(translation[at:])
        for e, element in enumerate(elements):
            was = tagged.text[element.start : element.end]
            if texts[e] or was.strip():  # a slot of spaces alone keeps them
                self.slots[int(element.opening[1:-1])].set("".join(texts[e]))

    def spaced(self, elements: list[Element], one: int, other: int) -> bool:
        """Whether a tab, line break or space element, or a slot of spaces alone, stands
        between elements `one` and `other` (for the space between their words)."""
        low, high = (int(elements[k].opening[1:-1]) for k in sorted((one, other)))
        between = self.slots[low + 1 : high]
        return any(isinstance(s, str) or (s.get() and not s.get().strip()) for s in between)


def share(tagged: Tagged, translation: str, alignment: Alignment) -> list[tuple[int, int]]:
    """Which element of `tagged` (flat: a paragraph's slots) each part of the translated words
    goes to, as (part, element) in order: the elements follow each other as in the source
    (each part's element at or after the one before), the parts go where their aligned source
    parts were (or, unaligned, where their relative place falls), and no element that had
    words is left without any while there are parts enough (dynamic programming over parts x
    elements)."""
    elements = tagged.root.children
    target = units(translation)
    parts = [q for q, (start, end) in enumerate(target) if start < end]
    if not elements or not parts:
        return []
    starts = [element.start for element in elements]
    source = units(tagged.text)
    owner = [bisect.bisect_right(starts, start) - 1 for start, _ in source]
    links: dict[int, list[int]] = {}
    for i, j in alignment:
        links.setdefault(j, []).append(i)
    size, length = len(elements), max(len(tagged.text), 1)
    # Leaving an element that had words without any costs more than all the links and
    # nearness it could win back.
    skip = len(alignment) + len(parts) + 1.0

    def score(q: int, e: int) -> float:
        here = sum(1 for i in links.get(q // PARTS, []) if owner_of(i * PARTS + q % PARTS) == e)
        middle = (target[q][0] + target[q][1]) / 2 / max(len(translation), 1)
        near = elements[e].start / length <= middle <= elements[e].end / length
        return here + 0.01 * near

    def owner_of(u: int) -> int | None:
        return owner[u] if u < len(owner) and source[u][0] < source[u][1] else None

    worded = [int(bool(tagged.text[e.start : e.end].strip())) for e in elements]
    before = [0, *itertools.accumulate(worded)]  # worded elements before e
    best = [score(parts[0], e) - skip * before[e] for e in range(size)]
    back: list[list[int]] = []
    for q in parts[1:]:
        came, row, leading, lead_from = [], [], -math.inf, -1
        for e in range(size):
            # from an earlier element, skipping the worded ones between
            if e > 0 and best[e - 1] + skip * before[e] > leading:
                leading, lead_from = best[e - 1] + skip * before[e], e - 1
            stay = best[e]
            moved = leading - skip * before[e] if lead_from >= 0 else -math.inf
            came.append(e if stay >= moved else lead_from)
            row.append(score(q, e) + max(stay, moved))
        best = row
        back.append(came)
    last = max(range(size), key=lambda e: best[e] - skip * (before[size] - before[e + 1]))
    chosen = [last]
    for came in reversed(back):
        chosen.append(came[chosen[-1]])
    return list(zip(parts, reversed(chosen), strict=True))


def docx_paragraphs(root: Any) -> list[Paragraph]:
    """Each `<w:p>` with the `<w:t>` of its own runs (not of a text box's paragraphs in it)."""
    found = []
    for p in root.iter(W + "p"):
        paragraph = Paragraph()
        for node in p.iter(W + "t", *SPACES):
            if next(node.iterancestors(W + "p")) is not p:
                continue
            paragraph.slots.append(Slot(node, "text") if node.tag == W + "t" else " ")
        found.append(paragraph)
    return found


def pptx_paragraphs(root: Any) -> list[Paragraph]:
    """Each DrawingML `<a:p>` (in shapes, tables, notes, charts) with the `<a:t>` of its runs
    (not of its fields: a slide number, a date), its line breaks as spaces."""
    found = []
    for p in root.iter(A + "p"):
        paragraph = Paragraph()
        for node in p.iter(A + "t", A + "br"):
            if node.tag == A + "br":
                paragraph.slots.append(" ")
            elif node.getparent().tag == A + "r":
                paragraph.slots.append(Slot(node, "text"))
        found.append(paragraph)
    return found


def odt_paragraphs(root: Any) -> list[Paragraph]:
    """Each `<text:p>` and `<text:h>` with its text and the text of its spans and links, not
    of the notes and frames inside it (their paragraphs are their own)."""
    found = []
    for p in root.iter(TEXT + "p", TEXT + "h"):
        paragraph = Paragraph([Slot(p, "text")])
        odt_slots(p, paragraph)
        found.append(paragraph)
    return found


def odt_slots(node: Any, paragraph: Paragraph) -> None:
    for child in node:
        if not isinstance(child.tag, str):  # a comment or processing instruction
            paragraph.slots.append(Slot(child, "tail"))
            continue
        if child.tag in SPACES:
            paragraph.slots.append(" ")
        elif child.tag in (TEXT + "span", TEXT + "a"):
            paragraph.slots.append(Slot(child, "text"))
            odt_slots(child, paragraph)
        paragraph.slots.append(Slot(child, "tail"))


@dataclass
class Office(Document):
    """A .docx or .odt: its XML parts with paragraphs, inside its zip."""

    zipped: Zipped
    parts: dict[str, Any]
    paragraphs: list[Paragraph]
    markup = True

    def texts(self) -> list[str]:
        return [p.tagged().text for p in self.todo()]

    def todo(self) -> list[Paragraph]:
        return [p for p in self.paragraphs if p.tagged().text.strip()]

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        for paragraph, translation, alignment in zip(
            self.todo(), translations, alignments, strict=True
        ):
            paragraph.fill(translation, alignment)
        for name, root in self.parts.items():
            self.zipped.replaced[name] = serialize(root)
        return self.zipped.write()


KINDS = {
    "docx": ("word/document.xml", DOCX_PARTS, docx_paragraphs),
    "odt": ("content.xml", ODT_PARTS, odt_paragraphs),
    "pptx": ("ppt/presentation.xml", PPTX_PARTS, pptx_paragraphs),
    "odp": ("content.xml", ODT_PARTS, odt_paragraphs),
}
"""Each office format's main part (which says it is one), the parts with its text, and how its
paragraphs are found (an .odp's slides, notes and tables are an .odt's paragraphs)."""


MIMETYPES = {
    "odt": "application/vnd.oasis.opendocument.text",
    "odp": "application/vnd.oasis.opendocument.presentation",
}
"""What an OpenDocument file's `mimetype` member says it is."""


def read_office(data: bytes, name: str, options: DocumentOptions, kind: str) -> Office:
    """A .docx, .odt, .pptx or .odp file (`kind`)."""
    zipped = Zipped(data, name, options)
    members = zipped.names()
    main, wanted, finder = KINDS[kind]
    if main not in members:
        raise DocumentError(f"{name}: no {main} in it; not a .{kind} file")
    if kind in MIMETYPES and "mimetype" in members:
        said = zipped.read("mimetype")[:200].decode("ascii", "replace").strip()
        if said != MIMETYPES[kind]:
            other = {v: k for k, v in MIMETYPES.items()}.get(said)
            hint = (
                f"an .{other}: rename it or give --format {other}" if other else f"not an .{kind}"
            )
            raise DocumentError(f"{name}: its mimetype says {said!r}, {hint}")
    parts = {m: parse_xml(zipped.read(m), f"{name}: {m}") for m in members if wanted.fullmatch(m)}
    paragraphs = [p for root in parts.values() for p in finder(root)]
    return Office(zipped, parts, paragraphs)
