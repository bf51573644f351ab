"""Translation memories and localisation files: TMX 1.4 and XLIFF 1.2 / 2.0.

Both are read as a stream (`iterparse`, each unit dropped from its parent once read), so a
multi-GB TMX never sits in memory, with defusedxml's parser: a file that declares entities (the
"billion laughs") or names an external one (a local file, a URL) is refused, never expanded.

Inline markup inside a segment is of two kinds. Codes stand for formatting of the original
document (TMX `<bpt> <ept> <ph> <it> <ut>`, XLIFF 1.2 `<bpt> <ept> <ph> <it> <x/> <bx/> <ex/>`,
XLIFF 2.0 `<ph/> <sc/> <ec/>`): `markup="strip"` (the default) leaves them out, `"keep"` keeps the
native code they hold (e.g. `<b>`) as text. Wrappers around real text (`<hi> <g> <mrk> <pc>`)
keep their text either way.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import defusedxml
import defusedxml.ElementTree as SafeTree

from vaswani.data.corpora import DataError, Pair
from vaswani.languages import language_matches, normal

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
CODES = {"bpt", "ept", "ph", "it", "ut", "x", "bx", "ex", "sc", "ec", "sub"}
MARKUP = ("strip", "keep")


def local(tag: str) -> str:
    """A tag without its namespace: "{urn:oasis:names:tc:xliff:document:2.0}unit" -> "unit"."""
    return tag.rsplit("}", 1)[-1]


def units(path: Path, names: set[str]) -> Iterator[tuple[ElementTree.Element, list[str]]]:
    """Each element named in `names` once it is complete, with the local names of the elements
    open around it (outermost first); it is removed from its parent after use, so memory stays
    flat. Unsafe or damaged XML is a DataError naming the file (and line and column)."""
    stack: list[ElementTree.Element] = []
    try:
        for event, element in SafeTree.iterparse(
            str(path), events=("start", "end"), forbid_dtd=False, forbid_entities=True,
            forbid_external=True,
        ):  # fmt: skip
            if event == "start":
                stack.append(element)
                continue
            stack.pop()
            if local(element.tag) in names:
                yield element, [local(e.tag) for e in stack]
                if stack:
                    stack[-1].remove(element)
    except defusedxml.DefusedXmlException as error:
        raise DataError(
            f"{path}: refused: the XML declares entities or external references ({error}); a "
            "translation memory needs neither"
        ) from None
    except ElementTree.ParseError as error:
        line, column = error.position
        reason = str(error).split(":", 1)[0]
        raise DataError(f"{path}:{line}:{column + 1}: damaged XML ({reason})") from None


def segment_text(element: ElementTree.Element, markup: str = "strip") -> str:
    """The text of a segment; inline codes left out (`strip`) or kept as their native code."""
    parts = [element.text or ""]
    for child in element:
        name = local(child.tag)
        if name not in CODES:
            parts.append(segment_text(child, markup))
        elif markup == "keep":
            parts.append("".join(child.itertext()))
        parts.append(child.tail or "")
    return " ".join("".join(parts).split())


def read_tmx(
    path: Path,
    src_lang: str | None,
    tgt_lang: str | None,
    dropped: Counter,
    markup: str = "strip",
) -> Iterator[Pair]:
    """(source, target) of each translation unit that has both languages. Language matching is
    tolerant of region and case (`es` matches es-ES, ES, es_MX; `pt-BR` only pt-BR). The source
    language defaults to the header's srclang. A file without the asked languages is one line
    listing those it has."""
    seen: Counter = Counter()
    kept, header = 0, ""
    for element, _ in units(path, {"header", "tu"}):
        if local(element.tag) == "header":
            header = element.get("srclang", "")
            if not src_lang and header.lower() != "*all*":  # its language: en-US matches en-GB
                src_lang = normal(header).split("-", 1)[0]
            continue
        if not src_lang or not tgt_lang:
            raise DataError(
                f"{path}: a TMX file: give --src-lang and --tgt-lang (its header's source "
                f"language is {header or 'not set'})"
            )
        texts: dict[str, str] = {}
        for tuv in element:
            if local(tuv.tag) != "tuv":
                continue
            lang = tuv.get(XML_LANG) or tuv.get("lang") or ""
            seen[lang] += 1
            seg = next((s for s in tuv if local(s.tag) == "seg"), None)
            if seg is not None:
                texts.setdefault(lang, segment_text(seg, markup))
        source = next((t for lang, t in texts.items() if language_matches(lang, src_lang)), None)
        target = next((t for lang, t in texts.items() if language_matches(lang, tgt_lang)), None)
        if source and target:
            kept += 1
            yield source, target
        else:
            dropped["a language missing"] += 1
    if not kept and seen:
        have = ", ".join(f"{lang or '(none)'} ({n:,})" for lang, n in seen.most_common())
        raise DataError(
            f"{path}: no unit has both {src_lang} and {tgt_lang}; its languages: {have}"
        )


def read_xliff(path: Path, dropped: Counter, markup: str = "strip") -> Iterator[Pair]:
    """(source, target) of each translated unit of an XLIFF 1.2 file (`<trans-unit>`) or segment
    of an XLIFF 2.0 file (`<segment>`); units without a target are skipped and counted."""
    for element, _ in units(path, {"trans-unit", "segment"}):
        parts = {local(child.tag): child for child in element}
        source, target = parts.get("source"), parts.get("target")
        source_text = segment_text(source, markup) if source is not None else ""
        target_text = segment_text(target, markup) if target is not None else ""
        if not source_text:
            dropped["empty source"] += 1
        elif not target_text:
            dropped["untranslated"] += 1
        else:
            yield source_text, target_text
