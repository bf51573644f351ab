"""Gettext catalogs (.po, .pot), read and written with polib: msgctxt, msgid, comments and flags
kept; each empty msgstr filled with the translation of its msgid; the entries filled marked
`fuzzy`, so that translators review them, unless fuzzy is off; translations already there kept
unless overwrite is on. The header (msgid "") and obsolete entries are not translated.

What a catalog's tools check is kept by construction: the code in each msgid (its flags say
which: `c-format`, `python-format`, `qt-format`...; `vaswani.documents.protect`) and the
catalog's keyboard accelerator marker (`_`, `&` or `~`, found among its msgids) are protected; a
plural entry gets as many forms as the target language has (GNU gettext's rules, as msginit
writes them, else CLDR's; unless the header's own Plural-Forms, of the target language, says
otherwise), msgstr[0] from msgid and the others from msgid_plural (a language of one form: from
msgid_plural); the header's Language, Plural-Forms and charset are set where a template leaves
them open, and Language and Plural-Forms where the catalog was written for another language. An entry any of whose translations failed a
check is left untranslated, whole. The file is written back as it was read, line for line, but for
the flags and msgstr lines of the entries filled (and the header's msgstr where it changed):
references, comments and the msgids' own wrapping stay, so that a reviewer's diff is the
translation (`spliced`; a file whose entries are not separated by blank lines is written whole
by polib).
"""

from __future__ import annotations

import gettext
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from vaswani.data.corpora import DataError
from vaswani.data.readers.gettext import read_catalog
from vaswani.documents.formats import Document, DocumentError, DocumentOptions, decoded
from vaswani.documents.markup import Alignment
from vaswani.documents.spans import ACCELERATORS, DEFAULT, Protection
from vaswani.languages import language_matches

FLAG_SYNTAXES = {
    "c-format": {"printf"},
    "objc-format": {"printf"},
    "php-format": {"printf"},
    "python-format": {"python"},
    "python-brace-format": {"brace"},
    "qt-format": {"qt"},
    "kde-format": {"qt"},
    "qt-plural-format": {"qt"},
    "sh-format": {"shell"},
    "perl-format": {"printf", "shell"},
    "boost-format": {"qt", "printf"},
}
"""The syntaxes each gettext format flag adds to `DEFAULT`."""
_TEMPLATE = re.compile(r"INTEGER|EXPRESSION|CHARSET")


