"""Whole files: each format read into the texts to translate and written back translated, with
everything that is not translatable text kept.

A `Document` gives its `texts()` (paragraphs, blocks, cues, messages: each translated whole,
sentence by sentence) and `rebuild`s itself from their translations and word alignments (which
place inline markup). `translate_documents` translates the texts of several documents in one
batch; `REGISTRY` holds each format's record (`Format`): its extensions, reader and ways.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from vaswani.data.corpora import DEFAULT_MAX_LINE_BYTES
from vaswani.documents.markup import Alignment, Links, MarkupError
from vaswani.documents.spans import Protection
from vaswani.errors import VaswaniError


class DocumentError(VaswaniError, ValueError):
    """A file that cannot be translated: damaged, hostile, or not of its format."""


class OtherFile(DocumentError):
    """A well-formed file of another kind under a format's extension (an Android layout is
    .xml, a TypeScript file .ts): an error for --input, left out of a --input-dir tree."""


@dataclass(frozen=True)
class DocumentOptions:
    """How files are translated, and the limits a file from outside must keep."""

    fuzzy: bool = True
    """PO: mark the entries filled `fuzzy`, for a translator to review."""
    overwrite: bool = False
    """PO, XLIFF: translate entries that have a translation already (kept otherwise)."""
    max_members: int = 10_000
    """Zips (.docx, .odt, .epub): the most members."""
    max_unpacked_bytes: int = 512 * 2**20
    """Zips: the most bytes of all members unpacked."""
    max_unit_bytes: int = DEFAULT_MAX_LINE_BYTES
    """The longest paragraph, block, cue or message (UTF-8 bytes), as a line of a corpus."""
    max_ratio: int = 200
    """Zips: the most a member may unpack to, as a multiple of its packed size (text XML packs
    about 5-20 times; a zip bomb a million)."""


class Document(Protocol):
    """A file as its texts to translate and the way back. Formats subclass it explicitly, for
    the defaults of `partial` and `protections`."""

    markup: bool
    """Whether rebuilding places inline markup (and so needs word alignments)."""
    partial: bool = False
    """Whether an entry may stay untranslated (a catalog's, for a translator to do); a text
    of another format that cannot be translated (None) is kept as it was. `read_document` sets
    it from the format's record."""

    def protections(self) -> list[Protection | None] | None:
        """The code in each text (`vaswani.documents.protect`) where the format says it (a
        PO entry's `c-format`); None in a place (or for all): the request's."""
        return None

    def texts(self) -> list[str]: ...

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes: ...


@dataclass
class TextDocument(Document):
    """Plain text: lines and paragraphs, each line's sentences translated."""

    text: str
    markup = False

    def texts(self) -> list[str]:
        return [self.text]

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        return translations[0].encode("utf-8")


@dataclass
class HtmlFile(Document):
    """An HTML page (`vaswani.documents.html`)."""

    document: object
    markup = True

    def texts(self) -> list[str]:
        return self.document.texts()

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        return self.document.rebuild(translations, alignments, language).encode("utf-8")


def decoded(data: bytes, name: str) -> str:
    """UTF-8 text (a byte-order mark dropped), or a DocumentError naming the file."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DocumentError(f"{name}: not UTF-8 text (byte {error.start})") from None


def read_text(data: bytes, name: str, options: DocumentOptions) -> TextDocument:
    return TextDocument(decoded(data, name))


def read_html(data: bytes, name: str, options: DocumentOptions) -> HtmlFile:
    from vaswani.documents.html import HtmlDocument, HtmlError

    try:
        return HtmlFile(HtmlDocument.parse(decoded(data, name)))
    except HtmlError as error:
        raise DocumentError(f"{name}: {error}") from None


def _reader(module: str, function: str, *extra: str) -> Callable[..., Document]:
    """A reader of a module imported when first used (each needs its own library)."""

    def read(data: bytes, name: str, options: DocumentOptions) -> Document:
        import importlib

        found = getattr(importlib.import_module(f"vaswani.documents.{module}"), function)
        return found(data, name, options, *extra)

    return read


@dataclass(frozen=True)
class Format:
    """All vaswani knows of a file format, in one record of `REGISTRY`: what detection (by
    extension), `--format`'s choices, the file API's list of formats, a project tree's naming
    and the translation of a document read from it. Adding a format is its reader's module and
    one `register` line."""

    name: str
    extensions: tuple[str, ...]
    read: Callable[[bytes, str, DocumentOptions], Document]
    """A file's bytes and its name (for messages) -> a `Document`."""
    binary: bool = False
    """A zip or a PDF, not text to show on a terminal."""
    partial: bool = False
    """Its entries may stay untranslated, for a translator (a PO or XLIFF catalog)."""
    marked: bool = False
    """In a project's tree, its files are the source's strings only where their place says so
    (a `values/` folder, a folder or name of the source language): a project holds other JSON,
    YAML and XML (package.json, CI files, layouts)."""
    bundle: str | None = None
    """In a project's tree, its files are strings only where a folder or the name matches this
    (case-insensitive) pattern: a Java message bundle (`messages.properties`,
    `i18n/app.properties`) where other .properties files are settings (`gradle.properties`)."""
    suffix: str | None = None
    """How a language's file is named by a suffix to the stem: "_" (messages_es.properties,
    app_es.arb, app_es.ts) or "." (Strings.es.resx); None: by its folder or its own name."""
    needs: str | None = None
    """An optional module it reads with (pdf: pymupdf): where missing, it is not offered."""


REGISTRY: dict[str, Format] = {}
"""Each format's record, by name: the one table of formats."""
READERS: dict[str, Callable[[bytes, str, DocumentOptions], Document]] = {}
"""Each format's reader (from `REGISTRY`)."""
FORMATS: dict[str, str] = {}
"""The format of each file extension (from `REGISTRY`)."""


def register(fmt: Format) -> Format:
    """Add a format (or replace one of its name): its record, reader and extensions."""
    REGISTRY[fmt.name] = fmt
    READERS[fmt.name] = fmt.read
    FORMATS.update(dict.fromkeys(fmt.extensions, fmt.name))
    return fmt


register(Format("text", (".txt",), read_text))
register(Format("html", (".html", ".htm", ".xhtml"), read_html))
register(Format("markdown", (".md", ".markdown"), _reader("markdown", "read_markdown")))
register(Format("srt", (".srt",), _reader("subtitles", "read_srt")))
register(Format("vtt", (".vtt",), _reader("subtitles", "read_vtt")))
register(Format("po", (".po", ".pot"), _reader("po", "read_po"), partial=True))
register(Format("xliff", (".xlf", ".xliff"), _reader("xliff", "read_xliff"), partial=True))
for _office in ("docx", "odt", "pptx", "odp"):
    register(Format(_office, (f".{_office}",), _reader("office", "read_office", _office), True))
register(Format("pdf", (".pdf",), _reader("pdf", "read_pdf"), binary=True, needs="pymupdf"))
register(Format("epub", (".epub",), _reader("epub", "read_epub"), binary=True))
register(
    Format(
        "properties",
        (".properties",),
        _reader("keyvalue", "read_properties"),
        bundle=r"messages?|bundle|strings?|labels?|texts?|i18n|l10n|locales?|lang",
        suffix="_",
    )
)
register(Format("strings", (".strings",), _reader("keyvalue", "read_strings")))
register(Format("json", (".json",), _reader("jsonfiles", "read_json"), marked=True))
register(Format("arb", (".arb",), _reader("jsonfiles", "read_json", "arb"), suffix="_"))
register(Format("xcstrings", (".xcstrings",), _reader("jsonfiles", "read_xcstrings")))
register(Format("yaml", (".yml", ".yaml"), _reader("yamlfiles", "read_yaml"), marked=True))
register(Format("xml", (".xml",), _reader("appxml", "read_xml"), marked=True))
register(Format("android", (), _reader("appxml", "read_android"), marked=True))
register(Format("qt", (".ts",), _reader("appxml", "read_qt"), suffix="_"))
register(Format("resx", (".resx",), _reader("appxml", "read_resx"), suffix="."))
register(Format("stringsdict", (".stringsdict",), _reader("appxml", "read_stringsdict")))
UNREAD = {
    ".csv": "CSV",
    ".tsv": "TSV",
    ".xlsx": "Excel",
    ".ods": "an OpenDocument spreadsheet",
    ".doc": "an old Word file",
    ".rtf": "RTF",
    ".mo": "a compiled gettext catalog (its .po is read)",
}
"""Extensions of formats vaswani does not read: read as plain text, their keys and markup would
be translated into a file no tool loads, so such a file is refused (`--format text` forces it).
Other extensions (`corpus.de`, `notes`) are plain text, as they always were."""


def available() -> dict[str, str]:
    """The extensions read here and their formats: one that `needs` an optional module (.pdf:
    PyMuPDF) only where it is installed."""
    import importlib.util

    missing = {
        f.name for f in REGISTRY.values() if f.needs and not importlib.util.find_spec(f.needs)
    }
    return {ext: fmt for ext, fmt in FORMATS.items() if fmt not in missing}


def format_of(path: Path, asked: str | None = None) -> str:
    """The format `asked`, or that of the file's extension; a DocumentError for neither."""
    if asked is not None:
        if asked not in READERS:
            raise DocumentError(f"--format {asked}: choose one of {', '.join(sorted(READERS))}")
        return asked
    refused = UNREAD.get(path.suffix.lower())
    if refused is not None:
        raise DocumentError(
            f"{path}: vaswani does not read {refused} files; it reads "
            f"{', '.join(sorted(FORMATS))} (--format text reads any file as plain text lines)"
        )
    found = FORMATS.get(path.suffix.lower())
    if found is None:
        known = ", ".join(sorted(FORMATS))
        raise DocumentError(
            f"{path}: no format for {path.suffix or 'no extension'} ({known}); give --format"
        )
    return found


def read_document(
    data: bytes, fmt: str, name: str, options: DocumentOptions | None = None
) -> Document:
    """The document in `data` (a file's bytes) read as `fmt`; one text (paragraph, block,
    message) over `options.max_unit_bytes` is a DocumentError."""
    options = options or DocumentOptions()
    try:
        document = READERS[fmt](data, name, options)
        document.partial = REGISTRY[fmt].partial
        texts = document.texts()  # some formats find their markup here
    except MarkupError as error:
        raise DocumentError(f"{name}: {error}") from None
    for number, text in enumerate(texts, 1):
        lone = _SURROGATE.search(text)
        if lone is not None:
            raise DocumentError(
                f"{name}: text {number} holds U+{ord(lone.group()):04X}, half of a UTF-16 pair "
                "without its other half (an escape such as \\ud800 alone): not a character"
            )
        if len(text) > options.max_unit_bytes // 4 and len(text.encode()) > options.max_unit_bytes:
            raise DocumentError(
                f"{name}: text {number} is {len(text.encode()):,} bytes, over the limit of "
                f"{options.max_unit_bytes:,} (--max-line-bytes)"
            )
    return document


_SURROGATE = re.compile("[\ud800-\udfff]")


def paired(text: str) -> str:
    """`text` with each UTF-16 surrogate pair its escapes gave (`\\ud83d\\ude00`) joined into
    the character they make; a lone one is left (and refused by `read_document`)."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


Translator = Callable[
    [list[str], bool, list[Protection | None]], tuple[list[str | None], list[Alignment | None]]
]
"""Texts (with the code in each, None: the request's) -> their translations and (when the flag
asks) word alignments. A translation is None where it failed a check or fell below a minimum
confidence: the formats that can (`Document.partial`) leave it out, the others keep the text."""


CHUNK_TEXTS = 20_000
"""Texts translated in one call of a `Translator`: a file of a million subtitle cues goes a chunk
at a time, so that what translation keeps for each text (ids, hypotheses, signals) is held for
one chunk only; each text's translation does not depend on the others in its batch, so a text
that comes again in a chunk (a table's cells, "Yes." in subtitles) is translated once."""


def translate_documents(
    documents: list[Document], translate: Translator, language: str | None = None
) -> list[bytes]:
    """Each document translated, their texts in as few calls of `translate` as CHUNK_TEXTS
    allows; `language`: the target's code, for the formats that record it."""
    texts = [document.texts() for document in documents]
    flat = [text for mine in texts for text in mine]
    code = [p for d, mine in zip(documents, texts, strict=True) for p in protections_of(d, mine)]
    markup = any(d.markup for d in documents)
    translations: list[str | None] = []
    alignments: list[Alignment | None] = []
    for start in range(0, max(len(flat), 1), CHUNK_TEXTS):
        chunk = slice(start, start + CHUNK_TEXTS)
        first: dict[tuple[str, Protection | None], int] = {}  # a text that comes again: once
        keys = zip(flat[chunk], code[chunk], strict=True)
        index = [first.setdefault(key, len(first)) for key in keys]
        found, aligned = translate([t for t, _ in first], markup, [c for _, c in first])
        links = [None if a is None else Links(a) for a in aligned]  # held to the end
        translations += [found[k] for k in index]
        alignments += [links[k] for k in index]
    out, start = [], 0
    for document, mine in zip(documents, texts, strict=True):
        end = start + len(mine)
        done = settled(document, mine, translations[start:end])
        out.append(document.rebuild(done, alignments[start:end], language))
        start = end
    return out


def settled(
    document: Document, texts: list[str], translations: list[str | None]
) -> list[str | None]:
    """`translations` of a document's `texts` as it is rebuilt from them: a text that could not
    be translated (None) is kept as it was, unless the format may leave it out (`partial`)."""
    if document.partial:
        return translations
    return [text if t is None else t for text, t in zip(texts, translations, strict=True)]


def protections_of(document: Document, texts: list[str]) -> list[Protection | None]:
    """The code in each of a document's `texts`, as its format says (None: the request's)."""
    found = document.protections()
    if found is not None and len(found) != len(texts):
        raise ValueError(f"{len(found)} protections for {len(texts)} texts")
    return [None] * len(texts) if found is None else found
