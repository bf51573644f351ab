"""One file of every app resource format, made of real English UI strings (the msgids of gettext
catalogs the model never saw), translated end to end by `vaswani translate --input F --output G`
and checked as a localisation engineer would:

- the line diff against the input: lines taken out and put in, and how many of the lines taken
  out hold no translatable value (keys, comments, untranslatable strings: must be 0);
- the code of each value kept: the format's placeholders (Android `%1$s`, iOS `%@`, ICU `{name}`,
  i18next `{{x}}`, Rails `%{x}`, MessageFormat `{0}`, Qt `%1`, .NET `{0}`) counted in the source
  and the translation of each value, read back by vaswani's reader of the output;
- the platform's own tool reads the output where this machine has one: aapt (Android), lrelease
  (Qt), Ruby's Psych (YAML), Python's plistlib (.stringsdict), json (JSON, ARB, .xcstrings);
- what translate-toolkit's store would change in the same file left untranslated (parsed and
  written back: the lines its serialiser rewrites), the reason vaswani splices instead;
- end to end time of a 2,000-string strings.xml and a 50-slide .pptx (python-pptx).

    python benchmarks/resource_formats.py --checkpoint RUN --catalogs DIR [--out DIR]
        [--strings 200] [--src SRC]

DIR holds .po or .pot files (English msgids; `msgunfmt` makes one of an installed .mo).
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape

PRINTF = re.compile(r"%(?:\d+\$)?[-+ 0#]*\d*(?:\.\d+)?(?:l|ll|z)?([sdiu])")


def english(catalogs: Path, count: int) -> tuple[list[str], list[tuple[str, str]]]:
    """Up to `count` one-line msgids (printf kept) and the plural pairs of the catalogs."""
    import polib

    texts, plurals, seen = [], [], set()
    for path in sorted([*catalogs.glob("*.po"), *catalogs.glob("*.pot")]):
        for entry in polib.pofile(str(path)):
            text = entry.msgid
            if not text or "\n" in text or len(text) > 160 or text in seen or entry.obsolete:
                continue
            seen.add(text)
            if entry.msgid_plural and "%" in text:
                plurals.append((text, entry.msgid_plural))
            elif not entry.msgid_plural and not re.search(
                r"%(?!(?:\d+\$)?[-+ 0#]*\d*[sdiu])", text
            ):
                texts.append(text)
    return texts[:count], plurals[:20]


SYNTAX = {  # each printf directive k (0-based) of a string, in the format's own placeholder
    "android": lambda k, c, n: f"%{k + 1}${c}" if n > 1 else f"%{c}",
    "apple": lambda k, c, n: (f"%{k + 1}$" if n > 1 else "%") + ("@" if c == "s" else "lld"),
    "java": lambda k, c, n: f"{{{k}}}",
    "arb": lambda k, c, n: f"{{arg{k}}}",
    "i18next": lambda k, c, n: f"{{{{arg{k}}}}}",
    "rails": lambda k, c, n: f"%{{arg{k}}}",
    "qt": lambda k, c, n: f"%{k + 1}",
}


def written(text: str, syntax: str) -> str:
    directives = PRINTF.findall(text)
    counter = iter(range(len(directives)))
    return PRINTF.sub(lambda m: SYNTAX[syntax](next(counter), m[1], len(directives)), text)


def files(texts: list[str], plurals: list[tuple[str, str]]) -> dict[str, str]:
    """One file of every format, of the same strings each in its own placeholders."""
    android = "\n".join(
        f'    <string name="s{k}">{escape(written(t, "android")).replace(chr(39), chr(92) + chr(39))}</string>'
        for k, t in enumerate(texts)
    )
    android_plurals = "\n".join(
        f'    <plurals name="p{k}">\n        <item quantity="one">{escape(written(o, "android"))}</item>\n'
        f'        <item quantity="other">{escape(written(m, "android"))}</item>\n    </plurals>'
        for k, (o, m) in enumerate(plurals)
    )
    strings = "\n".join(
        f'/* s{k} */\n"s{k}" = {json.dumps(written(t, "apple"), ensure_ascii=False)};'
        for k, t in enumerate(texts)
    )
    properties = "\n".join(
        f"# s{k}\ns{k} = {written(t, 'java').replace(chr(39), chr(39) * 2) if '{' in written(t, 'java') else written(t, 'java')}"
        for k, t in enumerate(texts)
    )
    i18next = {f"s{k}": written(t, "i18next") for k, t in enumerate(texts)}
    for k, (o, m) in enumerate(plurals):
        i18next[f"p{k}_one"] = written(o, "i18next").replace("{{arg0}}", "{{count}}")
        i18next[f"p{k}_other"] = written(m, "i18next").replace("{{arg0}}", "{{count}}")
    arb = {"@@locale": "en"}
    for k, t in enumerate(texts):
        arb[f"s{k}"] = written(t, "arb")
        arb[f"@s{k}"] = {"description": f"string {k}"}
    for k, (o, m) in enumerate(plurals):
        arms = f"one{{{written(o, 'arb').replace('{arg0}', '#')}}} other{{{written(m, 'arb').replace('{arg0}', '#')}}}"
        arb[f"p{k}"] = f"{{count, plural, {arms}}}"
    yaml = (
        "en:\n"
        + "".join(
            f"  s{k}: {json.dumps(written(t, 'rails'), ensure_ascii=False)}\n"
            for k, t in enumerate(texts)
        )
        + "".join(
            f"  p{k}:\n    one: {json.dumps(written(o, 'rails'), ensure_ascii=False)}\n"
            f"    other: {json.dumps(written(m, 'rails'), ensure_ascii=False)}\n"
            for k, (o, m) in enumerate(plurals)
        )
    )
    ts = "".join(
        f"    <message>\n        <source>{escape(written(t, 'qt'))}</source>\n"
        '        <translation type="unfinished"></translation>\n    </message>\n'
        for t in texts
    )
    resx = "".join(
        f'  <data name="s{k}" xml:space="preserve">\n    <value>{escape(written(t, "java"))}</value>\n  </data>\n'
        for k, t in enumerate(texts)
    )
    rules = "".join(
        f"\t<key>p{k}</key>\n\t<dict>\n\t\t<key>NSStringLocalizedFormatKey</key>\n\t\t<string>%#@n@</string>\n"
        "\t\t<key>n</key>\n\t\t<dict>\n\t\t\t<key>NSStringFormatSpecTypeKey</key>\n"
        "\t\t\t<string>NSStringPluralRuleType</string>\n\t\t\t<key>NSStringFormatValueTypeKey</key>\n"
        f"\t\t\t<string>lld</string>\n\t\t\t<key>one</key>\n\t\t\t<string>{escape(written(o, 'apple'))}</string>\n"
        f"\t\t\t<key>other</key>\n\t\t\t<string>{escape(written(m, 'apple'))}</string>\n\t\t</dict>\n\t</dict>\n"
        for k, (o, m) in enumerate(plurals)
    )
    catalog = {
        "sourceLanguage": "en",
        "strings": {written(t, "apple"): {} for t in texts},
        "version": "1.0",
    }
    from vaswani.documents.jsonfiles import xcode_json

    return {
        "strings.xml": '<?xml version="1.0" encoding="utf-8"?>\n<resources>\n'
        '    <string name="app_name" translatable="false">Notes</string>\n'
        f"{android}\n{android_plurals}\n</resources>\n",
        "Localizable.strings": strings + "\n",
        "messages.properties": "# Messages\n" + properties + "\n",
        "en.json": json.dumps(i18next, indent=2, ensure_ascii=False) + "\n",
        "app_en.arb": json.dumps(arb, indent=2, ensure_ascii=False) + "\n",
        "en.yml": yaml,
        "app.ts": '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE TS>\n<TS version="2.1" language="en">\n'
        f"<context>\n    <name>Main</name>\n{ts}</context>\n</TS>\n",
        "Strings.resx": '<?xml version="1.0" encoding="utf-8"?>\n<root>\n'
        '  <resheader name="resmimetype">\n    <value>text/microsoft-resx</value>\n  </resheader>\n'
        f"{resx}</root>\n",
        "Localizable.stringsdict": '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
        f'<plist version="1.0">\n<dict>\n{rules}</dict>\n</plist>\n',
        "Localizable.xcstrings": xcode_json(catalog) + "\n",
    }


def values(path: Path) -> list[tuple[str, object]]:
    """The texts vaswani's reader finds in a file, with the code its format protects in each."""
    from vaswani.documents.formats import format_of, protections_of, read_document

    document = read_document(path.read_bytes(), format_of(path), str(path))
    texts = document.texts()
    return list(zip(texts, protections_of(document, texts), strict=True))