@dataclass
class Catalog(Document):
    catalog: object  # polib.POFile
    options: DocumentOptions
    original: str = ""
    """The file as read: written back line for line but for what translation changes."""
    markup = False

    def todo(self) -> list[tuple[object, str]]:
        """(entry, field) to fill, in order: "msgstr"; a plural entry's "singular" and
        "plural" (msgid and msgid_plural, translated once each)."""
        found = []
        for entry in self.catalog:
            if entry.obsolete or not entry.msgid:
                continue
            if entry.msgid_plural:
                if self.options.overwrite or not any(entry.msgstr_plural.values()):
                    found += [(entry, "singular"), (entry, "plural")]
            elif self.options.overwrite or not entry.msgstr:
                found.append((entry, "msgstr"))
        return found

    def texts(self) -> list[str]:
        return [entry.msgid_plural if f == "plural" else entry.msgid for entry, f in self.todo()]

    def protections(self) -> list[Protection | None]:
        """Each text's code: the default's, what its entry's format flags add (`no-c-format`
        takes printf away), the catalog's accelerator."""
        marker = accelerator_of([entry.msgid for entry in self.catalog if entry.msgid])
        found = []
        for entry, _ in self.todo():
            syntaxes = set(DEFAULT)
            for flag in entry.flags:
                syntaxes |= FLAG_SYNTAXES.get(flag, set())
                if flag.startswith("no-") and flag.endswith("-format"):
                    syntaxes -= FLAG_SYNTAXES.get(flag[3:], set()) | {"printf-prose"}
            found.append(Protection(frozenset(syntaxes), accelerator=marker))
        return found

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        metadata = self.catalog.metadata
        before = dict(metadata)
        stated = metadata.get("Language") or None
        language = language or stated
        other = (
            stated is not None and language is not None and not language_matches(stated, language)
        )
        if language and (stated is None or other):  # a catalog of another language (Django's
            metadata["Language"] = language  # `en` ones): its Plural-Forms are that language's
        forms = self.plural_forms(language, keep=not other)
        done: dict[int, tuple[object, dict[str, str | None]]] = {}  # an entry's texts, by field
        for (entry, field), translation in zip(self.todo(), translations, strict=True):
            done.setdefault(id(entry), (entry, {}))[1][field] = translation
        changed = set()
        for entry, mine in done.values():
            if None in mine.values():  # failed a check: left for a translator, whole
                continue
            if "msgstr" in mine:
                entry.msgstr = mine["msgstr"]
            else:
                one = [mine["plural"]] if forms == 1 else [mine["singular"]]
                entry.msgstr_plural = dict(enumerate(one + [mine["plural"]] * (forms - 1)))
            if self.options.fuzzy and "fuzzy" not in entry.flags:
                entry.flags.insert(0, "fuzzy")  # first, as gettext's tools write it
            changed.add(id(entry))
        text = spliced(self.original, self.catalog, changed, metadata != before)
        text = text if text is not None else str(self.catalog).translate(C_ESCAPES)
        return (text if text.endswith("\n") else text + "\n").encode("utf-8")

    def plural_forms(self, language: str | None, keep: bool = True) -> int:
        """How many plural forms the catalog's entries take: its header's (where it is the
        target language's: `keep`), else the language's (`plural_rule`, written into the
        header), else 2. The charset becomes UTF-8, in which the catalog is written."""
        metadata = self.catalog.metadata
        content = metadata.get("Content-Type", "")
        if "charset=" in content and not re.search(r"charset=utf-?8\b", content, re.I):
            metadata["Content-Type"] = "text/plain; charset=UTF-8"
        header = metadata.get("Plural-Forms", "")
        stated = re.search(r"nplurals\s*=\s*(\d+)", header)
        if stated and not _TEMPLATE.search(header) and keep:
            return max(int(stated.group(1)), 1)
        rule = plural_rule(language) if language else None
        if rule is None:
            if header:  # a template's placeholder, with no language to fill it: one msgfmt reads
                metadata["Plural-Forms"] = "nplurals=2; plural=(n != 1);"
            return 2
        metadata["Plural-Forms"] = rule[1]
        return rule[0]


_ONE = "nplurals=1; plural=0;"
_NOT_ONE = "nplurals=2; plural=(n != 1);"
_OVER_ONE = "nplurals=2; plural=(n > 1);"
_SLAVIC = (
    "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || "
    "n%100>=20) ? 1 : 2);"
)
_CZECH = "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;"
GETTEXT_PLURALS = {
    **dict.fromkeys(("ja", "ko", "vi", "zh", "th"), _ONE),
    **dict.fromkeys(
        ("en", "de", "nl", "sv", "da", "no", "nb", "nn", "fo", "es", "pt", "it", "bg", "el"),
        _NOT_ONE,
    ),
    **dict.fromkeys(("fi", "et", "he", "id", "eo", "hu", "tr"), _NOT_ONE),
    **dict.fromkeys(("fr", "pt_BR"), _OVER_ONE),
    **dict.fromkeys(("ru", "uk", "be", "sr", "hr", "bs"), _SLAVIC),
    **dict.fromkeys(("cs", "sk"), _CZECH),
    "lv": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n != 0 ? 1 : 2);",
    "ga": "nplurals=3; plural=n==1 ? 0 : n==2 ? 1 : 2;",
    "ro": "nplurals=3; plural=n==1 ? 0 : (n==0 || (n%100 > 0 && n%100 < 20)) ? 1 : 2;",
    "lt": (
        "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && (n%100<10 || n%100>=20) ? 1 "
        ": 2);"
    ),
    "pl": "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "sl": "nplurals=4; plural=(n%100==1 ? 0 : n%100==2 ? 1 : n%100==3 || n%100==4 ? 2 : 3);",
}
"""The Plural-Forms GNU gettext's msginit writes (the gettext manual's table of plural forms),
which translators of PO and Qt files use: Spanish and French have 2 forms there, where CLDR
gives them a third ("many", for a million)."""


