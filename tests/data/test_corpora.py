import gzip
from collections import Counter
from pathlib import Path

import pytest

from vaswani.data import builtin
from vaswani.data.builtin import DING_PATH, ding_de_en, german_number, numbers_de, parse_ding_line
from vaswani.data.corpora import DataError, pair_digest, read_parallel_files, read_tsv, split_of


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "null"),
        (1, "eins"),
        (16, "sechzehn"),
        (17, "siebzehn"),
        (21, "einundzwanzig"),
        (30, "dreißig"),
        (101, "einhunderteins"),
        (347, "dreihundertsiebenundvierzig"),
        (1000, "eintausend"),
        (1001, "eintausendeins"),
        (21000, "einundzwanzigtausend"),
        (999999, "neunhundertneunundneunzigtausendneunhundertneunundneunzig"),
    ],
)
def test_german_number_words(n, words):
    assert german_number(n) == words


def test_german_numbers_are_distinct_and_range_checked():
    assert len({german_number(n) for n in range(0, 1_000_000, 37)}) == len(range(0, 1_000_000, 37))
    with pytest.raises(ValueError, match="0 .. 999999"):
        german_number(1_000_000)


def test_numbers_de_is_deterministic_and_distinct():
    first = list(numbers_de(500, seed=3))
    assert first == list(numbers_de(500, seed=3))
    assert first != list(numbers_de(500, seed=4))
    assert len({src for src, _ in first}) == 500
    assert all(german_number(int(src)) == tgt for src, tgt in first)


def test_parallel_files_plain_gzip_and_crlf(tmp_path):
    src = write(tmp_path / "a.de", b"eins zwei\r\ndrei\r\n")
    tgt = tmp_path / "a.en.gz"
    with gzip.open(tgt, "wb") as handle:
        handle.write(b"one two\nthree")  # no final newline: still two lines
    assert list(read_parallel_files(src, tgt)) == [("eins zwei", "one two"), ("drei", "three")]


def test_only_newline_ends_a_line(tmp_path):
    # \r alone, U+2028 and form feed are inside a line, not line ends.
    src = write(tmp_path / "s", "a\rb\nc\u2028d\ne\x0cf\n".encode())
    tgt = write(tmp_path / "t", b"1\n2\n3\n")
    assert [s for s, _ in read_parallel_files(src, tgt)] == ["a\rb", "c\u2028d", "e\x0cf"]


@pytest.mark.parametrize(
    ("src_data", "tgt_data", "counts"),
    [
        (b"a\nb\nc\n", b"1\n2\n", (3, 2)),
        (b"a\nb\n", b"1\n2\n3", (2, 3)),  # the missing final newline still counts a line
        (b"", b"1\n", (0, 1)),
    ],
)
def test_line_count_mismatch_names_both_files_and_counts(tmp_path, src_data, tgt_data, counts):
    src, tgt = write(tmp_path / "x.de", src_data), write(tmp_path / "x.en", tgt_data)
    message = f"line counts differ: {src} has {counts[0]} lines, {tgt} has {counts[1]}"
    with pytest.raises(DataError, match=message):
        list(read_parallel_files(src, tgt))


@pytest.mark.parametrize(
    ("bad_line", "what", "offset"),
    [
        (b"ok \xff bad", "invalid UTF-8", 9),
        (b"nul\x00here", "NUL byte", 9),
        (b"\xef\xbb\xbfbom", "byte-order mark", 6),
    ],
)
def test_bad_text_names_file_line_and_byte_offset(tmp_path, bad_line, what, offset):
    src = write(tmp_path / "s", b"first\n" + bad_line + b"\nthird\n")
    tgt = write(tmp_path / "t", b"1\n2\n3\n")
    with pytest.raises(DataError, match=rf"{src}:2: {what}.* byte offset {offset}"):
        list(read_parallel_files(src, tgt))


