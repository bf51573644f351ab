"""HTML, a fragment or a whole page, as the texts to translate and the way back.

The page is read with the standard library's tolerant parser into markup kept as written and
*blocks*: the inline content of a paragraph, heading, list item or cell (text with `<b>`, `<i>`,
`<a href>`, `<span>`, `<br>`, images ...), each translated whole, sentence by sentence, with its
inline elements placed back by word alignment (`vaswani.documents.markup`). Whitespace inside a
block is collapsed to single spaces, as a browser shows it. What is not prose is never touched:
`script`, `style`, `pre`, `code` (inside a sentence `code` is kept whole, placed like an image),
`textarea`, `svg`, `math`, comments. The `alt`, `title` and `placeholder` attributes are
translated; `lang` of `<html>` is set to the target language.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser

from vaswani.documents.markup import MAX_DEPTH, Alignment, Element, MarkupError, Tagged, place
from vaswani.errors import VaswaniError

INLINE = frozenset(
    [
        "a",
        "abbr",
        "b",
        "bdi",
        "bdo",
        "big",
        "cite",
        "data",
        "del",
        "dfn",
        "em",
        "font",
        "i",
        "ins",
        "kbd",
        "label",
        "mark",
        "q",
        "s",
        "samp",
        "small",
        "span",
        "strike",
        "strong",
        "sub",
        "sup",
        "time",
        "tt",
        "u",
        "var",
    ]
)
VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)
VOID_INLINE = frozenset({"br", "img", "wbr", "input"})
UNTOUCHED = frozenset({"script", "style", "pre", "code", "textarea", "svg", "math", "noscript"})
_SPACE = re.compile(r"[ \t\n\r\f]+")  # HTML's collapsible whitespace (not &nbsp;)
_END_SPACE = re.compile(r"[ \t\n\r\f]*$")


class HtmlError(VaswaniError, ValueError):
    """HTML that cannot be translated as it is: an inline element never closed, or closed in
    the wrong place."""


@dataclass
class _Attribute:
    """A translatable attribute value in a start tag: its place in the tag's text."""

    value: str
    start: int
    end: int
    quoted: bool = True


@dataclass
class _StartTag:
    """A start tag's text, with the attribute values to translate."""

    text: str
    attributes: list[_Attribute] = field(default_factory=list)

    def translated(self, translations: list[str]) -> str:
        out, at = [], 0
        for attribute, translation in zip(self.attributes, translations, strict=True):
            value = html.escape(translation, quote=True)
            out += [self.text[at : attribute.start], value if attribute.quoted else f'"{value}"']
            at = attribute.end
        return "".join(out) + self.text[at:]