def code_kept(source: Path, output: Path) -> tuple[int, int]:
    """Values with placeholders that come back with the same ones, of those with any: the
    source's values and the output's (read by vaswani's reader of each) matched in order, so
    that plural entries the target adds are skipped."""
    from vaswani.documents.spans import Protection, spans

    def signature(text: str, protection) -> tuple[str, ...]:
        """The placeholders of a value, each once (a plural arm the target adds repeats them;
        an ICU message's own syntax is written by construction, not by the model)."""
        found = spans(text, protection or Protection())
        return tuple(sorted({s.text for s in found if s.syntax != "icu"}))

    read = values(source)
    code = next((p for _, p in read if p is not None), None)  # for an output's bare texts
    before = [signature(t, p) for t, p in read]
    after = [signature(t, p or code) for t, p in values_of_output(output)]
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    matched = [before[b.a + k] for b in matcher.get_matching_blocks() for k in range(b.size)]
    return sum(1 for s in matched if s), sum(1 for s in before if s)


def values_of_output(output: Path) -> list[tuple[str, object]]:
    """The output's translated values (a catalog's new localizations, a .ts's translations)."""
    if output.suffix == ".xcstrings":
        catalog = json.loads(output.read_text())
        units = [
            form["stringUnit"]["value"]
            for e in catalog["strings"].values()
            for language, mine in e.get("localizations", {}).items()
            if language != "en"
            for form in ([mine] if "stringUnit" in mine else mine["variations"]["plural"].values())
        ]
        return [(u, None) for u in units]
    if output.suffix == ".ts":
        from lxml import etree

        found = etree.parse(str(output)).iter("translation")
        return [("".join(t.itertext()), None) for t in found]
    return values(output)