def test_skip_invalid_drops_both_sides_keeps_alignment_and_counts(tmp_path):
    src = write(tmp_path / "s", b"a\n\xff\nc\n\n  \ne\n")
    tgt = write(tmp_path / "t", b"1\n2\n3\n4\n5\n6\n")
    dropped = Counter()
    pairs = list(read_parallel_files(src, tgt, dropped, skip_invalid=True))
    assert pairs == [("a", "1"), ("c", "3"), ("e", "6")]
    assert dropped == {"invalid text": 1, "empty line": 2}


def test_a_line_over_the_byte_limit_is_refused(tmp_path):
    src = write(tmp_path / "s", b"short\n" + b"x" * 5000 + b"\n")
    tgt = write(tmp_path / "t", b"1\n2\n")
    with pytest.raises(DataError, match=rf"{src}:2: line longer than 1000 bytes"):
        list(read_parallel_files(src, tgt, max_line_bytes=1000))


def test_tsv_reader_and_bad_rows(tmp_path):
    good = write(tmp_path / "good.tsv", "Haus\thouse\nzwei Wörter\ttwo words\n".encode())
    assert list(read_tsv(good)) == [("Haus", "house"), ("zwei Wörter", "two words")]
    bad = write(tmp_path / "bad.tsv", b"a\tb\nno tab here\nc\td\te\n")
    with pytest.raises(DataError, match=rf"{bad}:2: expected 2 tab-separated columns .* found 1"):
        list(read_tsv(bad))
    dropped = Counter()
    assert list(read_tsv(bad, dropped, skip_invalid=True)) == [("a", "b")]
    assert dropped == {"not two columns": 2}


def test_ding_line_parsing():
    line = (
        "Aal {m} (auf der Speisekarte) [cook.] | Aal blau; blauer Aal :: "
        "Eel (on a menu) | Eel au bleu {shrove; shriven}; Eel steamed"
    )
    assert parse_ding_line(line) == [
        ("Aal (auf der Speisekarte)", "Eel (on a menu)"),
        ("Aal blau", "Eel au bleu"),
        ("Aal blau", "Eel steamed"),
        ("blauer Aal", "Eel au bleu"),
        ("blauer Aal", "Eel steamed"),
    ]
    assert parse_ding_line("# Version :: devel") == []
    assert parse_ding_line("a | b :: only one") == []  # misaligned sub-entries are skipped


def test_missing_ding_file_says_how_to_install(tmp_path, monkeypatch):
    missing = tmp_path / "de-en"
    monkeypatch.setattr(builtin, "DING_PATH", missing)  # as on a machine without the package
    with pytest.raises(DataError, match="apt-get install trans-de-en"):
        list(ding_de_en(missing))
    with pytest.raises(DataError, match="check the path given as ding_path="):
        list(ding_de_en(tmp_path / "elsewhere"))


def test_ding_de_en_from_a_small_file(tmp_path):
    path = write(
        tmp_path / "de-en",
        "# comment\nHaus {n} | Häuser {pl} :: house | houses\n"
        "das große Haus [ugs.] :: the big house\n".encode(),
    )
    dropped = Counter()
    assert list(ding_de_en(path, dropped)) == [("das große Haus", "the big house")]
    assert dropped == {"fewer than 2 words": 2}


@pytest.mark.skipif(not DING_PATH.exists(), reason="Debian package trans-de-en not installed")
def test_real_ding_dictionary_parses_cleanly():
    pairs = [p for _, p in zip(range(20000), ding_de_en(), strict=False)]
    assert len(pairs) == 20000
    for de, en in pairs:
        assert len(de.split()) >= 2 and len(en.split()) >= 2
        assert not any(c in de + en for c in "{}[]|") and "::" not in de + en


def test_split_depends_on_the_pair_alone():
    digests = [pair_digest(f"s{i}", f"t{i}") for i in range(20000)]
    splits = Counter(split_of(d, 0.1, 0.05) for d in digests)
    assert abs(splits["valid"] / 20000 - 0.1) < 0.01 and abs(splits["test"] / 20000 - 0.05) < 0.01
    assert split_of(pair_digest("a", "b"), 0.1, 0.05) == split_of(pair_digest("a", "b"), 0.1, 0.05)
    assert pair_digest("a b", "c") != pair_digest("a", "b c")
