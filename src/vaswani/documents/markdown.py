"""Markdown, read with markdown-it-py (CommonMark and tables): the text of paragraphs, headings and
table cells translated, with emphasis, links and inline code carried by word alignment; code
blocks, fenced code, HTML blocks, inline code, link destinations and image sources untouched.

Only the translated text of the file changes: each paragraph is written on the first of its
lines (after its container's marks, such as `> ` or `- `), and its other lines go; every other
line is kept as it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from vaswani.documents.formats import Document, DocumentError, DocumentOptions, decoded
from vaswani.documents.markup import Alignment, Element, Tagged, place

_ENDING = re.compile(
    r"""\]\(\s*(?:<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"""
    r"""(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)|\]\[[^\]]*\]"""
)
"""How a link or image ends as written: `](destination "title")`, or `][label]` by reference;
the k-th in the text is that of the k-th link or image to close."""
_SPECIAL = re.compile(r"([\\`*\[\]<])")
PAIRS = {"strong_open": "strong_close", "em_open": "em_close", "s_open": "s_close"}


def escape(text: str) -> str:
    """Translated text as Markdown that shows it: its marks escaped."""
    return _SPECIAL.sub(r"\\\1", text)


def inline_tagged(token: Any) -> Tagged:
    """An inline token's text, with its emphasis, links and code as elements."""
    text: list[str] = []
    root = Element("")
    stack = [(root, None)]  # open elements, each with the token that opened it
    endings = iter(_ENDING.findall(token.content))
    children = token.children or []
    k = at = 0  # at: the length of the text so far
    while k < len(children):
        child = children[k]
        kind = child.type
        if kind in ("text", "softbreak"):
            content = child.content if kind == "text" else " "
            last = stack[-1][0].children[-1] if stack[-1][0].children else None
            empty = last is not None and last.start == last.end == at
            spaced = not text or text[-1].endswith(" ")
            if empty and content.startswith(" ") and spaced:
                content, last.tail = content[1:], " "  # "a `code` b": spaces both sides
            if content:
                text.append(content)
                at += len(content)
        elif kind in PAIRS or kind == "link_open" and child.markup != "autolink":
            element = Element("[" if kind == "link_open" else child.markup, child.markup, at)
            stack[-1][0].children.append(element)
            stack.append((element, child))
        elif kind in PAIRS.values() or kind == "link_close":
            element, opened = stack.pop()
            element.end = at
            if kind == "link_close":  # closes after any image inside it: its ending comes later
                element.closing = link_end(opened, endings)
        else:  # code, images, autolinks, inline HTML, hard breaks: kept whole, as void elements
            markup, k = whole(children, k, endings)
            stack[-1][0].children.append(Element(markup, "", at, at))
        k += 1
    return Tagged("".join(text), root)


def link_end(token: Any, endings: Any) -> str:
    """How a link ends as written (markdown-it gives its destination normalised)."""
    found = next(endings, None)
    if found is not None:
        return found
    title = token.attrGet("title")
    return f"]({token.attrGet('href')}" + (f' "{title}"' if title else "") + ")"


def whole(children: list, k: int, endings: Any) -> tuple[str, int]:
    """The Markdown of the element at children[k] kept whole, and the index of its last token
    (an image takes its ending from `endings`)."""
    child = children[k]
    if child.type == "code_inline":
        pad = " " if child.content.startswith("`") or child.content.endswith("`") else ""
        return f"{child.markup}{pad}{child.content}{pad}{child.markup}", k
    if child.type == "image":
        ending = next(endings, None) or f"]({child.attrGet('src')})"
        return f"![{child.content}{ending}", k
    if child.type == "hardbreak":
        return "\\\n", k
    if child.type == "link_open":  # an autolink: <https://...>
        end = next(j for j in range(k, len(children)) if children[j].type == "link_close")
        return f"<{''.join(c.content for c in children[k + 1 : end])}>", end
    return child.content, k


@dataclass
class _Place:
    """Where an inline token's text is in the file: (line, start, end) of each of its lines."""

    token: Any
    spans: list[tuple[int, int, int]]


@dataclass
class Markdown(Document):
    lines: list[str]
    places: list[_Place]
    markup = True

    def texts(self) -> list[str]:
        return [inline_tagged(p.token).text for p in self.places]

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        lines = list(self.lines)
        edits = []
        for where, translation, alignment in zip(
            self.places, translations, alignments, strict=True
        ):
            text = place(inline_tagged(where.token), translation, alignment or [], escape)
            first, *rest = where.spans
            edits.append((first, text))
            edits += [(span, None) for span in rest]
        for (line, start, end), text in sorted(edits, key=lambda e: e[0], reverse=True):
            if text is None:
                lines[line] = lines[line][:start] + lines[line][end:]
                if not lines[line].strip(" \t>\r\n"):
                    lines[line] = None
            else:
                lines[line] = lines[line][:start] + text + lines[line][end:]
        return "".join(line for line in lines if line is not None).encode("utf-8")


def read_markdown(data: bytes, name: str, options: DocumentOptions) -> Markdown:
    from markdown_it import MarkdownIt

    text = decoded(data, name)
    lines = text.splitlines(keepends=True)
    try:
        tokens = MarkdownIt("commonmark").enable("table").enable("strikethrough").parse(text)
    except Exception as error:  # markdown-it raises plain errors on what it cannot read
        raise DocumentError(f"{name}: cannot read it as Markdown ({error})") from None
    places, cursor = [], (0, 0)
    for token in tokens:
        if token.type != "inline" or not token.content.strip() or token.map is None:
            continue
        spans = []
        line, column = max(cursor, (token.map[0], 0))
        for piece in token.content.split("\n"):
            while line < len(lines) and lines[line].find(piece, column) < 0:
                line, column = line + 1, 0
            if line == len(lines):
                raise DocumentError(f"{name}: cannot find the text of line {token.map[0] + 1}")
            start = lines[line].find(piece, column)
            spans.append((line, start, start + len(piece)))
            line, column = (line, start + len(piece)) if not piece else (line + 1, 0)
        cursor = (spans[-1][0], spans[-1][2])
        places.append(_Place(token, spans))
    return Markdown(lines, places)
