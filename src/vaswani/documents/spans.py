"""The code inside software strings, found by syntax: printf, Python, Qt, ICU MessageFormat,
shell and template variables, URLs, e-mail addresses, paths, inline code, escapes, HTML/XML
markup (`SYNTAXES`), and keyboard accelerators. A `Protection` says which syntaxes a string is
written in (a format knows: a PO entry's `c-format` flag; otherwise `DEFAULT`, which leaves
prose alone: `50% off` is not printf, and `50 % of` would be with printf's space flag, so
`DEFAULT` reads printf without it). `vaswani.documents.protect` takes what is found out of the
model's reach and puts it back.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

from vaswani.errors import VaswaniError


class ProtectError(VaswaniError, ValueError):
    """A pattern given to protect that is not a valid regular expression."""


def _language_codes() -> str:
    """A value that is nothing but a language code or locale (`en`, `pt_BR`, `zh-Hant`), as
    a pattern: CLDR's two-letter languages, without those that are English words (`it`, `no`)
    unless a region or script follows."""
    from babel.localedata import locale_identifiers

    bases = {code.split("_")[0] for code in locale_identifiers()}
    words = {"am", "an", "as", "be", "ha", "he", "hi", "id", "is", "it", "la", "my", "no", "or"}
    words |= {"so", "to"}
    alone = "|".join(sorted(b for b in bases if len(b) == 2 and b not in words))
    tagged = "|".join(sorted(b for b in bases if len(b) in (2, 3)))
    region = r"[-_](?:[A-Z]{2}|\d{3}|[A-Z][a-z]{3})(?:[-_](?:[A-Z]{2}|\d{3}))?"
    return rf"^(?:(?:{tagged}){region}|(?:{alone}))$"


_FLAGS = r"[-+0#']*"
_WIDTH = r"(?:\*(?:\d+\$)?|\d+)?(?:\.(?:\*(?:\d+\$)?|\d+))?"
_LENGTH = r"(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32|I)?"
# C's conversions, glibc's %m (the error's text) and the wide %C and %S
PRINTF = rf"%(?:\d+\$)?{_FLAGS}{_WIDTH}{_LENGTH}[diouxXeEfFgGaAcspnmCS]|%%|%<PRI\w+>"
SYNTAXES = {
    "url": r"\b(?:https?|ftp|file)://[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]]|\bwww\.[\w-]+\.[\w.-]*\w",
    "email": r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
    "path": r"(?<![\w.:/])(?:~|\.\.?)?/[\w.-]*[\w-](?:/[\w.-]*[\w-])+/?|(?<!\w)[A-Z]:\\[\w.\\-]*[\w\\-]"
    r"|(?<![\w.:/])\.[\w-]+(?:/[\w.-]*[\w-])+",
    "code": r"`[^`'\n]+`",
    "template": r"\{\{.{0,200}?\}\}|\{%.{0,200}?%\}",
    "markup": r"</?[A-Za-z][\w:.-]*(?:\s[^<>]{0,2000})?/?>|<!--.{0,2000}?-->"
    r"|&(?:[A-Za-z]\w*|#\d+|#x[\da-fA-F]+);",
    "metavar": r"<[A-Za-z][^<>\s]{0,60}>",
    "shell": r"\$\{[^{}\s]+\}|\$\([^()\s]+\)|\$[A-Za-z_]\w*",
    "variables": r"\$\{[^{}\s]+\}|\$\([^()\s]+\)|\$[A-Za-z_]\w*|%[A-Z][A-Z0-9_]{2,}%?",
    "language": _language_codes(),
    "tags": r"</?\d{1,3}>|<\d{1,3}\s*/>",
    "marker": r"__[A-Za-z]\w*?__|@@[\w.-]{1,60}@@",
    "option": r"(?<![\w.<>%\\-])(?:--[a-z0-9](?:[\w-]*\[[\w|-]+\]|[\w-]*[\w])"
    r"|-[A-Za-z][A-Za-z0-9]*(?:-[a-z0-9]+)*(?![\w-]))",
    "identifier": (
        r"(?<![\w.$%\\>-])(?:[A-Za-z][A-Za-z0-9]*(?:_+(?:[A-Za-z0-9]+|\*(?=\()))+"
        r"|\.?[A-Za-z_]\w+(?:\.[A-Za-z_]\w*)+|[a-z]+\d*(?:[A-Z][a-z0-9]+)+"
        r"|[A-Za-z_]\w*(?=\(\)))"
        r"(?:\(\))?(?![\w<-])"
    ),
    "version": r"(?<![\w.])v?\d+(?:\.\d+){2,}(?:-[0-9A-Za-z.]+)?(?![\w.])",
    # a named one with the attribute read from its value glued on (`%(class_name)s.allow_empty`)
    "python": rf"%\([^()\s]+\){_FLAGS}{_WIDTH}[diouxXeEfFgGcrsa](?:\.[A-Za-z_]\w*)*"
    rf"|{PRINTF.replace(_FLAGS, '[-+ 0#]*')}",
    "brace": r"\{\{|\}\}|\{[\w.\[\]]*(?:![rsa])?(?::[^{}\s]*)?\}",
    "printf": PRINTF.replace(_FLAGS, r"[-+ 0#']*"),
    "printf-prose": PRINTF,
    "strftime": r"%[-_0^#]?[aAbBcCdDeFgGhHIjklmMnpPrRsStTuUVwWxXyYzZ+]",
    "qt": r"%L?\d{1,2}",
    "apple": r"%#@\w+@|%(?:\d+\$)?[-+ 0#]*\d*(?:\.\d+)?@",
    "ruby": r"%\{\w+\}|%<\w+>[-+ 0#]*\d*(?:\.\d+)?[a-zA-Z]",
    "messageformat": r"\{\d+\s*,[^{}]{0,200}\}",
    "icu": r"(?!)",  # read by `icu_spans`, not by a pattern
    "escapes": r"\\(?:[abfnrtv\\\"']|u[\da-fA-F]{4}|x[\da-fA-F]{2}|[0-7]{1,3})",
}
"""Each syntax's spans; earlier syntaxes win where two would match at one place. What a span
may hold is bounded (a tag's attributes, a comment), so that a string of ten thousand `<!--`
never closed is read in linear time."""
ORDERED = frozenset({"printf", "printf-prose", "python"})
"""Syntaxes whose unnamed spans (`%s`, not `%1$s` or `%(name)s`) are consumed in order: they
come back in their order, wherever the words take them."""
CODE = frozenset({"language", "tags", "marker", "option", "identifier", "version"})
"""Code in prose that no format flag declares: a value that is a language code (`"locale":
"en"`), React's and i18next's numbered tags (`<0>`),
`__NAME__` and `@@name@@` markers, command-line options (`--delete`, `-q`, `-tvf`; not their
`=METAVAR`, which translators translate), identifiers (`snake_case`, `CONSTANT_CASE`,
`KP_Page_Up`,
`camelCase`, `dotted.names`, `name()`; not a CamelCase product name or a hyphenated word) and
version strings (`1.2.3`)."""
DEFAULT = frozenset(
    {"url", "email", "path", "code", "template", "markup", "metavar", "variables", "brace"}
    | {"qt", "icu"}
    | {"printf-prose", "strftime", "escapes"}
    | CODE
)
"""What a string of unknown origin is protected from: code that prose does not contain."""
ACCELERATORS = "_&~"
"""Keyboard accelerator markers: GNOME's `_`, KDE's and Windows' `&`, LibreOffice's `~`."""


@functools.lru_cache(maxsize=64)
def _finder(syntaxes: tuple[str, ...]) -> re.Pattern:
    parts = [f"(?P<{name.replace('-', '_')}>{SYNTAXES[name]})" for name in syntaxes]
    return re.compile("|".join(parts) or r"(?!)", re.S)


_UNICODE_CLASSES = {"w": r"\p{L}\p{N}_", "d": r"\p{Nd}", "s": r"\s\x0b\x1c-\x1f\x85\p{Z}"}
"""What Python's `\\w`, `\\d` and `\\s` match, in RE2's syntax (RE2's own are ASCII only)."""


def _unicode_classes(pattern: str) -> str:
    """`pattern` with `\\w`, `\\d`, `\\s` (and outside a class `\\W`, `\\D`, `\\S`) matching
    what they match in Python, so that a user's `@\\w+@` finds `@ÄB@` under RE2 too."""
    out, k, in_class = [], 0, False
    while k < len(pattern):
        char = pattern[k]
        if char == "\\" and k + 1 < len(pattern):
            escaped = pattern[k + 1]
            letter = escaped.lower()
            if letter in _UNICODE_CLASSES and (escaped.islower() or not in_class):
                inner = _UNICODE_CLASSES[letter]
                if in_class:
                    out.append(inner)
                else:
                    out.append(f"[{'^' * escaped.isupper()}{inner}]")
            else:
                out.append(pattern[k : k + 2])
            k += 2
            continue
        if char == "[" and not in_class:
            in_class = True
            out.append(char)
            k += 1
            if pattern[k : k + 1] == "^":
                out.append("^")
                k += 1
            if pattern[k : k + 1] == "]":  # a `]` first in a class is itself
                out.append("]")
                k += 1
            continue
        in_class = in_class and char != "]"
        out.append(char)
        k += 1
    return "".join(out)


@functools.lru_cache(maxsize=64)
def _user_finder(patterns: tuple[str, ...]) -> Any:
    """The user's patterns as one RE2 expression (a group each, in order): RE2 runs in time
    linear in the text, whatever the pattern, where Python's engine can backtrack for ever
    (`(a+)+$`)."""
    import re2

    options = re2.Options()
    options.log_errors = False  # said once, as a ProtectError
    options.max_mem = MAX_PATTERN_MEMORY
    options.dot_nl = True  # as the syntaxes read (re.S)
    joined = "|".join(f"(?P<user{k}>{_unicode_classes(p)})" for k, p in enumerate(patterns))
    return re2.compile(joined, options)


MAX_PATTERN_MEMORY = 32 * 2**20
"""The most memory RE2 may build the user's patterns into (a pattern over it is refused)."""
EMPTY_PROBES = ("", "a", " ", "\n", "a b", "a\nb", "1", "_", "-", "%s", "é")
"""Strings on which a pattern that can match nothing is seen to (`x*`, `$`, `\\b`, `(a|)`)."""


@dataclass(frozen=True)
class Protection:
    """What to protect in strings: `syntaxes` (names in `SYNTAXES`), extra `patterns` (regular
    expressions, `--protect`, run by RE2), and a keyboard `accelerator` marker (one of
    `ACCELERATORS`)."""

    syntaxes: frozenset[str] = DEFAULT
    patterns: tuple[str, ...] = ()
    accelerator: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.syntaxes) - set(SYNTAXES))
        if unknown:
            raise ProtectError(f"unknown syntax {unknown[0]}: choose from {', '.join(SYNTAXES)}")
        for pattern in self.patterns:
            _check_pattern(pattern)
        if self.patterns:
            import re2

            try:
                self.user_finder()
            except re2.error as error:  # each is within RE2's memory, not all of them
                raise ProtectError(
                    f"Protection.patterns: the patterns together: {_said(error)}"
                ) from None

    @functools.cached_property
    def finder(self) -> re.Pattern:
        """One pattern of every syntax (a group each, by name)."""
        return _finder(tuple(s for s in SYNTAXES if s in self.syntaxes))

    def user_finder(self) -> Any:
        """The user's patterns (RE2), None for none."""
        return _user_finder(self.patterns) if self.patterns else None


