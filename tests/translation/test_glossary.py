"""Glossaries: terms found in the source, put into the translation by word alignment, read from
TSV, CSV and TBX; hostile glossaries refused or skipped with a count."""

import json
import shutil
from pathlib import Path

import pytest

from helpers import Server, cli, translate_cli
from vaswani.decoding.text import Translation
from vaswani.serve import Served, ServeSettings, create_app
from vaswani.translation.engine import load_run
from vaswani.translation.glossary import (
    Glossary,
    GlossaryError,
    contains,
    enforce,
    put_terms,
    read_glossary,
)
from vaswani.translation.request import Aids


def test_terms_are_found_as_whole_words_in_any_case_the_longest_first():
    glossary = Glossary.of([("file", "Akte"), ("file name", "Dateiname"), ("ﬁle", "x")])
    found = glossary.find("Enter a File Name, then save the file. Profile files stay.")
    assert [(m.source, m.target, m.first, m.last) for m in found] == [
        ("file name", "Dateiname", 2, 3),  # the two-word term, not "file" inside it
        ("ﬁle", "x", 7, 7),  # "ﬁ" (a ligature) is "fi" after NFKC: the later entry won
    ]
    assert glossary.skipped == {"a duplicate (the later kept)": 1}
    assert Glossary.of([("Straße", "street")]).find("STRASSE und strasse")  # case folding


def test_a_term_replaces_the_words_aligned_to_it_keeping_their_punctuation():
    matches = Glossary.of([("file", "Akte")]).find("Save the file.")
    text, placed = put_terms("Speichern Sie die Datei.", matches, [(0, 0), (1, 2), (2, 3)])
    assert (text, placed) == ("Speichern Sie die Akte.", [True])


def test_a_term_without_aligned_words_goes_beside_its_neighbour_s_translation():
    matches = Glossary.of([("file", "Akte")]).find("the file now")
    text, placed = put_terms("die jetzt", matches, [(0, 0), (2, 1)])
    assert (text, placed) == ("die Akte jetzt", [True])
    text, placed = put_terms("die jetzt", matches, [])  # nothing aligned at all
    assert (text, placed) == ("die jetzt", [False])


def test_a_word_that_carries_another_term_is_kept():
    matches = Glossary.of([("title", "Titel")]).find("X axis title")
    text, placed = put_terms("X-Achse", matches, [(0, 0), (2, 0)], protect=("Achse",))
    assert (text, placed) == ("X-Achse Titel", [True])


def test_an_inflected_or_compounded_target_counts_as_present():
    assert contains("Die X-Achse", "achse") and contains("Alle Dateien", "Datei")
    assert not contains("Alle Dateien", "Datei", within=False)
    assert not contains("Art", "Artikel") and contains("ein roter Apfel", "Roter  apfel")


def test_enforce_reports_every_term_and_aligns_only_what_is_missing():
    glossary = Glossary.of([("file", "Datei"), ("save", "sichern")])
    found = [[Translation("Speichern Sie die Datei.", 0.0, 0.0)], [Translation("Nichts", 0, 0)]]
    asked = []

    def align(indices):
        asked.append(indices)
        return [[(0, 0), (2, 3)]]

    enforce(glossary, ["Save the file.", "Nothing"], found, align)
    assert asked == [[0]]  # the second holds no term; the first one term missing
    assert found[0][0].text == "Sichern Sie die Datei."  # capital where the sentence starts
    assert found[0][0].terms == [("save", "sichern", True), ("file", "Datei", True)]
    memory = [[Translation("Speichern", 0.0, 0.0, origin="memory")]]
    enforce(glossary, ["Save"], memory, align)
    assert memory[0][0].text == "Speichern"  # a translation memory's answer is left as it is


def test_tsv_csv_and_tbx_files(tmp_path):
    tsv = tmp_path / "terms.tsv"
    tsv.write_text("source\ttarget\n# a comment\nfile\tDatei\n\nfile name\tDateiname\tnote\n")
    assert read_glossary(tsv).terms == {("file",): "Datei", ("file", "name"): "Dateiname"}
    csv = tmp_path / "terms.csv"
    csv.write_text('en,de\n"save, then close","speichern, dann schließen"\n')
    assert read_glossary(csv, "en", "de").terms == {
        ("save", "then", "close"): "speichern, dann schließen"
    }
    tbx = tmp_path / "terms.tbx"
    tbx.write_text(
        '<?xml version="1.0"?><tbx xmlns="urn:iso:std:iso:30042:ed-2"><text><body>'
        '<conceptEntry id="1"><langSec xml:lang="en-US"><termSec><term>file</term></termSec>'
        "<termSec><term>document</term></termSec></langSec>"
        '<langSec xml:lang="de"><termSec><term>Datei</term></termSec></langSec></conceptEntry>'
        '<conceptEntry id="2"><langSec xml:lang="en"><termSec><term>lonely</term></termSec>'
        "</langSec></conceptEntry></body></text></tbx>"
    )
    assert read_glossary(tbx).terms == {("file",): "Datei", ("document",): "Datei"}
    assert read_glossary(tbx, "de", "en").terms == {("datei",): "file"}
    with pytest.raises(GlossaryError, match="no terms in both fr and de"):
        read_glossary(tbx, "fr", "de")


