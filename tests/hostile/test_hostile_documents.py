"""Hostile whole files (`vaswani translate --input FILE`): damaged and hostile files of every
format are one clear error and nothing is written."""

import pytest

from helpers import translate_cli
from helpers_files import docx, zip_bomb, zipped

# --- Whole files (`vaswani translate --input FILE`): damaged and hostile files of every format --

HOSTILE = {
    "bomb.docx": zip_bomb,
    "truncated.docx": lambda p: p.write_bytes(docx("<w:p/>")[:200]),
    "xxe.docx": lambda p: p.write_bytes(
        zipped(
            {
                "word/document.xml": '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM '
                '"file:///etc/passwd">]><d>&x;</d>'
            }
        )
    ),
    "entities.xlf": lambda p: p.write_text(
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
        '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"/>'
    ),
    "bad.po": lambda p: p.write_text('msgid "a\\q\nmsgstr ""\n'),
    "broken.srt": lambda p: p.write_text("1\n00:00:01,000 --> garbage\nHello\n"),
    "unclosed.html": lambda p: p.write_text("<p>Hello <b>world <i>and more</p>"),
    "latin1.md": lambda p: p.write_bytes("Grüße".encode("latin-1")),
    "huge-paragraph.html": lambda p: p.write_text("<p>" + "word " * 250_000 + "</p>"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_damaged_and_hostile_documents_are_one_clear_error_and_nothing_is_written(
    numbers_run, capsys, tmp_path, name
):
    source, target = tmp_path / name, tmp_path / f"out-{name}"
    HOSTILE[name](source)
    files = ["--input", str(source), "--output", str(target)]
    code, out, err = translate_cli(capsys, numbers_run, *files)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and str(source) in err
    assert not target.exists()