@functools.lru_cache(maxsize=256)
def _check_pattern(pattern: str) -> None:
    """A ProtectError for a pattern that is not a regular expression in both Python's syntax and
    RE2's (no backreferences or lookaround: they are what can take exponential time), or that
    can match the empty string (it would find a span at every character)."""
    import re2

    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as error:
        raise ProtectError(
            f"Protection.patterns {pattern!r}: not a regular expression ({error})"
        ) from None
    try:
        compiled = _user_finder((pattern,))
    except re2.error as error:
        raise ProtectError(
            f"Protection.patterns {pattern!r}: {_said(error)} (vaswani runs patterns with RE2, in time "
            "linear in the text: it has no backreferences or lookaround)"
        ) from None
    for probe in EMPTY_PROBES:
        for match in compiled.finditer(probe):
            if match.start() == match.end():
                raise ProtectError(
                    f"Protection.patterns {pattern!r}: matches the empty string (in {probe!r}), so it would "
                    "protect nothing at every character; make it match at least one"
                )


def _said(error: Exception) -> str:
    """What an RE2 error says (its message comes as bytes)."""
    message = error.args[0] if error.args else error
    return message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)


NONE = Protection(frozenset())
"""Nothing protected: every character goes to the model."""


@dataclass(frozen=True)
class Span:
    """A piece of code in the original string: characters `start` .. `end`, its text, whether
    its place in the order of its kind is fixed (`ordered`)."""

    start: int
    end: int
    text: str
    syntax: str
    ordered: bool = False
    partner: int | None = None
    """Where the span that closes this one starts (an ICU message's `}`)."""


