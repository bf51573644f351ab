"""End-to-end throughput of whole files: a DOCX of about 100 pages and a PO catalog of 1,000
entries, made from real sentences (a prepared dataset's test split), translated by `vaswani
translate --input FILE --output FILE` as a user runs it (start-up, reading, splitting, beam
search, word alignment, writing), one after the other.

The DOCX has paragraphs of 3-6 sentences, each with one bold word (a run of its own), so that
alignment and placement are part of the time; the PO has one message an entry, half of them
with a plural form.

    python benchmarks/documents_speed.py --checkpoint RUN --data DATA [--pages 100] [--entries 1000]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from xml.sax.saxutils import escape

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers_files import docx  # noqa: E402
from vaswani.data import PreparedData  # noqa: E402

WORDS_A_PAGE = 300


def paragraphs(sentences: list[str], pages: int, seed: int = 0) -> list[str]:
    """Paragraphs of 3-6 sentences (repeating the sentences as needed) to fill `pages`."""
    rng, found, words = random.Random(seed), [], 0
    while words < pages * WORDS_A_PAGE:
        paragraph = " ".join(rng.choice(sentences) for _ in range(rng.randint(3, 6)))
        found.append(paragraph)
        words += len(paragraph.split())
    return found


def docx_of(texts: list[str]) -> bytes:
    body = []
    for text in texts:
        words = text.split()
        k = len(words) // 2
        runs = [" ".join(words[:k]) + " ", words[k], " " + " ".join(words[k + 1 :])]
        body.append(
            "<w:p>"
            + "".join(
                f"<w:r>{'<w:rPr><w:b/></w:rPr>' if i == 1 else ''}"
                f'<w:t xml:space="preserve">{escape(r)}</w:t></w:r>'
                for i, r in enumerate(runs)
            )
            + "</w:p>"
        )
    return docx("".join(body))


def po_of(sentences: list[str], entries: int) -> str:
    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    out = ['msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n']
    for i in range(entries):
        text = sentences[i % len(sentences)]
        if i % 2:
            out.append(
                f'msgctxt "e{i}"\nmsgid {quoted(text)}\nmsgid_plural {quoted(text)}\n'
                'msgstr[0] ""\nmsgstr[1] ""\n'
            )
        else:
            out.append(f'msgctxt "e{i}"\nmsgid {quoted(text)}\nmsgstr ""\n')
    return "\n".join(out)


def timed(run: str, source: Path, extra: list[str]) -> float:
    output = source.with_name("out-" + source.name)
    start = time.perf_counter()
    command = ["translate", "--checkpoint", run, "--input", str(source), "--output", str(output)]
    subprocess.run([sys.executable, "-m", "vaswani", *command, *extra], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--data", required=True, help="a prepared dataset: its test sentences")
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--beam-size", default="4")
    args = parser.parse_args()
    sentences = [s for s in PreparedData(Path(args.data)).text("test")[0] if s.strip()]
    folder = Path(tempfile.mkdtemp())
    texts = paragraphs(sentences, args.pages)
    (folder / "book.docx").write_bytes(docx_of(texts))
    (folder / "app.po").write_text(po_of(sentences, args.entries))
    extra = ["--beam-size", args.beam_size]
    rows = [
        (f"DOCX, {args.pages} pages", "book.docx", sum(len(t) for t in texts)),
        (f"PO, {args.entries} entries", "app.po", None),
    ]
    print("| file | characters | seconds | characters/s |\n| --- | ---: | ---: | ---: |")
    for name, file, chars in rows:
        seconds = timed(args.checkpoint, folder / file, extra)
        if chars is None:  # the PO: each entry's msgid, and msgid_plural of every other one
            chars = sum(
                len(sentences[i % len(sentences)]) * (1 + i % 2) for i in range(args.entries)
            )
        print(f"| {name} | {chars:,} | {seconds:.1f} | {chars / seconds:,.0f} |")


if __name__ == "__main__":
    main()