def test_hostile_glossaries(tmp_path):
    path = tmp_path / "hostile.tsv"
    path.write_text("\tempty source\nempty target\t\n" + "x" * (1 << 20) + "\thuge\nok\tgut\n")
    glossary = read_glossary(path)
    assert glossary.terms == {("ok",): "gut"}
    assert glossary.skipped == {"empty": 2, "over 300 characters or 16 words": 1}
    (tmp_path / "one.tsv").write_text("only one column\n")
    with pytest.raises(GlossaryError, match="line 1 has one column"):
        read_glossary(tmp_path / "one.tsv")
    bomb = tmp_path / "bomb.tbx"
    bomb.write_text(
        '<?xml version="1.0"?><!DOCTYPE tbx [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><tbx>&b;</tbx>'
    )
    with pytest.raises(GlossaryError, match="not a TBX file"):
        read_glossary(bomb)
    (tmp_path / "latin1.tsv").write_bytes("Straße\tstreet\n".encode("latin-1"))
    with pytest.raises(GlossaryError, match="not UTF-8"):
        read_glossary(tmp_path / "latin1.tsv")


def test_a_term_that_is_the_whole_sentence(numbers_run, capsys, tmp_path):
    path = tmp_path / "g.tsv"
    path.write_text("271493\tZAHL\n")
    code, out, err = translate_cli(
        capsys, numbers_run, "--glossary", str(path), "--output-format", "jsonl", "271493", "42"
    )
    assert code == 0
    first, second = (json.loads(line) for line in out.splitlines())
    assert first["translation"] == "ZAHL"
    assert first["terms"] == [{"source": "271493", "target": "ZAHL", "placed": True}]
    assert "terms" not in second and "glossary: 1 of 1 terms put in" in err


def test_terms_reach_a_real_model_s_output_in_every_sentence(numbers_run, capsys, tmp_path):
    path = tmp_path / "g.tsv"
    path.write_text("42\tXLII\n500181\tZAHL\n")
    code, out, _ = translate_cli(
        capsys, numbers_run, "--glossary", str(path), "271493! 42? 500181."
    )
    assert code == 0
    words = out.split()
    assert len(words) == 3 and words[1].startswith("XLII") and words[2].startswith("ZAHL")
    code, out, err = translate_cli(
        capsys, numbers_run, "--precision", "fp32", "271493! 42? 500181."
    )
    assert "XLII" not in out and "glossary" not in err


def test_a_request_s_glossary_over_http_adds_to_the_server_s(numbers_run):
    run = load_run(numbers_run)
    served = Served(run, aids=Aids(Glossary.of([("42", "XLII")])))
    server = Server(create_app(settings=ServeSettings(precision="fp32"), served=[served]))
    try:
        status, body = server.request(
            "POST", "/translate", {"texts": ["42", "271493 42"], "glossary": {"271493": "T"}}
        )
        assert status == 200, body
        assert body["translations"] == ["XLII", "T XLII"]
        assert body["terms"][1] == [
            {"source": "271493", "target": "T", "placed": True},
            {"source": "42", "target": "XLII", "placed": True},
        ]
        status, body = server.request("POST", "/translate", {"text": "7", "glossary": {"7": 7}})
        assert status == 422
    finally:
        server.stop()


def test_files_and_evaluate_report_their_terms(numbers_run, capsys, tmp_path):
    path = tmp_path / "g.tsv"
    path.write_text("42\tXLII\n")
    po = tmp_path / "app.po"
    po.write_text('msgid "42"\nmsgstr ""\n\nmsgid "7"\nmsgstr ""\n')
    out = tmp_path / "app.de.po"
    code, _, err = translate_cli(
        capsys,
        numbers_run,
        "--precision",
        "fp32",
        "--glossary",
        str(path),
        "--input",
        str(po),
        "--output",
        str(out),
    )
    assert code == 0 and "glossary: 1 of 1 terms put in" in err
    assert 'msgstr "XLII"' in out.read_text()
    run = tmp_path / "run"  # evaluate records its figures in the run: a copy of the shared one
    shutil.copytree(numbers_run, run)
    code, out, _ = cli(
        capsys, "evaluate", "--checkpoint", str(run), "--split", "valid", "--glossary", str(path)
    )
    assert code == 0 and "glossary:" in out and "terms put in" in out


def test_serve_names_a_file_for_every_model_or_for_one_pair():
    from vaswani.cli.serve import for_pair

    assert for_pair("terms.tsv") == (None, None, Path("terms.tsv"))
    assert for_pair("de:en=terms.tsv") == ("de", "en", Path("terms.tsv"))
    assert for_pair("a=b.tsv") == (None, None, Path("a=b.tsv"))
