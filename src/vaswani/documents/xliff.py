"""XLIFF 1.2 and 2.0: each unit's `<source>` translated into its `<target>`, inline codes
carried by word alignment, a review state set.

Paired codes whose content is text (1.2's `<g>`, 2.0's `<pc>`) are placed around the translated
words of the words they wrapped; every other code (`<x/>`, `<bx/>`, `<ex/>`, `<ph>`, `<bpt>`,
`<ept>`, `<it>`, `<sc/>`, `<ec/>`, `<mrk>`'s markers) is kept whole, with its native code
untouched, before the word it came before. Units with a target are kept unless overwrite is on;
units marked translate="no" are never touched. The target gets state "needs-review-translation"
(1.2) or its segment "translated" (2.0), and the file its target language when it names none.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from vaswani.documents.formats import Document, DocumentError, DocumentOptions, decoded
from vaswani.documents.markup import Alignment, Element, Tagged, place
from vaswani.documents.office import parse_xml, serialize, xml_text

V12 = "urn:oasis:names:tc:xliff:document:1.2"
V20 = "urn:oasis:names:tc:xliff:document:2.0"
PAIRED = {"g", "pc"}


def local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def tagged_source(source: Any) -> Tagged:
    """A `<source>`'s text with its inline codes as elements (their markup as serialized)."""
    from lxml import etree

    text: list[str] = [source.text or ""]
    root = Element("")

    def add(node: Any, parent: Element) -> None:
        ends = {c.get("startRef") for c in node if local(c.tag) == "ec"}
        opened: list[tuple[str, Element]] = []  # 2.0's <sc/> awaiting their <ec/> here
        for child in node:
            at = len("".join(text))
            holder = opened[-1][1] if opened else parent
            name = local(child.tag)
            if name in PAIRED:
                shell = copy.copy(child)
                shell.tail = None
                for inner in list(shell):
                    shell.remove(inner)
                shell.text = None
                markup = etree.tostring(shell, encoding="unicode")
                opening = markup[:-2] + ">" if markup.endswith("/>") else markup.split("</")[0]
                element = Element(
                    opening,
                    f"</{child.prefix + ':' if child.prefix else ''}{name}>",
                    at,
                )
                text.append(child.text or "")
                add(child, element)
                element.end = len("".join(text))
            else:
                whole = copy.copy(child)
                whole.tail = None
                element = Element(etree.tostring(whole, encoding="unicode"), "", at, at)
            if name == "ec" and opened and opened[-1][0] == child.get("startRef"):
                _, start = opened.pop()  # the pair's end: an element around what they hold
                start.closing, start.end = element.opening, at
                holder = None
            elif name == "sc" and child.get("id") in ends:
                opened.append((child.get("id"), element))
            if holder is not None:
                holder.children.append(element)
            tail = child.tail or ""
            if not element.closing and tail.startswith(" ") and "".join(text).endswith(" "):
                tail, element.tail = tail[1:], " "  # "a <ph/> b": spaces on both sides
            text.append(tail)

    add(source, root)
    return Tagged("".join(text), root)


@dataclass
class Unit:
    source: Any
    target: Any | None
    holder: Any  # where a new <target> goes: 1.2 the trans-unit, 2.0 the segment
    version: str


@dataclass
class Xliff(Document):
    root: Any
    units: list[Unit]
    version: str
    markup = True

    def texts(self) -> list[str]:
        return [tagged_source(unit.source).text for unit in self.units]

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        from lxml import etree

        namespace = V12 if self.version == "1.2" else V20
        for unit, translation, alignment in zip(self.units, translations, alignments, strict=True):
            if translation is None:  # below --min-confidence: left for a translator
                continue
            placed = place(
                tagged_source(unit.source), xml_text(translation), alignment or [], escape
            )
            fragment = f'<target xmlns="{namespace}">{placed}</target>'
            try:
                new = etree.fromstring(fragment)
            except etree.XMLSyntaxError as error:  # cannot happen with codes kept whole
                raise DocumentError(f"a translated target is not XML ({error})") from None
            if unit.target is not None:
                new.attrib.update({k: v for k, v in unit.target.attrib.items()})
                unit.holder.replace(unit.target, new)
            else:
                new.tail = unit.source.tail
                unit.source.addnext(new)
            if self.version == "1.2":
                new.set("state", "needs-review-translation")
            else:
                unit.holder.set("state", "translated")
        if language:
            holder = self.root if self.version == "2.0" else None
            for node in [holder] if holder is not None else self.root.iter(f"{{{V12}}}file"):
                name = "trgLang" if self.version == "2.0" else "target-language"
                if not node.get(name):
                    node.set(name, language)
        return serialize(self.root)


def translatable(node: Any) -> bool:
    """Whether `node` is to be translated: the nearest `translate` attribute on it or around it
    (a unit, a group, a file) decides; none says yes."""
    for around in (node, *node.iterancestors()):
        value = around.get("translate")
        if value is not None:
            return value != "no"
    return True


def read_xliff(data: bytes, name: str, options: DocumentOptions) -> Xliff:
    root = parse_xml(decoded(data, name).encode("utf-8"), name)
    namespace = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
    if namespace not in (V12, V20):
        raise DocumentError(f"{name}: not XLIFF 1.2 or 2.0 (root {root.tag})")
    version = "1.2" if namespace == V12 else "2.0"
    units = []
    holders = (
        root.iter(f"{{{V12}}}trans-unit") if version == "1.2" else root.iter(f"{{{V20}}}segment")
    )
    for holder in holders:
        if not translatable(holder):
            continue
        source = holder.find(f"{{{namespace}}}source")
        target = holder.find(f"{{{namespace}}}target")
        if source is None or not "".join(source.itertext()).strip():
            continue
        if target is not None and "".join(target.itertext()).strip() and not options.overwrite:
            continue
        units.append(Unit(source, target, holder, version))
    return Xliff(root, units, version)