def diff(source: Path, output: Path) -> dict:
    """Lines of the input, lines taken out and put in, and the lines taken out that hold no
    translatable value (by where vaswani's reader finds the values)."""
    from vaswani.documents.formats import format_of, read_document

    text = source.read_text(encoding="utf-8")
    old, new = text.splitlines(), output.read_text(encoding="utf-8").splitlines()
    lines = list(difflib.unified_diff(old, new, lineterm="", n=0))
    removed = [d for d in lines if d.startswith("-") and not d.startswith("---")]
    added = [d for d in lines if d.startswith("+") and not d.startswith("+++")]
    document = read_document(source.read_bytes(), format_of(source), str(source))
    if not hasattr(document, "values"):
        return {"lines": len(old), "removed": len(removed), "added": len(added), "other": "n/a"}
    inside = {
        line
        for v in document.values
        for line in range(text.count("\n", 0, v.start), text.count("\n", 0, v.end) + 1)
    }
    taken = []
    for hunk in re.finditer(r"^@@ -(\d+)(?:,(\d+))? ", "\n".join(lines), re.M):
        first, count = int(hunk[1]), int(hunk[2] if hunk[2] is not None else 1)
        taken += [first - 1 + k for k in range(count)]
    again = {d[1:] for d in added}  # a line the diff takes out and puts back as it was
    other = [old[k].strip() for k in taken if k not in inside and old[k] not in again]
    return {"lines": len(old), "removed": len(removed), "added": len(added), "other": other}


def platform_tool(output: Path, work: Path) -> str:
    """What the platform's own reader says of the output ("ok", or its first complaint)."""
    suffix = output.suffix
    try:
        if suffix == ".xml" and shutil.which("aapt"):
            res = work / "aapt" / "res" / "values"
            res.mkdir(parents=True, exist_ok=True)
            shutil.copy(output, res / "strings.xml")
            manifest = work / "aapt" / "AndroidManifest.xml"
            manifest.write_text('<manifest package="org.example.bench"/>\n')
            done = subprocess.run(
                [
                    "aapt",
                    "package",
                    "-f",
                    "-M",
                    str(manifest),
                    "-S",
                    str(res.parent),
                    "-F",
                    str(work / "aapt" / "out.apk"),
                ],
                capture_output=True,
                text=True,
            )
            return "ok (aapt)" if done.returncode == 0 else "aapt: " + done.stderr.strip()[:200]
        if suffix == ".ts" and Path("/usr/lib/qt6/bin/lrelease").exists():
            done = subprocess.run(
                ["/usr/lib/qt6/bin/lrelease", str(output), "-qm", str(work / "out.qm")],
                capture_output=True,
                text=True,
            )
            complaint = [
                x for x in (done.stdout + done.stderr).splitlines() if "rror" in x or "arning" in x
            ]
            return (
                "ok (lrelease)"
                if done.returncode == 0 and not complaint
                else f"lrelease: {complaint[:2]}"
            )
        if suffix == ".yml" and shutil.which("ruby"):
            done = subprocess.run(
                ["ruby", "-ryaml", "-e", "YAML.safe_load(File.read(ARGV[0]))", str(output)],
                capture_output=True,
                text=True,
            )
            return "ok (Ruby Psych)" if done.returncode == 0 else "ruby: " + done.stderr[:200]
        if suffix == ".stringsdict":
            import plistlib

            plistlib.loads(output.read_bytes())
            return "ok (plistlib)"
        if suffix in (".json", ".arb", ".xcstrings"):
            json.loads(output.read_text())
            return "ok (json)"
    except Exception as error:  # the tool's complaint is the finding
        return f"{type(error).__name__}: {error}"[:200]
    return "no tool here"


