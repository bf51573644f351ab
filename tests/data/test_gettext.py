"""The gettext readers: MO pairs, contexts, plural forms, skipped entries and damaged files; PO
read once, by polib behind the checks, for corpora and documents alike."""

import struct
from collections import Counter
from pathlib import Path

import pytest

from vaswani.data.corpora import DataError
from vaswani.data.readers.gettext import catalogs, read_mo

LIBREOFFICE_DE = Path("/usr/lib/libreoffice/program/resource/de")


def write_mo(path: Path, entries: dict[str, str], charset: str = "UTF-8") -> Path:
    """An MO file as msgfmt lays it out: header, the two tables, then the strings."""
    entries = {"": f"Content-Type: text/plain; charset={charset}\n", **entries}
    keys = sorted(entries)
    ids = [k.encode(charset) for k in keys]
    strs = [entries[k].encode(charset) for k in keys]
    start = 28 + 16 * len(keys)
    blob, id_table, str_table = b"", [], []
    for table, values in ((id_table, ids), (str_table, strs)):
        for value in values:
            table.append((len(value), start + len(blob)))
            blob += value + b"\x00"
    header = struct.pack("<7I", 0x950412DE, 0, len(keys), 28, 28 + 8 * len(keys), 0, 0)
    tables = b"".join(struct.pack("<2I", *e) for e in id_table + str_table)
    path.write_bytes(header + tables + blob)
    return path


def test_pairs_contexts_and_plurals(tmp_path):
    mo = write_mo(
        tmp_path / "a.mo",
        {
            "Open": "Öffnen",
            "menu\x04Save": "Speichern",
            "%d file\x00%d files": "%d Datei\x00%d Dateien",
            "Untranslated": "",
        },
    )
    dropped = Counter()
    pairs = sorted(read_mo(mo, dropped))
    assert pairs == [
        ("%d file", "%d Datei"),
        ("%d files", "%d Dateien"),
        ("Open", "Öffnen"),
        ("Save", "Speichern"),
    ]
    assert dropped == {"untranslated": 1}


def test_a_latin1_catalog_is_decoded_by_its_declared_charset(tmp_path):
    mo = write_mo(tmp_path / "l.mo", {"Size": "Größe"}, charset="ISO-8859-1")
    assert list(read_mo(mo, Counter())) == [("Size", "Größe")]


def test_damaged_catalogs_name_the_file_and_offset(tmp_path):
    mo = write_mo(tmp_path / "t.mo", {"Open": "Öffnen", "Close": "Schließen"})
    truncated = tmp_path / "cut.mo"
    truncated.write_bytes(mo.read_bytes()[:-12])
    with pytest.raises(DataError, match=r"cut.mo: truncated MO catalog: entry \d+ points to bytes"):
        list(read_mo(truncated, Counter()))
    (tmp_path / "x.mo").write_bytes(b"not a catalog at all, just text")
    with pytest.raises(DataError, match="x.mo: not an MO catalog"):
        list(read_mo(tmp_path / "x.mo", Counter()))
    wrong = write_mo(tmp_path / "w.mo", {"Size": "Größe"}, charset="UTF-8")
    wrong.write_bytes(wrong.read_bytes().replace(b"charset=UTF-8", b"charset=ASCII"))
    with pytest.raises(DataError, match=r"w.mo: entry at byte offset \d+ is not valid ASCII"):
        list(read_mo(wrong, Counter()))


@pytest.mark.skipif(not LIBREOFFICE_DE.is_dir(), reason="libreoffice-l10n-de is not installed")
def test_reads_the_libreoffice_german_catalogs():
    dropped = Counter()
    pairs = [pair for path in catalogs(LIBREOFFICE_DE, ".mo") for pair in read_mo(path, dropped)]
    assert len(pairs) > 20_000
    assert all(source and target and "\x04" not in source for source, target in pairs)


def test_a_directory_of_catalogs_is_read_by_their_kind(tmp_path):
    from vaswani.data.readers import ReadOptions, open_corpora

    write_mo(tmp_path / "a.mo", {"Open": "Öffnen"})
    (tmp_path / "sub").mkdir()
    write_mo(tmp_path / "sub" / "b.mo", {"Close": "Schließen"})
    corpora = open_corpora([tmp_path], ReadOptions())
    assert sorted(pair for corpus in corpora for pair in corpus.pairs) == [
        ("Close", "Schließen"),
        ("Open", "Öffnen"),
    ]
    (tmp_path / "c.po").write_text('msgid "Save"\nmsgstr "Speichern"\n')
    with pytest.raises(DataError, match="holds .po and .mo catalogs"):
        open_corpora([tmp_path], ReadOptions())


ESCAPED_PO = (
    'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
    '#: shell.c:1\nmsgid "\\atimed out\\v \\x41\\101 \\\\a \\"q\\""\nmsgstr "\\aZeit\\v AA \\\\a \\"q\\""\n'
)


def test_a_catalog_means_the_same_to_a_corpus_and_to_a_document(tmp_path):
    from vaswani.data.readers.gettext import read_po
    from vaswani.documents.formats import DocumentOptions, read_document

    (tmp_path / "x.po").write_text(ESCAPED_PO)
    [(source, target)] = [tuple(p) for p in read_po(tmp_path / "x.po", Counter())]
    assert source == '\atimed out\v AA \\a "q"' and target == '\aZeit\v AA \\a "q"'
    document = read_document(ESCAPED_PO.encode(), "po", "x.po", DocumentOptions(overwrite=True))
    assert document.texts() == [source]
    written = document.rebuild(["\aneu"], [None], "de")
    assert b"\\\\atimed" not in written and b'msgstr "\\aneu"' in written  # \a, not \\a
    (tmp_path / "y.po").write_bytes(written.replace(b"#, fuzzy\n", b""))
    assert [tuple(p) for p in read_po(tmp_path / "y.po", Counter())] == [(source, "\aneu")]


def test_a_line_break_polib_would_split_at_is_refused_by_line(tmp_path):
    from vaswani.data.readers.gettext import read_po

    (tmp_path / "x.po").write_text('msgid "a"\nmsgstr "b\u2028c"\n')
    with pytest.raises(DataError, match=r"x.po:2: U\+2028 inside a string"):
        list(read_po(tmp_path / "x.po", Counter()))
