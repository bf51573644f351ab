"""Hostile resource files, `--protect` patterns and project trees (round 5's features attacked):
each is one clear line and exit 2 with nothing written, or a file its platform's own parser
reads; a pattern never hangs; `serve --checkpoint` offers the languages its run's data records."""

import plistlib
import socket
import time

import pytest
from lxml import etree

from helpers import cli, translate_cli
from helpers_files import odt
from helpers_hostile import copy_run, edit_json

PO_HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n'


def deck_saying_text(path):
    """An .odp whose `mimetype` says it is a text document (an .odt renamed)."""
    path.write_bytes(odt("<text:p>Hello</text:p>"))


REFUSED = {
    "plurals.po": lambda p: p.write_text(
        PO_HEADER + '"Plural-Forms: nplurals=2000000000; plural=n;\\n"\n\n'
        'msgid "one file"\nmsgid_plural "%d files"\nmsgstr[0] ""\nmsgstr[1] ""\n'
    ),
    "digits.po": lambda p: p.write_text(
        PO_HEADER + '"Plural-Forms: nplurals=12345678901234567890123; plural=n;\\n"\n\n'
        'msgid "one file"\nmsgid_plural "%d files"\nmsgstr[0] ""\nmsgstr[1] ""\n'
    ),
    "surrogate.json": lambda p: p.write_text('{"a": "Hello \\ud800 world"}'),
    "surrogate.properties": lambda p: p.write_text("a = Hello \\ud800 world\n"),
    "surrogate.strings": lambda p: p.write_text('"a" = "Hello \\UD800 world";\n'),
    "null.xcstrings": lambda p: p.write_text(
        '{"sourceLanguage": "en", "strings": {"Hello": {"localizations": null}}}'
    ),
    "bad-hex.properties": lambda p: p.write_text("a = Hello \\uZZZZ\n"),
    "short-hex.properties": lambda p: p.write_text("a = Hello \\u12\n"),
    "external-dtd.xml": lambda p: p.write_text(
        '<?xml version="1.0"?><!DOCTYPE resources SYSTEM "file:///etc/passwd">'
        '<resources><string name="a">Hello</string></resources>'
    ),
    "text-deck.odp": deck_saying_text,
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_hostile_resource_files_are_one_line_and_nothing_is_written(
    numbers_run, capsys, tmp_path, name
):
    source, target = tmp_path / name, tmp_path / f"out-{name}"
    REFUSED[name](source)
    started = time.monotonic()
    code, _, err = translate_cli(
        capsys, numbers_run, "--input", str(source), "--output", str(target), "--target", "es"
    )
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and str(source) in err and "Traceback" not in err
    assert not target.exists()
    assert time.monotonic() - started < 30  # the same file hung or ran for minutes before


def translated(capsys, run, tmp_path, name, content):
    source, target = tmp_path / name, tmp_path / f"out-{name}"
    source.write_bytes(content.encode() if isinstance(content, str) else content)
    args = ["--input", str(source), "--output", str(target), "--target", "es"]
    code, _, err = translate_cli(capsys, run, *args)
    assert code == 0, err
    return target.read_bytes()


def test_an_android_string_holding_a_self_closing_element_stays_well_formed(
    numbers_run, capsys, tmp_path
):
    source = (
        '<resources xmlns:xi="http://www.w3.org/2001/XInclude">\n'
        '<string name="a">four <xi:include href="x.xml"/> two</string>\n'
        '<string name="b">seven <br/> one</string>\n</resources>\n'
    )
    out = translated(capsys, numbers_run, tmp_path, "strings.xml", source)
    root = etree.fromstring(out)  # well-formed: no </string> escaped into the text
    strings = root.findall("string")
    assert [s.get("name") for s in strings] == ["a", "b"]
    assert strings[0].find("{http://www.w3.org/2001/XInclude}include") is not None
    assert strings[1].find("br") is not None


def test_a_stringsdict_whose_format_key_is_not_a_string_is_left_as_it_is(
    numbers_run, capsys, tmp_path
):
    source = plistlib.dumps(
        {
            "files": {
                "NSStringLocalizedFormatKey": 42,
                "n": {
                    "NSStringFormatSpecTypeKey": "NSStringPluralRuleType",
                    "NSStringFormatValueTypeKey": "d",
                    "one": "%d file",
                    "other": "%d files",
                },
            }
        }
    )
    out = plistlib.loads(translated(capsys, numbers_run, tmp_path, "a.stringsdict", source))
    assert out["files"]["NSStringLocalizedFormatKey"] == 42
    assert set(out["files"]["n"]) >= {"NSStringFormatSpecTypeKey", "other"}


@pytest.mark.parametrize("content", ["\\", "a=\\", "a=seven\\"])
def test_a_properties_line_continued_past_the_end_is_what_java_reads(
    numbers_run, capsys, tmp_path, content
):
    # Java drops a backslash that continues the last line: the values are "", "" and "seven"
    written = translated(capsys, numbers_run, tmp_path, "messages.properties", content).decode()
    if content == "a=seven\\":
        assert written.startswith("a=") and "\\" not in written and written != "a=seven"
    else:
        assert written == content  # nothing to translate: nothing changed


@pytest.mark.parametrize(
    "folders", [("values", "values-en"), ("Base.lproj", "en.lproj")], ids=["android", "apple"]
)
def test_two_files_of_a_tree_translated_into_one_are_refused(
    numbers_run, capsys, tmp_path, folders
):
    tree, out = tmp_path / "res", tmp_path / "out"
    for folder in folders:
        (tree / folder).mkdir(parents=True)
        if folder.startswith("values"):
            (tree / folder / "strings.xml").write_text(
                '<resources><string name="a">four</string></resources>'
            )
        else:
            (tree / folder / "Main.strings").write_text('"a" = "four";\n')
    args = ["--input-dir", str(tree), "--output-dir", str(out), "--source-lang", "en"]
    code, _, err = translate_cli(capsys, numbers_run, *args, "--target", "es")
    last = err.strip().splitlines()[-1]  # after the lines that say how the model was loaded
    assert code == 2 and last.startswith("error:") and "Traceback" not in err
    assert all(folder in last for folder in folders) and "both" in last
    assert not out.exists()


@pytest.mark.parametrize(
    "pattern", ["x*", "", "$", "[\\s\\S]*", "^", "\\b", "a|", "a{4294967296}", "(\\w)\\1"]
)
def test_protect_patterns_that_cannot_work_are_one_line(numbers_run, capsys, tmp_path, pattern):
    source = tmp_path / "a.txt"
    source.write_text("four two\nseven\none\n")
    started = time.monotonic()
    code, out, err = translate_cli(
        capsys, numbers_run, "--input", str(source), "--protect", pattern
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--protect" in err, err
    assert out == "" and time.monotonic() - started < 10


def test_a_pattern_that_backtracks_for_ever_in_python_runs_in_linear_time(
    numbers_run, capsys, tmp_path
):
    source = tmp_path / "a.txt"
    source.write_text("a" * 40 + "b four\n" + "two " + "a" * 60 + "\n")
    started = time.monotonic()
    code, out, err = translate_cli(
        capsys, numbers_run, "--input", str(source), "--protect", "(a+)+$"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2 and lines[1].endswith(" " + "a" * 60)  # protected: kept whole
    assert time.monotonic() - started < 20


def test_serve_checkpoint_offers_the_pair_its_data_records(numbers_run, capsys, tmp_path):
    run = copy_run(numbers_run, tmp_path)
    edit_json(run / "data.json", lambda d: d["meta"].update(pair={"source": "en", "target": "de"}))
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = str(taken.getsockname()[1])
    try:  # the port is taken: the server says what it would offer, then stops
        code, _, err = cli(capsys, "serve", "--checkpoint", str(run), "--port", port)
    finally:
        taken.close()
    assert code == 2 and "cannot listen" in err
    assert "pairs: en:de" in err and "API: off" not in err
