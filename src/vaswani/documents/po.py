"""Gettext catalogs (.po, .pot), read and written with polib: msgctxt, msgid, comments and flags
kept; each empty msgstr filled with the translation of its msgid (plural forms: msgstr[0] from
msgid, the others from msgid_plural); the entries filled marked `fuzzy`, so that translators
review them, unless fuzzy is off; translations already there kept unless overwrite is on.
The header (msgid "") and obsolete entries are not translated; an empty Language in the header
is set to the target language.
"""

from __future__ import annotations

from dataclasses import dataclass

from vaswani.data.corpora import DataError
from vaswani.data.formats.gettext import read_catalog
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
        text = str(self.catalog).translate(C_ESCAPES)
        return (text if text.endswith("\n") else text + "\n").encode("utf-8")


def read_po(data: bytes, name: str, options: DocumentOptions) -> Catalog:
    """A catalog by the one PO reader (`vaswani.data.formats.gettext.read_catalog`): its lines
    checked, its strings decoded as gettext means them."""
    lines = decoded(data, name).splitlines()
    numbered = ((f"{name}:{number}", line) for number, line in enumerate(lines, 1))
    try:
        catalog = read_catalog(numbered, name, options.max_unit_bytes)
    except DataError as error:
        raise DocumentError(str(error)) from None
    return Catalog(catalog, options)


C_ESCAPES = {0x07: "\\a"} | {
    code: f"\\{code:03o}" for code in [*range(0x00, 0x07), *range(0x0E, 0x20), 0x7F]
}
"""The control characters polib writes as they are, in C's escapes (msgfmt reads both; a
catalog's `\\a` stays `\\a`)."""
