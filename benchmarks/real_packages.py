"""Real files that real packages ship, translated by `vaswani translate --input F --output G`
and checked by each platform's own tool, as a localisation engineer would before shipping them:

    .po          `msgfmt -c` (GNU gettext)           Django's and django-allauth's English catalogs
    .json        node's JSON.parse                    npm locale files (i18n-iso-countries, ...)
    .properties  java.util.Properties.load(InputStream), Java's ISO-8859-1 reading (Xerces' jar)
    .ts          lrelease (Qt), after `lconvert -i X.qm -o X.ts -drop-translations`
    .yml         Ruby's Psych (YAML.load_file)         Rails' and Devise's en.yml (Debian's gems)

For each file: its values, the values the translation changed, those left untranslated (a PO
message whose translation the check refused stays empty, for a translator), the values written
empty (never, where the source was not), the values holding code (options,
variables, identifiers, calls, dotted names, placeholders, numbered tags, __MARKERS__) and how
many of them kept all of it, read back as the platform's tool reads the file (polib for PO,
JSON.parse for JSON, Java for .properties, the .ts XML, Psych for YAML), and the tool's verdict.

    python benchmarks/real_packages.py --checkpoint RUN --files DIR [--out DIR] [--target LANG]

DIR holds the files, any of the four kinds (fetch them with `npm pack`, `pip download`,
`apt-get download`; nothing here downloads). Needs msgfmt, node, java, lrelease and ruby where files
of their kind are given; a missing tool is said in the table, not faked.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from catalogs import CODE_TOKEN  # this folder: run as python benchmarks/real_packages.py

CODE = re.compile(
    CODE_TOKEN.pattern  # options, variables, calls, snake_case, dotted.names: the catalogs' reading
    + r"|%\(\w+\)[sdif]|%(?:\d+\$)?[sdif]|%\d"  # printf, Python's named, Qt's %1
    r"|\{\{?\s*\w+\s*\}?\}|\{\d+(?:,[^}]*)?\}"  # i18next {{x}}, ICU {name}, MessageFormat {0}
    r"|</?\d+>|__\w+__"  # React's numbered tags, __MARKERS__
)
"""What counts as code in a value: an independent reading, not the spans vaswani protects."""

JAVA = """
import java.io.FileInputStream;
import java.util.Properties;
public class ReadProperties {
    public static void main(String[] args) throws Exception {
        Properties found = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) { found.load(in); }
        for (String key : found.stringPropertyNames()) {
            StringBuilder line = new StringBuilder();
            for (char c : (key + "\\u0000" + found.getProperty(key)).toCharArray())
                line.append(c < 128 && c != '\\n' && c != '\\\\' ? String.valueOf(c)
                    : String.format("\\\\u%04x", (int) c));
            System.out.println(line);
        }
    }
}
"""
"""Prints each key and value as Java read them (ISO-8859-1, `\\uXXXX` escapes), escaped to ASCII."""

NODE = "const fs=require('fs');process.stdout.write(JSON.stringify(JSON.parse(fs.readFileSync(process.argv[1],'utf8'))))"


def code_of(text: str) -> list[str]:
    return [m.group() for m in CODE.finditer(text)]


def run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, check=False)


def po_values(path: Path, translated: bool) -> tuple[dict[str, str], str]:
    """msgid -> msgstr (the msgid itself for the source), and `msgfmt -c`'s verdict."""
    import polib

    values = {
        e.msgid: (e.msgstr if translated else e.msgid)
        for e in polib.pofile(str(path))
        if e.msgid and not e.msgid_plural and not e.obsolete
    }
    if not shutil.which("msgfmt"):
        return values, "no msgfmt here"
    done = run(["msgfmt", "-c", "-o", "/dev/null", str(path)])
    return values, "msgfmt -c: ok" if done.returncode == 0 else f"msgfmt -c: {done.stderr[:200]}"


def flat(value, prefix: str = "") -> dict[str, str]:
    if isinstance(value, dict):
        return {
            k: v for key, item in value.items() for k, v in flat(item, f"{prefix}/{key}").items()
        }
    if isinstance(value, list):
        return {
            k: v for i, item in enumerate(value) for k, v in flat(item, f"{prefix}/{i}").items()
        }
    return {prefix: value} if isinstance(value, str) else {}


def json_values(path: Path, _: bool) -> tuple[dict[str, str], str]:
    if not shutil.which("node"):
        return flat(json.loads(path.read_text(encoding="utf-8"))), "no node here"
    done = run(["node", "-e", NODE, str(path)])
    if done.returncode:
        return {}, f"JSON.parse: {done.stderr.strip().splitlines()[-1][:200]}"
    return flat(json.loads(done.stdout)), "JSON.parse: ok"