def spans(text: str, protection: Protection) -> list[Span]:
    """The spans of `text` in `protection`'s syntaxes, in order, none empty."""
    found = icu_spans(text) if "icu" in protection.syntaxes else []
    taken = [(s.start, s.end) for s in found]
    finder, at = protection.finder, 0
    users = _user_matches(text, protection)
    while (match := _first(finder.search(text, at), users, at)) is not None:
        if match.end() == match.start() or _inside(taken, match.start(), match.end()):
            at = match.start() + 1  # what begins inside an ICU message's syntax may start after
            continue
        syntax = match.lastgroup.replace("_", "-") if isinstance(match, re.Match) else "user"
        if syntax == "identifier" and _accelerated(match.group(), protection.accelerator):
            at = match.end()  # `Or_dering`: a word with its keyboard accelerator
            continue
        ordered = syntax in ORDERED and _unnamed(match.group())
        found.append(Span(match.start(), match.end(), match.group(), syntax, ordered))
        at = match.end()
    return sorted(found, key=lambda s: s.start) if taken else found


def _accelerated(word: str, marker: str | None) -> bool:
    """Whether an identifier is rather a word with its accelerator `marker` in it (one `_`)."""
    return marker is not None and word.count(marker) == 1 and "." not in word


def _user_matches(text: str, protection: Protection) -> deque:
    """The user's patterns' matches in `text`, left to right (one RE2 pass: linear time); one
    that is empty is a ProtectError (a pattern the probes did not catch, `a|\\b`)."""
    user = protection.user_finder()
    if user is None:
        return deque()
    found = deque(user.finditer(text))
    for match in found:
        if match.start() == match.end():
            pattern = next(p for k, p in enumerate(protection.patterns) if match.group(f"user{k}"))
            raise ProtectError(
                f"Protection.patterns {pattern!r}: matches the empty string in {text[:60]!r}"
            )
    return found


