"""Hostile corpus files (TMX, XLIFF, PO, MO, JSONL, gzip): one line naming the file and where,
nothing left in --out, memory bounded while streaming."""

import gzip
import os

import pytest

from helpers import cli

TU = '<tu><tuv xml:lang="de"><seg>{}</seg></tuv><tuv xml:lang="en"><seg>{}</seg></tuv></tu>'


def tmx(units, declaration='<?xml version="1.0" encoding="UTF-8"?>', attribute=""):
    return (
        f'{declaration}<tmx version="1.4"><header srclang="de"{attribute}/><body>'
        + "".join(TU.format(de, en) for de, en in units)
        + "</body></tmx>"
    )


def po(msgid, msgstr):
    return f'msgid "{msgid}"\nmsgstr "{msgstr}"\n'


def deep_catalogs(tmp_path):
    deep = tmp_path / "cats"
    os.makedirs(deep / "/".join(["d"] * 70))
    return deep


def big_msgid_lines(tmp_path):
    return (
        'msgid ""\n' + '"' + "x" * 99 + '"\n' * 1 + ('"' + "x" * 99 + '"\n') * 700 + 'msgstr "y"\n'
    )


HOSTILE_FILES = [
    ("long.tmx", tmx([("a" * 300_000, "b")]), "longer than"),
    ("attribute.tmx", tmx([("a", "b")], attribute=' x="' + "y" * 300_000 + '"'), "longer than"),
    ("deep.tmx", tmx([("<hi>" * 100_000 + "x" + "</hi>" * 100_000, "b")]), "nested deeper"),
    (
        "unknown.tmx",
        tmx([("a", "b")], '<?xml version="1.0" encoding="no-such-code"?>'),
        "unknown encoding 'no-such-code'",
    ),
    (
        "latin.tmx",
        tmx([("Käse", "cheese")], '<?xml version="1.0" encoding="ISO-8859-1"?>'),
        "declares the encoding iso8859-1 but its bytes are UTF-8",
    ),
    ("long.po", po("a" * 300_000, "b"), "longer than"),
    ("lines.po", "LINES", "msgid longer than"),
    ("x.po", po("a\\x", "b"), "bad escape \\x in"),
    ("nul.po", po("a", "b\\0c"), "a NUL character"),
    ("nul.jsonl", '{"src": "a", "tgt": "b\\u0000"}\n', "a NUL character"),
    ("half.jsonl", '{"src": "a", "tgt": "\\ud800"}\n', "surrogate"),
    ("digits.jsonl", '{"src": ' + "1" * 5000 + ', "tgt": "b"}\n', "not a JSON object"),
    ("zero.po", "/dev/zero", "not a regular file"),
    ("zero.mo", "/dev/zero", "not a regular file"),
    ("idna.mo", "IDNA", "not a text encoding"),
    ("cats", "DEEP", "nested deeper than 64"),
]


@pytest.mark.parametrize(("name", "content", "message"), HOSTILE_FILES)
def test_hostile_corpus_files_are_one_line(tmp_path, capsys, name, content, message):
    from data.test_gettext import write_mo

    path = tmp_path / name
    if content == "DEEP":
        path = deep_catalogs(tmp_path)
        write_mo(path / "/".join(["d"] * 70) / "x.mo", {"a": "b"})
    elif content == "IDNA":
        write_mo(path, {"a": "b"}, charset="idna")
    elif content == "LINES":
        path.write_text(big_msgid_lines(tmp_path))
    elif content.startswith("/dev/"):
        path.symlink_to(content)
    else:
        path.write_text(content, encoding="utf-8")
    args = [
        "prepare",
        str(path),
        "--out",
        str(tmp_path / "out"),
        "--tgt-lang",
        "en",
        "--max-line-bytes",
        "65536",
        *(["--format", "mo"] if name == "cats" else []),
    ]
    code, _, err = cli(capsys, *args)
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


def test_skip_invalid_drops_and_counts_nul_surrogates_and_huge_numbers(tmp_path):
    from collections import Counter

    from vaswani.data.readers import ReadOptions, read_file

    path = tmp_path / "x.jsonl"
    lines = [
        '{"src": "a", "tgt": "b\\u0000"}',
        '{"src": "\\udfff", "tgt": "b"}',
        '{"src": ' + "9" * 5000 + ', "tgt": "b"}',
        '{"src": "gut", "tgt": "good"}',
    ]
    path.write_text("\n".join(lines) + "\n")
    dropped = Counter()
    pairs = list(read_file(path, "jsonl", ReadOptions(skip_invalid=True), dropped))
    assert pairs == [("gut", "good")] and sum(dropped.values()) == 3


def test_every_format_is_read_through_gzip(tmp_path):
    from collections import Counter

    from data.test_gettext import write_mo
    from vaswani.data.readers import ReadOptions, read_file

    files = {"x.tmx": tmx([("Haus", "house")]), "x.po": po("house", "Haus")}
    for name, text in files.items():
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(text.encode()))
    write_mo(tmp_path / "m.mo", {"house": "Haus"})
    (tmp_path / "x.mo.gz").write_bytes(gzip.compress((tmp_path / "m.mo").read_bytes()))
    xlf = (
        '<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0"><file><unit id="1">'
        "<segment><source>house</source><target>Haus</target></segment></unit></file></xliff>"
    )
    (tmp_path / "x.xlf.gz").write_bytes(gzip.compress(xlf.encode()))
    opts = ReadOptions(src_lang="de", tgt_lang="en")
    for name, fmt in (
        ("x.tmx.gz", "tmx"),
        ("x.po.gz", "po"),
        ("x.mo.gz", "mo"),
        ("x.xlf.gz", "xliff"),
    ):
        found = list(read_file(tmp_path / name, fmt, opts, Counter()))
        assert found in ([("Haus", "house")], [("house", "Haus")]), (name, found)


def test_xliff_2_units_are_released_as_they_are_read(tmp_path):
    import tracemalloc
    from collections import Counter

    from vaswani.data.readers.xml import read_xliff

    unit = (
        '<unit id="u"><notes><note>' + "n" * 2000 + "</note></notes><segment><source>a"
        "</source><target>b</target></segment></unit>"
    )
    path = tmp_path / "big.xlf"
    path.write_text(
        '<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0"><file>'
        + unit * 5000
        + "</file></xliff>"
    )
    tracemalloc.start()
    count = sum(1 for _ in read_xliff(path, Counter()))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count == 5000 and peak < 3_000_000, peak  # the notes alone are 10 MB