RUBY = "require 'yaml'; require 'json'; print JSON.generate(YAML.load_file(ARGV[0]))"


def yaml_values(path: Path, _: bool) -> tuple[dict[str, str], str]:
    """The values Ruby's Psych reads, under the language's key (`en:`, `es:`) taken off."""
    if not shutil.which("ruby"):
        return {}, "no ruby here"
    done = run(["ruby", "-e", RUBY, str(path)])
    if done.returncode:
        return {}, f"Psych: {done.stderr.strip().splitlines()[-1][:200]}"
    (tree,) = json.loads(done.stdout).values()
    return flat(tree), "Psych: ok"


def properties_values(path: Path, _: bool) -> tuple[dict[str, str], str]:
    if not shutil.which("java"):
        return {}, "no java here"
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / "ReadProperties.java"
        source.write_text(JAVA, encoding="utf-8")
        done = run(["java", str(source), str(path)])
    if done.returncode:
        return {}, f"Properties.load: {done.stderr[:200]}"
    values = {}
    for line in done.stdout.splitlines():
        key, _, value = line.encode().decode("unicode_escape").partition("\0")
        values[key] = value
    garbled = sum("Ã" in v or "Â" in v for v in values.values())  # UTF-8 read as ISO-8859-1
    return values, f"Properties.load: ok, {garbled} values garbled"


def ts_values(path: Path, translated: bool) -> tuple[dict[str, str], str]:
    values = {}
    for number, message in enumerate(ElementTree.parse(path).iter("message")):
        if message.get("numerus") == "yes":
            continue
        source = message.findtext("source") or ""
        values[f"{number}:{source}"] = (
            (message.findtext("translation") or "") if translated else source
        )
    if not shutil.which("lrelease"):
        return values, "no lrelease here"
    done = run(["lrelease", str(path), "-qm", "/dev/null"])
    words = (done.stdout + done.stderr).strip().replace("\n", " ")
    return values, f"lrelease: {'ok' if done.returncode == 0 else 'failed'} ({words[:160]})"


READERS = {
    ".po": po_values,
    ".json": json_values,
    ".properties": properties_values,
    ".ts": ts_values,
    ".yml": yaml_values,
}


def measure(source: Path, output: Path) -> dict:
    read = READERS[source.suffix]
    before, _ = read(source, False)
    after, verdict = read(output, True)
    shared = [k for k in before if k in after]
    # a catalog's empty msgstr is a message left for a translator (the check refused the
    # model's), which the app shows in English: not a value lost
    left = [k for k in shared if before[k] and not after[k]] if source.suffix == ".po" else []
    written = [k for k in shared if k not in left]
    coded = [k for k in written if code_of(before[k])]
    kept = [k for k in coded if all(t in after[k] for t in code_of(before[k]))]
    lost = [(before[k], after[k]) for k in coded if k not in kept]
    return {
        "file": source.name,
        "values": len(before),
        "read back": len(after),
        "changed": sum(before[k] != after[k] for k in written),
        "left untranslated": len(left),
        "empty": sum(bool(before[k]) and not after[k] for k in written),
        "with code": len(coded),
        "code kept": len(kept),
        "verdict": verdict,
        "lost": lost[:5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="the run that translates")
    parser.add_argument("--files", type=Path, required=True, help="the real files")
    parser.add_argument("--out", type=Path, help="keep the translations here")
    parser.add_argument(
        "--target", help="the target language, where the run does not record it (names en: es:)"
    )
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="vaswani-packages-"))
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "vaswani.cli", "translate", "--checkpoint", args.checkpoint]
    command += ["--beam-size", "1", *(["--target", args.target] if args.target else [])]
    rows = []
    for source in sorted(p for p in args.files.rglob("*") if p.suffix in READERS):
        output = out / source.name
        done = run([*command, "--input", str(source), "--output", str(output)])
        if done.returncode:
            rows.append({"file": source.name, "verdict": f"vaswani: {done.stderr.strip()[-200:]}"})
            continue
        rows.append(measure(source, output))
        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    print(
        "\n| file | values | changed | left untranslated | empty | with code | code kept | tool |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        keys = ("values", "changed", "left untranslated", "empty", "with code", "code kept")
        cells = [r.get(k, "") for k in keys]
        print(f"| {r['file']} | " + " | ".join(map(str, cells)) + f" | {r['verdict']} |")


if __name__ == "__main__":
    main()
