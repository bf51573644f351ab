"""Gettext catalogs (.po, .pot), read and written with polib: msgctxt, msgid, comments and flags
kept; each empty msgstr filled with the translation of its msgid (plural forms: msgstr[0] from
msgid, the others from msgid_plural); the entries filled marked `fuzzy`, so that translators
review them, unless fuzzy is off; translations already there kept unless overwrite is on.
The header (msgid "") and obsolete entries are not translated; an empty Language in the header
is set to the target language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vaswani.documents.formats import DocumentError, DocumentOptions, decoded
from vaswani.documents.markup import Alignment


@dataclass
class Catalog:
    catalog: object  # polib.POFile
    options: DocumentOptions
    markup = False

    def todo(self) -> list[tuple[object, str]]:
        """(entry, field) to fill, in order: "msgstr", or a plural form's index as text."""
        found = []
        for entry in self.catalog:
            if entry.obsolete or not entry.msgid:
                continue
            if entry.msgid_plural:
                forms = entry.msgstr_plural or {0: "", 1: ""}
                if self.options.overwrite or not any(forms.values()):
                    found += [(entry, str(k)) for k in sorted(forms)]
            elif self.options.overwrite or not entry.msgstr:
                found.append((entry, "msgstr"))
        return found

    def texts(self) -> list[str]:
        return [
            entry.msgid if field in ("msgstr", "0") else entry.msgid_plural
            for entry, field in self.todo()
        ]

    def rebuild(
        self, translations: list[str], alignments: list[Alignment | None], language: str | None
    ) -> bytes:
        todo = self.todo()
        for (entry, field), translation in zip(todo, translations, strict=True):
            if translation is None:  # below --min-confidence: left for a translator
                continue
            if field == "msgstr":
                entry.msgstr = translation
            else:
                forms = entry.msgstr_plural or {0: "", 1: ""}
                entry.msgstr_plural = {**forms, int(field): translation}
            if self.options.fuzzy and "fuzzy" not in entry.flags:
                entry.flags.append("fuzzy")
        if language and not self.catalog.metadata.get("Language"):
            self.catalog.metadata["Language"] = language
        text = str(self.catalog)
        return (text if text.endswith("\n") else text + "\n").encode("utf-8")


_LINE = re.compile(
    r"""(?:(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)\s+)?"(?:[^"\\]|\\[\\"'?abfnrtv]|\\[0-7]{1,3}|\\x[0-9A-Fa-f]+)*"\s*"""
)


def check_lines(text: str, name: str) -> None:
    """Every line that is not a comment is a keyword and a quoted string with C's escapes
    (polib reads some broken lines without a word)."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and not _LINE.fullmatch(stripped):
            raise DocumentError(f"{name}: line {number} is not a PO line: {stripped[:60]!r}")


def read_po(data: bytes, name: str, options: DocumentOptions) -> Catalog:
    import polib

    text = decoded(data, name)
    check_lines(text, name)
    try:
        catalog = polib.pofile(text, wrapwidth=0)
    except (OSError, ValueError, UnicodeError) as error:  # polib's syntax errors are OSErrors
        raise DocumentError(f"{name}: not a valid PO file ({error})") from None
    return Catalog(catalog, options)