_ATTRIBUTE = re.compile(
    r"""\s(alt|title|placeholder)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I
)


def start_tag(text: str) -> _StartTag:
    """A start tag's text with its alt, title and placeholder values found in it."""
    found = []
    for match in _ATTRIBUTE.finditer(text):
        group = next(g for g in (2, 3, 4) if match.group(g) is not None)
        value = html.unescape(match.group(group))
        if value.strip():
            found.append(_Attribute(value, *match.span(group), quoted=group != 4))
    return _StartTag(text, found)


@dataclass
class _Block:
    """A run of inline content: its text and elements, and its markup as written (elements by
    reference, so that a translated attribute shows in both), which is what comes back when
    there is nothing to translate in it."""

    tagged: Tagged
    raw: list[str | Element]

    def written(self) -> str:
        return "".join(part if isinstance(part, str) else part.opening for part in self.raw)


class _Containers(HTMLParser):
    """A first pass: which inline elements (numbered by their start tags) hold a block, such as a
    link around a card's heading and paragraph (valid HTML); those are read as blocks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.count = 0
        self.open: list[tuple[str, int]] = []  # inline elements open, with their numbers
        self.found: set[int] = set()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        number, self.count = self.count, self.count + 1
        if tag in INLINE:
            self.open.append((tag, number))
            if len(self.open) > MAX_DEPTH:  # refused before the work grows with the depth
                raise MarkupError(f"inline markup nested over {MAX_DEPTH} levels deep")
        elif tag not in VOID_INLINE and tag != "code":  # a block starts in them
            self.found.update(n for _, n in self.open)

    def handle_endtag(self, tag: str) -> None:
        names = [name for name, _ in self.open]
        if tag in names:
            del self.open[len(names) - 1 - names[::-1].index(tag) :]


class HtmlDocument(HTMLParser):
    """An HTML text as markup and blocks. `texts()` are what to translate (each block's text,
    then each attribute value); `rebuild` writes it back translated."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.items: list[str | _Block] = []
        self.tags: list[tuple[_StartTag, Callable[[str], None]]] = []
        self.text: list[str] = []  # the current block's plain text
        self.length = 0  # ... its length so far
        self.raw: list[str | Element] = []  # ... and its markup as written
        self.open: list[tuple[str, Element]] = []  # inline elements open in it
        self.root = Element("")
        self.skipping: tuple[str, int] | None = None  # an untouched element: name, depth
        self.code: Element | None = None  # inline code being read, kept whole
        self.html_tag: int | None = None
        self.count = 0  # start tags so far
        self.containers: set[int] = set()  # inline elements read as blocks (`_Containers`)
        self.open_containers: list[str] = []

    @classmethod
    def parse(cls, text: str) -> HtmlDocument:
        """The document `text` holds; an HtmlError for markup it cannot carry (an element never
        closed, nesting over MAX_DEPTH, a marked section html.parser refuses)."""
        first, document = _Containers(), cls()
        try:
            first.feed(text)
            first.close()
            document.containers = first.found
            document.feed(text)
            document.close()
            document.flush()
        except AssertionError as error:  # html.parser asserts on `<![foo[`
            raise HtmlError(f"markup the HTML parser refuses: {error}") from None
        except MarkupError as error:
            raise HtmlError(str(error)) from None
        return document

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        """`<![CDATA[...]]>`, `<![if IE]>`: kept as written, byte for byte (html.parser hands
        `unknown_decl` the section without its brackets, which cannot be written back)."""
        end = super().parse_marked_section(i, report=0)
        if end >= 0:
            self.other(self.rawdata[i:end])
        return end

    # --- reading -------------------------------------------------------------------------

    def keep(self, markup: str) -> None:
        """Markup outside any block."""
        self.items.append(markup)

    def flush(self) -> None:
        """End the current block (at a block-level tag, untouched content, the end)."""
        if self.open:
            name = self.open[-1][0]
            raise HtmlError(f"<{name}> before line {self.getpos()[0]} is never closed in its block")
        trail = ""
        if self.raw and isinstance(self.raw[-1], str) and self.text:  # spaces after the text
            end = _END_SPACE.search(self.raw[-1]).start()
            self.raw[-1], trail = self.raw[-1][:end], self.raw[-1][end:]
            if trail and self.ends_in_space():
                self.text[-1] = self.text[-1][:-1]
        if self.raw:
            self.items.append(_Block(Tagged("".join(self.text), self.root), self.raw))
        if trail:
            self.keep(trail)
        self.text, self.raw, self.root, self.length = [], [], Element(""), 0

    def at(self) -> int:
        return self.length

    def ends_in_space(self) -> bool:
        return bool(self.text) and self.text[-1].endswith(" ")  # no piece is empty

    def inline(self, markup: str, text: str = "") -> Element:
        """An element of the current block, inside the innermost open one."""
        element = Element(markup, start=self.at())
        self.raw.append(element)
        if text:
            self.text.append(text)
            self.length += len(text)
        element.end = self.at()
        (self.open[-1][1] if self.open else self.root).children.append(element)
        return element

    def translatable(self, text: str, set_text: Callable[[str], None]) -> None:
        tag = start_tag(text)
        if tag.attributes:
            self.tags.append((tag, set_text))

    def handle_starttag(self, tag: str, attrs: list, closed: bool = False) -> None:
        text = self.get_starttag_text() or f"<{tag}>"
        number, self.count = self.count, self.count + 1
        if self.skipping is None and number in self.containers and not closed:
            self.open_containers.append(tag)
            tag = "div"  # read as a block
        if self.skipping is not None:
            self.verbatim(text)
            name, depth = self.skipping
            if tag == name and not closed:
                self.skipping = (name, depth + 1)
        elif tag in UNTOUCHED and (tag != "code" or not self.raw):
            self.flush()
            self.keep(text)
            self.skipping = None if closed else (tag, 1)
        elif tag == "code":  # inside a sentence: kept whole, placed like an image
            self.code = self.inline(text)
            self.skipping = None if closed else ("code", 1)
        elif tag == "br" and not self.open:  # a line break between runs of text: a boundary
            self.flush()
            self.keep(text)
        elif tag in INLINE or tag in VOID_INLINE:
            element = self.inline(text, " " if tag == "br" else "")
            self.translatable(text, lambda new: setattr(element, "opening", new))
            if tag not in VOID and not closed:
                self.open.append((tag, element))
        else:
            self.flush()
            index = len(self.items)
            if tag == "html":
                self.html_tag = index
            self.keep(text)
            self.translatable(text, lambda new: self.items.__setitem__(index, new))

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.handle_starttag(tag, attrs, closed=True)

    def verbatim(self, markup: str) -> None:
        """Untouched content: inside inline code, part of its element; otherwise kept."""
        if self.code is not None:
            self.code.opening += markup
        else:
            self.keep(markup)

    def handle_endtag(self, tag: str) -> None:
        markup = f"</{tag}>"
        if self.skipping is not None:
            self.verbatim(markup)
            name, depth = self.skipping
            if tag == name:
                self.skipping = (name, depth - 1) if depth > 1 else None
                if self.skipping is None:
                    self.code = None
        elif tag in INLINE and self.open_containers[-1:] == [tag] and self.open[-1:] == []:
            self.open_containers.pop()  # the end of an inline element read as a block
            self.flush()
            self.keep(markup)
        elif tag in INLINE:
            if not self.open or self.open[-1][0] != tag:
                expected = f"</{self.open[-1][0]}>" if self.open else "no closing tag"
                raise HtmlError(f"</{tag}> at line {self.getpos()[0]} where {expected} belongs")
            _, element = self.open.pop()
            element.closing, element.end = markup, self.at()
            self.raw.append(markup)
        elif tag not in VOID:
            self.flush()
            self.keep(markup)

    def handle_data(self, data: str) -> None:
        if self.skipping is not None:
            self.verbatim(data)
        elif not self.raw and _SPACE.fullmatch(data):
            self.keep(data)  # whitespace between blocks, as written
        else:
            if not self.raw and _SPACE.match(data):  # spaces before a block: as written
                lead = _SPACE.match(data).group()
                self.keep(lead)
                data = data[len(lead) :]
            self.raw.append(data)
            self.add_text(data)

    def add_text(self, text: str) -> None:
        text = _SPACE.sub(" ", text)
        if text.startswith(" ") and self.ends_in_space():
            text = text[1:]
            last = self.raw[-2] if len(self.raw) > 1 else None  # [-1]: this text's markup
            if isinstance(last, Element) and last.start == last.end == self.at():
                last.tail = " "  # "a <img> b": the image keeps a space on either side
        if text:
            self.text.append(text)
            self.length += len(text)

    def handle_entityref(self, name: str) -> None:
        self.reference(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.reference(f"&#{name};")

    def reference(self, markup: str) -> None:
        if self.skipping is not None:
            self.verbatim(markup)
        else:
            self.raw.append(markup)
            self.add_text(html.unescape(markup))

    def handle_comment(self, data: str) -> None:
        self.other(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self.other(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self.other(f"<?{data}>")

    def other(self, markup: str) -> None:
        """Comments and declarations: inside a block, kept in place like an empty element."""
        if self.skipping is not None:
            self.verbatim(markup)
        elif self.raw:
            self.inline(markup)
        else:
            self.keep(markup)

    # --- writing -------------------------------------------------------------------------

    @property
    def blocks(self) -> list[_Block]:
        """The blocks with text to translate."""
        return [
            item for item in self.items if isinstance(item, _Block) and item.tagged.text.strip()
        ]

    def texts(self) -> list[str]:
        """What to translate: each block's text, then each attribute value, in order."""
        return [block.tagged.text for block in self.blocks] + [
            attribute.value for tag, _ in self.tags for attribute in tag.attributes
        ]

    def rebuild(
        self,
        translations: list[str],
        alignments: list[Alignment | None],
        language: str | None = None,
    ) -> str:
        """The HTML with `translations` (one per text of `texts()`) in place, each block's
        elements placed by its `alignments` entry (None: by relative position); `lang` of
        `<html>` set to `language` when given."""
        blocks = self.blocks
        if len(translations) != len(self.texts()):
            raise ValueError(f"{len(translations)} translations for {len(self.texts())} texts")
        values = iter(translations[len(blocks) :])
        for tag, set_text in self.tags:
            set_text(tag.translated([next(values) for _ in tag.attributes]))
        placed = {
            id(block): place(block.tagged, translation, alignment or [], _escape)
            for block, translation, alignment in zip(blocks, translations, alignments, strict=False)
        }
        items = [
            item if isinstance(item, str) else placed.get(id(item)) or item.written()
            for item in self.items
        ]
        if language is not None and self.html_tag is not None:
            items[self.html_tag] = with_language(items[self.html_tag], language)
        return "".join(items)


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def with_language(tag: str, language: str) -> str:
    """An `<html ...>` start tag with lang set to `language`."""
    value = html.escape(language, quote=True)
    pattern = re.compile(r"""(\slang\s*=\s*)("[^"]*"|'[^']*'|[^\s"'>]+)""", re.I)
    if pattern.search(tag):
        return pattern.sub(lambda m: f'{m.group(1)}"{value}"', tag, count=1)
    end = len(tag) - (2 if tag.endswith("/>") else 1)
    return f'{tag[:end]} lang="{value}"{tag[end:]}'