def plural_rule(language: str) -> tuple[int, str] | None:
    """A language's plural forms as gettext writes them (`GETTEXT_PLURALS`), else by CLDR:
    their number and the Plural-Forms header (`nplurals=3; plural=...;`); None for a language
    neither knows."""
    from babel import Locale
    from babel.core import UnknownLocaleError
    from babel.messages.plurals import get_plural
    from babel.plural import PluralRule, to_gettext

    code = re.sub(r"-", "_", language.strip())
    base, _, region = code.split("@")[0].partition("_")
    known = GETTEXT_PLURALS.get(f"{base.lower()}_{region.upper()}") or GETTEXT_PLURALS.get(
        base.lower()
    )
    if known is not None:
        return int(re.search(r"nplurals=(\d+)", known).group(1)), known
    try:
        rules = Locale.parse(code).plural_form.rules
        rule = get_plural(code)
    except (UnknownLocaleError, ValueError, TypeError):
        return None
    # CLDR's forms for numbers written with an exponent ("1e6", operand e): gettext's n has none
    exponent = {k: v for k, v in rules.items() if not re.search(r"\be\b", v)}
    if exponent != rules:
        counted = to_gettext(PluralRule(exponent))
        return int(re.search(r"nplurals=(\d+)", counted).group(1)), counted
    return rule.num_plurals, str(rule)


def accelerator_of(msgids: list[str]) -> str | None:
    """The catalog's keyboard accelerator marker: the one of `ACCELERATORS` that most msgids
    use before a letter at the start of a word, once (`_Open`, `Save _As`), if two or more do."""
    counts = Counter(
        marker
        for msgid in msgids
        for marker in ACCELERATORS
        if msgid.count(marker) == 1 and re.search(rf"(?:^|\s){re.escape(marker)}\w", msgid)
    )
    if not counts:
        return None
    marker, count = counts.most_common(1)[0]
    return marker if count >= 2 else None


def read_po(data: bytes, name: str, options: DocumentOptions) -> Catalog:
    """A catalog by the one PO reader (`vaswani.data.readers.gettext.read_catalog`): its lines
    checked, its strings decoded as gettext means them."""
    lines = decoded(data, name).splitlines()
    numbered = ((f"{name}:{number}", line) for number, line in enumerate(lines, 1))
    try:
        catalog = read_catalog(numbered, name, options.max_unit_bytes)
    except DataError as error:
        raise DocumentError(str(error)) from None
    check_plurals(catalog, name)
    return Catalog(catalog, options, decoded(data, name))


_KEYWORD = re.compile(r"(?:#~\s*)?(msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s")


def spliced(original: str, catalog: Any, changed: set[int], header: bool) -> str | None:
    """`original` with only the flags and msgstr lines of the `changed` entries (by id) written
    anew, and the header's msgstr where its metadata `header` changed: references, comments,
    msgids and their wrapping stay line for line, so that a reviewer's diff is the translation.
    None where the file's blank-line-separated blocks do not line up one to one with the
    catalog's entries (polib then writes the whole catalog)."""
    lines = original.splitlines(keepends=True)
    spans, start = [], None  # each block of lines between blank lines: [start, end)
    for k, line in enumerate([*lines, "\n"]):
        if line.strip() and start is None:
            start = k
        elif not line.strip() and start is not None:
            spans.append((start, k))
            start = None
    blocks = [(a, b) for a, b in spans if any(_KEYWORD.match(line) for line in lines[a:b])]
    entries = list(catalog)
    has_header = bool(blocks) and _is_header(lines[slice(*blocks[0])])
    if not original or len(blocks) != len(entries) + has_header:
        return None
    owners = {}
    for (a, b), entry in zip(blocks[has_header:], entries, strict=True):
        keywords = [line for line in lines[a:b] if _KEYWORD.match(line)]
        if all(line.startswith("#~") for line in keywords) != bool(entry.obsolete):
            return None
        if id(entry) in changed:
            owners[a] = (b, entry.__unicode__(79))
    if has_header and header:
        owners[blocks[0][0]] = (blocks[0][1], catalog.metadata_as_entry().__unicode__(79))
    out, k = [], 0
    if not has_header and catalog.metadata:  # a header the file lacked (its Language)
        out.append(str(catalog).translate(C_ESCAPES).split("\n\n", 1)[0] + "\n\n")
    while k < len(lines):
        if k in owners:
            end, rendered = owners[k]
            out.append(_rewritten(lines[k:end], rendered))
            k = end
        else:
            out.append(lines[k])
            k += 1
    return "".join(out)


