"""YAML resource files (Rails' `config/locales/en.yml` and the like), read by PyYAML's safe
parser for where each scalar is written and rewritten by splicing
(`vaswani.documents.resources`): keys, comments, order and indentation stay byte for byte.

String values are translated (in mappings and lists), keys, numbers and booleans never. A value
is written back in its own style where the translation can be (plain, single or double quoted,
a `|` or `>` block), else double quoted. Rails' top key, the locale (`en:`), becomes the target,
and a plural mapping (`one:`, `other:`) gets the target's CLDR categories (a missing one: a
copy of `other`'s translation). Its code: `%{name}` and `%<name>s`, and what `DEFAULT` reads.

YAML's aliases, anchors and explicit tags are refused: a resource file has no use for them, and
they are how a YAML file becomes a billion laughs or an object constructor.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from vaswani.documents.formats import DocumentError, DocumentOptions, decoded
from vaswani.documents.jsonfiles import MAX_DEPTH
from vaswani.documents.resources import (
    CATEGORIES,
    Spliced,
    Value,
    plural_categories,
    plural_edits,
    utf8,
)
from vaswani.documents.spans import DEFAULT, Protection

YAML_CODE = Protection(DEFAULT | {"ruby", "brace", "printf-prose"})
LOCALE = re.compile(r"[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*")
_PRINTABLE = re.compile(
    "[\t\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]*"
)
"""Text YAML holds as it is outside double quotes: printable, no line break of any kind."""
_ESCAPED = re.compile(
    "[^\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
_PLAIN_SAFE = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:[^\n:#]|:(?!\s)|(?<!\s)#)*(?<![\s:])")


@dataclass
class _Walk:
    """What reading a YAML file's events finds: its string values, its root keys, its plural
    mappings (category -> the key's event and the value)."""

    text: str
    values: list[Value] = field(default_factory=list)
    keys: list[Any] = field(default_factory=list)
    plurals: list[dict[str, tuple[Any, Value | None]]] = field(default_factory=list)
    stack: list[list] = field(default_factory=list)
    """Each open collection: whether a mapping, its items read, its key, its members."""

    def event(self, event: Any, yaml: Any, resolver: Any) -> None:
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(self.stack) >= MAX_DEPTH:  # before PyYAML reads on: deep flow is quadratic
                raise DocumentError(f"YAML nested over {MAX_DEPTH} levels deep; refused")
            if self.stack and self.stack[-1][0] and self.stack[-1][1] % 2 == 0:
                line = event.start_mark.line + 1  # `{a: b}: c`, which YAML's safe loader refuses
                raise DocumentError(f"line {line}: a key that is a list or a mapping")
            self.advance()
            self.stack.append([type(event) is yaml.MappingStartEvent, 0, None, {}])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            mapping, _, _, members = self.stack.pop()
            if mapping and _is_plural(members):
                self.plurals.append(members)
        elif isinstance(event, yaml.ScalarEvent) and self.stack:
            top = self.stack[-1]
            if top[0] and top[1] % 2 == 0:  # a mapping's key
                top[2] = event
                self.keys += [event] * (len(self.stack) == 1)
            else:
                value = _value(self.text, event, resolver, yaml)
                self.values += [value] * (value is not None)
                if top[0]:
                    top[3][top[2].value] = (top[2], value)
            self.advance()

    def advance(self) -> None:
        if self.stack:
            self.stack[-1][1] += 1


def read_yaml(data: bytes, name: str, options: DocumentOptions) -> Spliced:
    import yaml

    text = decoded(data, name)
    resolver, walk = yaml.resolver.Resolver(), _Walk(text)
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            _refuse(event, yaml)
            walk.event(event, yaml, resolver)
    except yaml.YAMLError as error:
        raise DocumentError(f"{name}: not YAML ({error})".replace("\n", " ")) from None
    except DocumentError as error:
        raise DocumentError(f"{name}: {error}") from None
    values = walk.values

    def extra(translations: list[str], language: str | None) -> list[tuple[int, int, str]]:
        edits = []
        keys = walk.keys
        if language and len(keys) == 1 and _locale(keys[0]):
            edits.append((keys[0].start_mark.index, keys[0].end_mark.index, language))
        done = {id(v): t for v, t in zip(values, translations, strict=True)}
        for members in walk.plurals:
            other = members["other"][1]
            written = json.dumps(done.get(id(other), other.text), ensure_ascii=False)
            wholes = {c: (k.start_mark.index, v.end) for c, (k, v) in members.items()}
            edits += plural_edits(text, wholes, language, lambda c, w=written: f"{c}: {w}")
        return edits

    return Spliced(text, values, utf8(data), extra)


def yaml_quoted(text: str) -> str:
    """`text` as a YAML double-quoted scalar: JSON's escapes, and every character YAML would
    refuse or fold (control characters, NEL, the line and paragraph separators) as `\\uXXXX`."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _ESCAPED.sub(lambda m: f"\\u{ord(m[0]):04x}", quoted[1:-1]).join('""')


def _locale(key) -> bool:
    """Whether a root key names a language (Rails' `en:`)."""
    return (
        key.style is None
        and bool(LOCALE.fullmatch(key.value))
        and plural_categories(key.value) is not None
    )


def _refuse(event, yaml) -> None:
    if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
        raise DocumentError("YAML anchors and aliases are refused in a resource file")
    tag = getattr(event, "tag", None)
    implicit = getattr(event, "implicit", True)
    if tag not in (None, "!") and not (
        implicit is True or (isinstance(implicit, tuple) and any(implicit))
    ):
        raise DocumentError(f"YAML tags ({tag}) are refused in a resource file")


def _is_plural(members: dict) -> bool:
    return (
        "other" in members
        and set(members) <= set(CATEGORIES)
        and all(v is not None for _, v in members.values())
    )


def _value(text: str, event, resolver, yaml) -> Value | None:
    """A scalar that is a string, as a `Value` written back in its own style."""
    if event.style is None:
        tag = resolver.resolve(yaml.ScalarNode, event.value, (True, False))
        if tag != "tag:yaml.org,2002:str":
            return None
    start, end = event.start_mark.index, event.end_mark.index
    if event.style in ("|", ">"):
        written = text[start:end]
        body = written.rstrip("\n")
        header, _, content = body.partition("\n")
        words = re.search(r"^( *)\S", content, re.M)  # its first line of words sets the indent
        indent = words.group(1) if words else "  "
        rest = written[len(body) + 1 :]

        def block(translation: str) -> str:
            lines = translation.split("\n") if event.style == "|" else [translation]
            if not all(_PRINTABLE.fullmatch(line) and line == line.strip() for line in lines):
                return f"{yaml_quoted(translation)}\n{rest}"  # what a block cannot hold
            inside = "\n".join(indent + line if line else "" for line in lines)
            return f"{header}\n{inside}\n{rest}"

        return Value(start, end, event.value.rstrip("\n"), block, YAML_CODE)
    style = event.style

    def write(translation: str) -> str:
        printable = bool(_PRINTABLE.fullmatch(translation))
        if (
            style is None
            and printable
            and "\t" not in translation
            and _PLAIN_SAFE.fullmatch(translation)
        ):
            tag = resolver.resolve(yaml.ScalarNode, translation, (True, False))
            if tag == "tag:yaml.org,2002:str":
                return translation
        if style == "'" and printable and translation == translation.strip():
            return "'" + translation.replace("'", "''") + "'"
        return yaml_quoted(translation)

    return Value(start, end, event.value, write, YAML_CODE) if event.value.strip() else None
