"""`vaswani translate --input FILE` on whole files: the README's commands run as written (with the
test suite's trained run), several files into a directory, the input never modified. Damaged and
hostile files: tests/test_hostile.py."""

import plistlib
import re
import shlex
import zipfile
from pathlib import Path

from helpers import cli, translate_cli
from helpers_files import docx, run

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "271493. 42!"
XLIFF = (
    '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file '
    'source-language="en" datatype="plaintext" original="x"><body><trans-unit id="1">'
    '<source>271493 <g id="1">42</g></source></trans-unit></body></file></xliff>'
)
FILES = {
    "notes.txt": f"{SENTENCE}\n\n42\n",
    "notes.md": f"# 42\n\n{SENTENCE} `code`\n\n```\nkeep 42\n```\n",
    "page.html": f'<html lang="en"><body><p>{SENTENCE} <b>42</b></p><pre>42</pre></body></html>',
    "film.srt": "1\n00:00:01,000 --> 00:00:02,000\n271493\n\n2\n00:00:03,000 --> 00:00:04,000\n42.\n",
    "app.po": f'#: a.c:1\nmsgid "{SENTENCE}"\nmsgstr ""\n',
    "job.xlf": XLIFF,
}


def readme_commands() -> list[list[str]]:
    section = (ROOT / "README.md").read_text().split("## Translating documents")[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    return [shlex.split(line.split("#")[0])[1:] for line in block.splitlines() if line.strip()]


def test_the_readmes_document_commands_run_as_written(numbers_run, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, text in FILES.items():
        Path(name).write_text(text)
    Path("report.docx").write_bytes(docx(f"<w:p>{run('271493. ')}{run('42', bold=True)}</w:p>"))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    commands = readme_commands()
    assert len(commands) == 8
    for args in commands:
        args = [str(numbers_run) if a == "runs/ding" else a for a in args]
        code, out, err = cli(capsys, *args)
        assert code == 0, (args, err)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in before} == before
    html = Path("page.en.html").read_text()
    # lang stays "en": this run's data does not record its target language (prepare --tgt-lang)
    assert html.startswith('<html lang="en"><body><p>') and "<pre>42</pre>" in html
    assert re.search(r"<b>\w+</b></p>", html)
    assert "```\nkeep 42\n```" in Path("notes.en.md").read_text()
    assert "00:00:03,000 --> 00:00:04,000" in Path("film.en.srt").read_text()
    assert "#, fuzzy" in Path("app.en.po").read_text()
    assert '<target state="needs-review-translation">' in Path("job.en.xlf").read_text()
    with zipfile.ZipFile("en/report.docx") as z:
        assert "<w:b/></w:rPr><w:t" in z.read("word/document.xml").decode()
    assert '"alignment": "0-0' in out or "alignment" in out  # the last command: jsonl


def test_several_files_go_into_an_output_dir_and_an_input_is_never_overwritten(
    numbers_run, capsys, tmp_path
):
    (tmp_path / "a.html").write_text("<p>42</p>")
    (tmp_path / "b.po").write_text('msgid "42"\nmsgstr ""\n')
    inputs = [str(tmp_path / "a.html"), str(tmp_path / "b.po")]
    out = ["--output-dir", str(tmp_path / "out")]
    code, _, err = translate_cli(capsys, numbers_run, "--input", *inputs, *out)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.html", "b.po"]
    same = ["--input", inputs[0], "--output", inputs[0]]
    code, _, err = translate_cli(capsys, numbers_run, *same)
    assert code == 2 and "would write over --input" in err


def test_one_text_document_without_output_goes_to_stdout_and_a_zip_needs_one(
    numbers_run, capsys, tmp_path
):
    (tmp_path / "a.html").write_text("<p>271493 <b>42</b></p>")
    code, out, err = translate_cli(capsys, numbers_run, "--input", str(tmp_path / "a.html"))
    assert code == 0 and out.startswith("<p>") and "<b>" in out, err
    (tmp_path / "a.docx").write_bytes(docx(f"<w:p>{run('42')}</w:p>"))
    code, out, err = translate_cli(capsys, numbers_run, "--input", str(tmp_path / "a.docx"))
    assert code == 2 and "give --output FILE" in err and out == ""


def test_a_project_tree_is_mirrored_with_each_platforms_names(numbers_run, capsys, tmp_path):
    res = tmp_path / "app"
    files = {
        "res/values/strings.xml": '<resources><string name="a">271493</string></resources>\n',
        "res/values/colors.xml": '<resources><color name="c">#fff</color></resources>\n',
        "res/values-de/strings.xml": '<resources><string name="a">42</string></resources>\n',
        "res/layout/main.xml": '<LinearLayout><TextView text="42"/></LinearLayout>\n',
        "ios/Base.lproj/Main.strings": '"a" = "271493";\n',
        "ios/fr.lproj/Main.strings": '"a" = "42";\n',
        "java/messages.properties": "a=271493\n",
        "docs/guide.md": "# 42\n",
        "package.json": '{"name": "app"}\n',
        "web/main.ts": "export const a = 1;\n",
        "logo.png": "not read",
        "lang/main.json": '{"a": "271493"}\n',  # Jitsi's: the source beside its translations
        "lang/main-de.json": '{"a": "42"}\n',
    }
    for name, text in files.items():
        (res / name).parent.mkdir(parents=True, exist_ok=True)
        (res / name).write_text(text)
    compiled = plistlib.dumps({"a": "271493"}, fmt=plistlib.FMT_BINARY)  # a built app's .strings
    (res / "ios/Base.lproj/Built.strings").write_bytes(compiled)
    out = tmp_path / "out"
    args = ["--input-dir", str(res), "--output-dir", str(out), "--target", "es"]
    code, _, err = translate_cli(capsys, numbers_run, *args)
    assert code == 0, err
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == [
        "docs/guide.md",
        "ios/es.lproj/Main.strings",
        "java/messages_es.properties",
        "lang/main-es.json",
        "res/values-es/strings.xml",
    ]
    assert "translated 5 file(s)" in err and "(9 left out)" in err
    # every file left out is counted by its reason
    assert "1 a compiled .strings" in err
    assert "1 not a format vaswani reads" in err and "--list-skipped names them" in err, err
    code, _, err = translate_cli(capsys, numbers_run, *args, "--list-skipped")
    assert code == 0 and "left out: package.json: json not in a language's place" in err
    assert "left out: lang/main-de.json: named by another language" in err
    assert "left out: logo.png: not a format vaswani reads (.png)" in err
    assert "left out: ios/Base.lproj/Built.strings: a compiled .strings" in err
    android = (out / "res/values-es/strings.xml").read_text()
    assert android.startswith('<resources><string name="a">') and "271493" not in android
    code, _, err = translate_cli(capsys, numbers_run, *args[:4])
    assert code == 2 and "give --target" in err
