"""One record per format (`vaswani.documents.formats.REGISTRY`): detection, the readers,
`--format`'s choices, the file API's list, the project tree's naming and partial catalogs all
come from it, so that a new format is its reader's module and one `register` line."""

import argparse
from dataclasses import dataclass
from pathlib import Path, PurePath

import pytest

from helpers import Mirror
from vaswani.documents import formats
from vaswani.documents.formats import (
    Document,
    Format,
    available,
    format_of,
    read_document,
    translate_documents,
)
from vaswani.documents.projects import mirrored
from vaswani.translation.files import document_translator


@dataclass
class Lines(Document):
    """A toy format: `key: text` lines, the texts translated, the keys kept."""

    pairs: list[tuple[str, str]]
    markup = False

    def texts(self) -> list[str]:
        return [text for _, text in self.pairs]

    def rebuild(self, translations, alignments, language):
        lines = zip(self.pairs, translations, strict=True)
        return "".join(f"{key}: {text}\n" for (key, _), text in lines).encode()


def read_lines(data: bytes, name: str, options) -> Lines:
    return Lines([tuple(line.split(": ", 1)) for line in data.decode().splitlines()])


@pytest.fixture
def toy():
    tables = [formats.REGISTRY, formats.READERS, formats.FORMATS]
    kept = [dict(table) for table in tables]
    yield formats.register(Format("toy", (".toy",), read_lines, partial=True, suffix="_"))
    for table, before in zip(tables, kept, strict=True):  # the tables as they were
        table.clear()
        table.update(before)


def test_a_format_is_one_record_and_everything_follows_from_it(toy):
    assert format_of(Path("menu.toy")) == "toy" and available()[".toy"] == "toy"
    document = read_document(b"open: Open the file\nquit: Quit now\n", "toy", "menu.toy")
    assert document.partial  # from the record
    out = translate_documents([document], document_translator(Mirror()), "es")[0]
    assert out == b"open: FILE THE OPEN\nquit: NOW QUIT\n"
    # a project's tree names its files by the record's suffix
    assert mirrored(PurePath("i18n/menu.toy"), "toy", "en", "pt-BR") == PurePath(
        "i18n/menu_pt_BR.toy"
    )


def test_the_command_lines_choices_and_the_records_agree(toy):
    from vaswani.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    translate = commands.choices["translate"]
    choices = next(a.choices for a in translate._actions if "--format" in a.option_strings)
    assert set(choices) == set(formats.REGISTRY) and "toy" in choices
    assert {f.name for f in formats.REGISTRY.values() if f.partial} == {"po", "xliff", "toy"}
    assert {f.name for f in formats.REGISTRY.values() if f.binary} == {
        "docx",
        "odt",
        "pptx",
        "odp",
        "pdf",
        "epub",
    }
