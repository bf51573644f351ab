"""One record per corpus format (`vaswani.data.readers.REGISTRY`): detection by extension,
`--format`'s choices, the reader, the error boundary and whether a directory of its files is
read all come from it, so a new corpus format is its reader and one `register` line."""

import pytest

from vaswani.data import readers
from vaswani.data.corpora import DataError
from vaswani.data.readers import CorpusFormat, ReadOptions, open_corpora, read_file


def read_arrows(path, options, dropped):
    """A toy format: `source => target` lines; a line without the arrow is skipped."""
    for line in path.read_text(encoding="utf-8").splitlines():
        source, arrow, target = line.partition(" => ")
        if arrow:
            yield source, target
        else:
            dropped["no arrow"] += 1


@pytest.fixture
def arrows():
    kept = dict(readers.REGISTRY), dict(readers.SUFFIXES)
    yield readers.register(CorpusFormat("arrows", (".arrows",), read_arrows))
    for table, before in zip((readers.REGISTRY, readers.SUFFIXES), kept, strict=True):
        table.clear()
        table.update(before)


def test_a_corpus_format_is_one_record_and_reading_follows_from_it(arrows, tmp_path):
    corpus = tmp_path / "menu.arrows"
    corpus.write_text("Open => Öffnen\nnot a pair\nQuit => Beenden\n", encoding="utf-8")
    (found,) = open_corpora([corpus], ReadOptions())  # told by its extension
    assert found.description["name"] == "arrows"
    assert list(found.pairs) == [("Open", "Öffnen"), ("Quit", "Beenden")]
    assert found.dropped == {"no arrow": 1}
    # its text goes through the readers' one check, as every format's does
    corpus.write_text("Open => Öff\x00nen\n", encoding="utf-8")
    with pytest.raises(DataError, match="pair 1: a NUL character"):
        list(read_file(corpus, "arrows", ReadOptions(), found.dropped))
    # not a directory format: a folder of its files is refused with what to give
    with pytest.raises(DataError, match="is a directory"):
        open_corpora([tmp_path], ReadOptions(format="arrows"))


def test_the_built_in_records_keep_the_formats_their_names_and_extensions():
    assert readers.FORMATS == ("tsv", "moses", "tmx", "xliff", "po", "mo", "jsonl")
    assert {readers.format_of(p) for p in ("a.tsv.gz", "b.xlf", "c.MO", "d.txt")} == {
        "tsv",
        "xliff",
        "mo",
        None,
    }
    assert [f.name for f in readers.REGISTRY.values() if f.directory] == ["po", "mo"]
