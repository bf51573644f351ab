"""Every translation path's output, written into one directory, so that a change meant to leave
outputs alone can be checked byte for byte: run it before and after, then `diff -r BEFORE AFTER`.

The paths: `vaswani translate` on lines (beam 4, greedy, 2-best, JSON lines with alignments, a
glossary with a memory and fuzzy matches, a paragraph split into sentences and not), on files of
every document format (DOCX, ODT, HTML, Markdown, SRT, PO, XLIFF; a PO with a
glossary and --min-confidence), `vaswani evaluate --output`, the Python API, and a server over
vaswani's /translate (alignments, a request's glossary, no splitting) and LibreTranslate's
(alternatives, HTML). All in fp32, so that no precision is measured into the run. Texts come from
a prepared dataset's test split; timings and paths are left out of what is compared.

    python benchmarks/pipeline_outputs.py --checkpoint RUN --data DATA --out before/
    (change the code)
    python benchmarks/pipeline_outputs.py --checkpoint RUN --data DATA --out after/
    diff -r before/ after/
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from xml.sax.saxutils import escape

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers_files import docx, odt  # noqa: E402
from helpers_files import run as docx_run  # noqa: E402
from vaswani.data import PreparedData  # noqa: E402

FP32 = ("--precision", "fp32")
VARIES = ("sentences/s", "tokens/s", " s ", "into ", " from ")
"""Lines of a command's output that hold timings or this run's paths."""


def inputs(lines: list[str], folder: Path) -> dict[str, Path]:
    """The input files, made from `lines` (40 or more)."""
    folder.mkdir(parents=True, exist_ok=True)
    made = {
        "lines.txt": "\n".join(lines[:40]) + "\n",
        "glossary.tsv": "file\tDatei\nwindow\tFenster\nerror\tFehler\n",
        "memory.tsv": f"{lines[0]}\tMEMORY ANSWER\n{lines[1]}\tZWEITE\n",
        "a.html": "<html><body>"
        + "".join(
            f"<p>{escape(t[:15])}<b>{escape(t[15:30])}</b>{escape(t[30:])}</p>"
            for t in lines[10:20]
        )
        + "<pre>keep</pre></body></html>",
        "a.md": f"# {lines[0]}\n\n{' '.join(lines[2:5])}\n\n```\ncode\n```\n\n- {lines[6]}\n",
        "a.srt": "".join(
            f"{i + 1}\n00:00:0{i},000 --> 00:00:0{i},900\n{t}\n\n" for i, t in enumerate(lines[:8])
        ),
        "a.po": 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        + "".join(f'msgid {json.dumps(t)}\nmsgstr ""\n\n' for t in lines[20:30])
        + 'msgid "one file"\nmsgid_plural "%d files"\nmsgstr[0] ""\nmsgstr[1] ""\n',
        "a.xlf": '<?xml version="1.0"?><xliff version="1.2" '
        'xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="en" '
        'target-language="de" datatype="plaintext" original="x"><body>'
        + "".join(
            f'<trans-unit id="{i}"><source>{escape(t[:10])}<g id="1">{escape(t[10:25])}</g>'
            f"{escape(t[25:])}</source></trans-unit>"
            for i, t in enumerate(lines[30:36])
        )
        + "</body></file></xliff>",
    }
    for name, text in made.items():
        (folder / name).write_text(text, encoding="utf-8")
    runs = "".join(f"<w:p>{docx_run(t[:20], True)}{docx_run(t[20:])}</w:p>" for t in lines[5:15])
    (folder / "a.docx").write_bytes(docx(runs))
    (folder / "a.odt").write_bytes(
        odt("".join(f"<text:p>{escape(t)}</text:p>" for t in lines[5:12]))
    )
    return {name: folder / name for name in [*made, "a.docx", "a.odt"]}


def command(out: Path, name: str, *args: str) -> None:
    """`vaswani ARGS`: its stdout, stderr (timings and paths left out) and exit status."""
    done = subprocess.run([sys.executable, "-m", "vaswani", *args], capture_output=True, text=True)
    kept = [line for line in done.stderr.splitlines() if not any(v in line for v in VARIES)]
    stdout = [line for line in done.stdout.splitlines() if not any(v in line for v in VARIES)]
    (out / f"{name}.out").write_text("\n".join(stdout) + f"\nexit {done.returncode}\n")
    (out / f"{name}.err").write_text("\n".join(kept) + "\n")


def served(run: str, files: dict[str, Path], lines: list[str]) -> dict:
    """What a server over `run` (as the pair en:de, with a glossary) answers to four requests."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pair = ["--model", f"en:de={run}", "--glossary", f"en:de={files['glossary.tsv']}"]
    server = subprocess.Popen(
        [sys.executable, "-m", "vaswani", "serve", *pair, *FP32, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def post(body: dict) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/translate",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        for _ in range(120):  # until the model is loaded
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    found = json.loads(answer.read())
                    found.pop("seconds", None)
                    return found
            except urllib.error.HTTPError as error:
                return {"status": error.code, "body": error.read().decode()}
            except OSError:
                time.sleep(1)
        raise RuntimeError("the server did not answer")

    paragraph = " ".join(lines[2:5])
    pair_of = {"source": "en", "target": "de"}
    try:
        return {
            "native": post(
                {"texts": [*lines[:12], paragraph], **pair_of, "alignments": True}
                | {"glossary": {"menu": "Menü"}}
            ),
            "native_whole": post(
                {"texts": [paragraph, ""], **pair_of, "beam_size": 2, "split": False}
            ),
            "libre": post({"q": [*lines[:6], paragraph], **pair_of, "alternatives": 2}),
            "libre_html": post(
                {"q": files["a.html"].read_text(), **pair_of, "format": "html", "alternatives": 1}
            ),
        }
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a translation run")
    parser.add_argument("--data", required=True, help="a prepared dataset: its test sentences")
    parser.add_argument("--out", type=Path, required=True, help="where the outputs go")
    args = parser.parse_args()
    lines = [t for t in PreparedData(args.data).text("test")[0] if t.strip()][:40]
    if len(lines) < 40:
        raise SystemExit(f"{args.data}: fewer than 40 test sentences")
    run, out = args.checkpoint, args.out
    files = inputs(lines, out / "inputs")
    translate = ["translate", "--checkpoint", run, *FP32]
    text = ["--input", str(files["lines.txt"])]
    command(out, "lines", *translate, *text)
    command(out, "greedy", *translate, *text, "--beam-size", "1")
    jsonl = ["--output-format", "jsonl", "--alignments"]
    command(out, "jsonl", *translate, *text, *jsonl)
    command(out, "2-best", *translate, *text, "--n-best", "2")
    aids = ["--glossary", str(files["glossary.tsv"]), "--memory", str(files["memory.tsv"])]
    command(
        out, "aids", *translate, *text, "--output-format", "jsonl", *aids, "--fuzzy-threshold", "60"
    )
    paragraph = " ".join(lines[2:5])
    command(out, "paragraph", *translate, paragraph, f"{lines[3]}\n{lines[4]}")
    command(out, "whole", *translate, "--no-split", paragraph)
    for name in ("a.docx", "a.odt", "a.html", "a.md", "a.srt", "a.po", "a.xlf"):
        target = out / f"translated-{name}"
        command(out, name, *translate, "--input", str(files[name]), "--output", str(target))
    glossary = ["--glossary", str(files["glossary.tsv"]), "--min-confidence", "0.3"]
    target = out / "translated-glossary.po"
    command(
        out,
        "po-glossary",
        *translate,
        "--input",
        str(files["a.po"]),
        "--output",
        str(target),
        *glossary,
    )
    reference = ["--src", str(files["lines.txt"]), "--ref", str(files["lines.txt"])]
    evaluated = ["--output", str(out / "evaluated.txt"), "--glossary", str(files["glossary.tsv"])]
    command(out, "evaluate", "evaluate", "--checkpoint", run, *FP32, *reference, *evaluated)
    python = (
        "import json, sys; from vaswani import load_run; "
        f"print(json.dumps(load_run({run!r}).translate(json.loads(sys.argv[1]))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", python, json.dumps(lines[:10])], capture_output=True, text=True
    )
    (out / "python.out").write_text(done.stdout + f"exit {done.returncode}\n")
    answers = served(run, files, lines)
    (out / "serve.json").write_text(json.dumps(answers, indent=1, ensure_ascii=False) + "\n")
    print(f"outputs of every path in {out}; compare two with diff -r")


if __name__ == "__main__":
    main()