def _is_header(block: list[str]) -> bool:
    """Whether a block is a catalog's header: `msgid ""` and then its msgstr."""
    at = next((k for k, line in enumerate(block) if line.startswith("msgid ")), None)
    if at is None or block[at].strip() != 'msgid ""':
        return False
    return at + 1 < len(block) and block[at + 1].startswith("msgstr")


def _rewritten(block: list[str], rendered: str) -> str:
    """`block` with its msgstr lines (to the block's end) and its flags line from `rendered`
    (polib's writing of the entry); every other line as it was."""
    end = "\r\n" if block[0].endswith("\r\n") else "\n"
    new = rendered.translate(C_ESCAPES).splitlines()
    at = next(k for k, line in enumerate(new) if line.startswith("msgstr"))
    first = next(k for k, line in enumerate(block) if line.startswith("msgstr"))
    kept = [line for line in block[:first] if not line.startswith("#,")]
    flags = [line for line in new[:at] if line.startswith("#,")]
    if flags:  # after the comments and references, before `#|` and the msgids
        place = next(
            (k for k, line in enumerate(kept) if not line.startswith(("# ", "#.", "#:", "#\n"))),
            len(kept),
        )
        kept.insert(place, flags[0] + end)
    return "".join(kept) + "".join(line + end for line in new[at:])


def check_plurals(catalog: Any, name: str) -> None:
    """A DocumentError where msgfmt would refuse the catalog's plurals: a Plural-Forms header
    that states over MAX_PLURALS forms or whose expression is not C, an entry with msgstr[n]
    and no msgid_plural, or msgid_plural and no msgstr[n]."""
    odd = [
        k for k in catalog.metadata if k.lower().startswith("plural-forms") and k != "Plural-Forms"
    ]
    if odd:  # msgfmt reads such a line as the Plural-Forms, and its value as the expression
        raise DocumentError(f"{name}: a header line {odd[0][:60]!r} that is no 'Plural-Forms: '")
    header = catalog.metadata.get("Plural-Forms", "")
    stated = re.search(r"nplurals\s*=\s*(\d+)", header)
    if stated and int(stated.group(1).lstrip("0")[:6] or 0) > MAX_PLURALS:
        raise DocumentError(
            f"{name}: its Plural-Forms says nplurals={stated.group(1)[:30]}; no language has "
            f"over {MAX_PLURALS} plural forms (Arabic has 6): correct the header"
        )
    rule = re.search(r"plural\s*=\s*([^;]*)", header)
    template = _TEMPLATE.search(header)  # `nplurals=INTEGER; plural=EXPRESSION;`: filled later
    if header and not template and (not stated or not rule):
        raise DocumentError(f"{name}: its Plural-Forms {header[:60]!r} names no nplurals/plural")
    if rule and not template:
        try:
            gettext.c2py(rule.group(1).strip()[:1000])
        except (ValueError, SyntaxError, RecursionError):
            raise DocumentError(
                f"{name}: its Plural-Forms expression {rule.group(1)[:60]!r} is not one gettext "
                "reads"
            ) from None
    for entry in catalog:
        plural, forms = bool(entry.msgid_plural), bool(entry.msgstr_plural)
        if plural != forms:
            what = "msgid_plural without msgstr[n]" if plural else "msgstr[n] without msgid_plural"
            raise DocumentError(f"{name}:{entry.linenum}: {what}")


MAX_PLURALS = 12
"""The most plural forms a catalog's header may state (CLDR's and gettext's most are 6)."""


C_ESCAPES = {0x07: "\\a"} | {
    code: f"\\{code:03o}" for code in [*range(0x00, 0x07), *range(0x0E, 0x20), 0x7F]
}
"""The control characters polib writes as they are, in C's escapes (msgfmt reads both; a
catalog's `\\a` stays `\\a`)."""