TOOLKIT = {
    ".xml": ("translate.storage.aresource", "AndroidResourceFile"),
    ".strings": ("translate.storage.properties", "stringsutf8file"),
    ".properties": ("translate.storage.properties", "javautf8file"),
    ".json": ("translate.storage.jsonl10n", "I18NextV4File"),
    ".arb": ("translate.storage.jsonl10n", "ARBJsonFile"),
    ".yml": ("translate.storage.yaml", "RubyYAMLFile"),
    ".ts": ("translate.storage.ts2", "tsfile"),
    ".resx": ("translate.storage.resx", "RESXFile"),
    ".stringsdict": ("translate.storage.stringsdict", "StringsDictFile"),
}


def toolkit_rewrites(source: Path) -> str:
    """Lines translate-toolkit's store changes in a file it parses and writes back untouched."""
    import importlib

    where = TOOLKIT.get(source.suffix)
    if where is None:
        return "no store"
    try:
        store = getattr(importlib.import_module(where[0]), where[1]).parsefile(str(source))
        out = io.BytesIO()
        store.serialize(out)
    except Exception as error:
        return f"{type(error).__name__}: {str(error)[:80]}"
    old = source.read_text(encoding="utf-8").splitlines()
    new = out.getvalue().decode("utf-8").splitlines()
    changed = [d for d in difflib.unified_diff(old, new, lineterm="", n=0) if d[:1] in "+-"]
    return f"{len([d for d in changed if d[:1] == '-' and not d.startswith('---')])} lines"


def translate(args: argparse.Namespace, source: Path, output: Path, *extra: str) -> float:
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = args.src
    command = [
        sys.executable,
        "-m",
        "vaswani",
        "translate",
        "--checkpoint",
        args.checkpoint,
        "--input",
        str(source),
        "--output",
        str(output),
        *extra,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{source}: {done.stderr.strip()[-400:]}")
    return took


def deck(texts: list[str], slides: int, path: Path) -> None:
    from pptx import Presentation

    deck = Presentation()
    for k in range(slides):  # six strings a slide, none twice
        mine = [texts[(6 * k + j) % len(texts)] for j in range(6)]
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = mine[0]
        body = slide.placeholders[1].text_frame
        body.text = mine[1]
        for j in range(2, 5):
            run = body.add_paragraph().add_run()
            run.text, run.font.bold = mine[j], j == 3
        slide.notes_slide.notes_text_frame.text = mine[5]
    deck.save(str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--catalogs", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("resource-formats"))
    parser.add_argument("--strings", type=int, default=200)
    parser.add_argument("--src", help="another checkout's src/ to run")
    args = parser.parse_args()
    texts, plurals = english(args.catalogs, 2000)
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        "| file | lines | taken out | put in | other lines changed | code kept | platform tool | translate-toolkit rewrites | seconds |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |")
    for name, content in files(texts[: args.strings], plurals).items():
        source, output = args.out / name, args.out / f"out-{name}"
        source.write_text(content, encoding="utf-8")
        took = translate(args, source, output, "--target", "fr")
        found = diff(source, output)
        kept, with_code = code_kept(source, output)
        tool = platform_tool(output, args.out)
        other = found["other"]
        other = other if isinstance(other, str) else f"{len(other)} {other[:2] if other else ''}"
        print(
            f"| {name} | {found['lines']} | {found['removed']} | {found['added']} | {other} "
            f"| {kept} of {with_code} | {tool} | {toolkit_rewrites(source)} | {took:.1f} |",
            flush=True,
        )
    big = args.out / "big" / "strings.xml"
    big.parent.mkdir(exist_ok=True)
    big.write_text(files(texts[:2000], plurals)["strings.xml"], encoding="utf-8")
    took = translate(args, big, args.out / "big" / "out-strings.xml", "--target", "fr")
    print(f"\n{len(texts[:2000]) + len(plurals)} strings of a strings.xml end to end: {took:.1f} s")
    slides = args.out / "deck.pptx"
    deck(texts, 50, slides)
    took = translate(args, slides, args.out / "out-deck.pptx", "--target", "fr")
    print(f"a 50-slide .pptx (title, 4 paragraphs, notes: 300 strings) end to end: {took:.1f} s")


if __name__ == "__main__":
    main()