def _first(builtin: re.Match | None, users: deque, at: int) -> Any:
    """The match that starts first of `builtin` and the user's next one from `at` (`users`,
    the ones before it dropped); the user's where both start at one place."""
    while users and users[0].start() < at:
        users.popleft()
    if users and (builtin is None or users[0].start() <= builtin.start()):
        return users[0]
    return builtin


def _inside(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether start .. end overlaps one of `taken` (sorted, not overlapping)."""
    k = bisect.bisect_right(taken, (start, float("inf"))) - 1
    before = k >= 0 and taken[k][1] > start
    after = k + 1 < len(taken) and taken[k + 1][0] < end
    return before or after


ICU_MESSAGE = re.compile(r"\{\s*[\w.]+\s*,\s*(plural|selectordinal|select)\s*,(?:\s*offset:\d+)?")
"""The head of an ICU plural, selectordinal or select message (its kind: group 1)."""
ICU_ARM = re.compile(r"(\s*)(=\d+|[\w-]+)\s*\{")
"""An ICU message's arm up to its opening brace: the spaces before it, its selector."""
MAX_ICU_DEPTH = 20
"""The deepest ICU messages are read nested (real ones nest two or three)."""


def icu_spans(text: str) -> list[Span]:
    """The syntax of ICU MessageFormat's plural and select messages (`{count, plural, one {# file}
    other {# files}}`): each message's head and `}`, each arm's `one {` and `}` (pairs, so
    that the arms' words are translated inside them), and `#` in a plural's arms. A message whose
    braces do not balance, or nested over MAX_ICU_DEPTH, is left as text."""
    if "{" not in text:
        return []
    closing, stack = {}, []
    for k, char in enumerate(text):  # every brace's partner, once: linear time
        if char == "{":
            stack.append(k)
        elif char == "}" and stack:
            closing[stack.pop()] = k
    found: list[Span] = []
    depth: list[int] = []  # the ends of the messages around the place read
    for head in ICU_MESSAGE.finditer(text):
        end = closing.get(head.start())
        while depth and depth[-1] < head.start():
            depth.pop()
        if end is None or len(depth) >= MAX_ICU_DEPTH:
            continue
        arms, at = [], head.end()
        while (arm := ICU_ARM.match(text, at)) is not None and arm.end() - 1 in closing:
            arms.append((arm.end(1), arm.end(), closing[arm.end() - 1]))  # spaces are text
            at = closing[arm.end() - 1] + 1
        if not arms or not re.fullmatch(r"\s*", text[at:end]):
            continue
        depth.append(end)
        found.append(Span(head.start(), head.end(), head.group(), "icu", partner=end))
        for start, opened, closed in arms:
            found.append(Span(start, opened, text[start:opened], "icu", partner=closed))
            if head.group(1) != "select":  # a plural's number, wherever it is in the arm
                found += [
                    Span(k, k + 1, "#", "icu") for k in range(opened, closed) if text[k] == "#"
                ]
            found.append(Span(closed, closed + 1, "}", "icu"))
        found.append(Span(end, end + 1, "}", "icu"))
    unique = {span.start: span for span in reversed(found)}  # a nested plural's # once
    return sorted(unique.values(), key=lambda s: s.start)


def _unnamed(span: str) -> bool:
    return span != "%%" and "$" not in span and "(" not in span


def accelerator_at(text: str, marker: str, found: list[Span] = ()) -> int:
    """Where the one accelerator `marker` of `text` outside its spans is (-1: none, more than
    one, or one before no letter; `&amp;` is not one)."""
    inside = [(s.start, s.end) for s in found]
    at = [
        m.start()
        for m in re.finditer(re.escape(marker), text)
        if not _inside(inside, m.start(), m.end())
    ]
    if len(at) != 1 or at[0] + 1 >= len(text) or not text[at[0] + 1].isalnum():
        return -1
    return at[0]


def without_code(text: str, protection: Protection) -> str:
    """`text` without the spans `protection` finds in it, a space where one parted them from
    the words on both sides: what a model's answer is cleaned of, since the text it was given
    had none (a small model trained on catalogs adds a `%s` to many a long sentence)."""
    found = spans(text, protection)
    if not found:
        return text
    ends = [0] + [span.end for span in found]
    between = [text[end : span.start] for span, end in zip(found, ends, strict=False)]
    out = ""
    for piece in [*between, text[ends[-1] :]]:
        if out.endswith((" ", "\t")) and piece[:1] in (" ", "\t"):
            piece = piece[1:]
        out += piece
    return out.strip(" ")


def check(source: str, result: str, protection: Protection, found: list[Span]) -> str | None:
    """The first check `result` fails as a translation of `source`, whose spans are `found`
    (None: it passes): the same spans (`placeholders`; in order where order matters; none with
    an ASCII letter against it that had none in the source), as many
    `%` and braces as where those syntaxes are read (a `%q` that no syntax names is still not
    written), the accelerator marker once (`accelerator`), as many line breaks (`newlines`)."""
    if source.strip() and not result.strip():
        return "empty"  # never written where the source says something
    mine = spans(result, protection)
    if sorted(s.text for s in mine) != sorted(s.text for s in found):
        return "placeholders"
    if [s.text for s in mine if s.ordered] != [s.text for s in found if s.ordered]:
        return "placeholder order"
    if {s.text for s in mine if _glued(result, s)} - {s.text for s in found if _glued(source, s)}:
        return "placeholder glued"  # `%{reason}s`: a letter joined to code, changing it
    counted = "%" * bool(protection.syntaxes & PERCENT) + "{}" * bool(protection.syntaxes & BRACES)
    if any(result.count(char) != source.count(char) for char in counted):
        return "placeholders"
    marker = protection.accelerator
    if marker is not None and accelerator_at(source, marker, found) >= 0:
        marked = re.compile(re.escape(marker) + r"\w")
        if len(marked.findall(result)) != len(marked.findall(source)):
            return "accelerator"
    if result.count("\n") != source.count("\n"):
        return "newlines"
    if result.startswith("\n") != source.startswith("\n"):
        return "newlines"  # msgfmt: msgid and msgstr begin, and end, with a newline or not
    if result.endswith("\n") != source.endswith("\n"):
        return "newlines"
    return None


def _glued(text: str, span: Span) -> bool:
    """Whether an ASCII letter touches `span` in `text`, where that makes it other code (a
    letter beside a tag or an escape does not; scripts written without spaces touch code as a
    matter of course)."""
    if span.syntax in UNGLUED:
        return False
    around = text[span.start - 1 : span.start] if span.start else ""
    around += text[span.end : span.end + 1]
    return any(c.isascii() and c.isalpha() for c in around)


UNGLUED = frozenset({"markup", "tags", "metavar", "icu", "template", "code", "escapes"})
"""Syntaxes whose spans a letter may touch without changing them (`<b>word</b>`, `\\nNext`)."""
PERCENT = frozenset({"printf", "printf-prose", "python", "qt", "strftime"})
BRACES = frozenset({"brace", "icu"})
"""The syntaxes in which a lone `%` or brace the model made up would be read as code."""
