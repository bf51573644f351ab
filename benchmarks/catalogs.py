"""Real software catalogs translated as a localisation engineer does it, and checked as their
tools check them: `vaswani translate --input X.pot --output X.po` on catalogs the model never saw
(held out by catalog), then for each output

- `msgfmt -c --use-fuzzy` errors (a catalog that does not build once its fuzzy entries are
  accepted; msgfmt skips fuzzy entries otherwise, and vaswani marks what it fills fuzzy),
- translate-toolkit's pofilter checks (printf, python brace format, variables, xmltags,
  escapes, newlines, brackets) failed by the units written as translated, beside the same checks
  on the human translators' own catalog (REFERENCE/X.po),
- units with printf directives whose directives survived (pofilter's printf check), and units
  with one keyboard accelerator (`_`) that kept exactly one,
- units left untranslated (vaswani's check refused them), and chrF against the translators'
  msgstr: of the units translated (`chrf`), and of all (`chrf_all`, a unit left untranslated
  scoring as empty),
- units whose msgid holds code (`CODE_TOKEN`: an identifier, option, variable or call) and
  whose msgstr keeps all of it: vaswani's (`code_kept` of `code_units` translated) beside the
  translators' (`human_code_kept` of `human_code_units`),
- the code vaswani protects by default in prose (`vaswani.documents.spans.CODE`) that the
  translators did not keep in their msgstr (`code_spans_changed` of `code_spans`): the rate at
  which it takes a word for code.

    python benchmarks/catalogs.py --checkpoint RUN --catalogs DIR [--src SRC] [--out DIR]
        [--too-long truncate]

DIR holds X.pot (msgstr empty) and X.po (the translators') for each catalog (`msgunfmt` makes a
PO of an installed .mo, without its `c-format` flags: add them as xgettext would, to a message
with a printf directive, for msgfmt to check formats). `--src` runs another checkout's vaswani
(its `src/`), to compare before and after a change.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

CHECKS = ("printf", "pythonbraceformat", "variables", "xmltags", "escapes", "newlines", "brackets")


def failures(checker, source: str, target: str) -> list[str]:
    """The pofilter checks `target` fails as a translation of `source`."""
    failed = []
    for name in CHECKS:
        try:
            if not getattr(checker, name)(source, target):
                failed.append(name)
        except Exception:  # pofilter signals a failure by raising FilterFailure
            failed.append(name)
    return failed


CODE_TOKEN = re.compile(
    r"(?<![\w-])--?[A-Za-z][\w-]*"  # options
    r"|\$\{?[A-Za-z_]\w*\}?"  # variables
    r"|\b[A-Za-z_][\w.]*\(\)"  # calls
    r"|\b[A-Za-z]\w*_\w+"  # snake_case, CONSTANT_CASE
    r"|\b[A-Za-z_]\w+(?:\.[A-Za-z_]\w*)+"  # dotted.names
)
"""What counts as code in a msgid, for the share of units that keep it (an independent reading:
not the spans vaswani protects)."""


def code_of(text: str, marker: str | None = None) -> list[str]:
    """The code tokens of `text`; not a word with the catalog's accelerator `marker` (`t_ray`)."""
    found = [m.group() for m in CODE_TOKEN.finditer(text)]
    return [t for t in found if not (marker and t.count(marker) == 1 and "." not in t)]


def keeps_code(source: str, target: str, marker: str | None = None) -> bool:
    return all(token in target for token in code_of(source, marker))


def code_spans(text: str, marker: str | None) -> list[str]:
    """The spans of `vaswani.documents.spans.CODE` that the default protection finds."""
    from vaswani.documents.spans import CODE, Protection, spans

    return [s.text for s in spans(text, Protection(accelerator=marker)) if s.syntax in CODE]


def accelerator(text: str) -> int:
    return len(re.findall(r"_\w", text))


def counted(entry, human) -> bool:
    """Whether a unit is scored: one message (not plural) that the translators translated."""
    return not entry.msgid_plural and human is not None and bool(human.msgstr)


def score(pot: Path, out: Path, reference: Path) -> dict:
    import polib
    import sacrebleu
    from translate.filters import checks

    from vaswani.documents.po import accelerator_of

    checker = checks.StandardChecker()
    mine = {(e.msgctxt, e.msgid): e for e in polib.pofile(str(out)) if e.msgid}
    human = {(e.msgctxt, e.msgid): e for e in polib.pofile(str(reference)) if e.msgid}
    stats = dict.fromkeys(
        ["units", "translated", "left", "printf_units", "printf_kept", "accel_units"], 0
    )
    stats |= {"accel_kept": 0, "failed": {}, "human_failed": {}}
    stats |= dict.fromkeys(["code_units", "code_kept", "human_code_units", "human_code_kept"], 0)
    stats |= {"code_spans": 0, "code_spans_changed": 0}
    hyps, refs, everything = [], [], []
    marker = accelerator_of(list(e.msgid for e in mine.values()))
    for key, entry in mine.items():
        if not counted(entry, human.get(key)):
            continue
        stats["units"] += 1
        printf = re.search(r"%[-+ #0'\d.*$lhqjztL]*[diouxXeEfFgGaAcsp]", entry.msgid)
        accel = entry.msgid.count("_") == 1 and accelerator(entry.msgid) == 1
        for name in failures(checker, entry.msgid, human[key].msgstr):
            stats["human_failed"][name] = stats["human_failed"].get(name, 0) + 1
        has_code = bool(code_of(entry.msgid, marker))
        stats["human_code_units"] += has_code
        stats["human_code_kept"] += has_code and keeps_code(entry.msgid, human[key].msgstr, marker)
        found = code_spans(entry.msgid, marker)
        stats["code_spans"] += len(found)
        stats["code_spans_changed"] += sum(span not in human[key].msgstr for span in found)
        if not entry.msgstr:
            stats["left"] += 1
            everything.append("")  # a unit left untranslated scores as empty
            continue
        stats["translated"] += 1
        failed = failures(checker, entry.msgid, entry.msgstr)
        for name in failed:
            stats["failed"][name] = stats["failed"].get(name, 0) + 1
        stats["code_units"] += has_code
        stats["code_kept"] += has_code and keeps_code(entry.msgid, entry.msgstr, marker)
        if printf:
            stats["printf_units"] += 1
            stats["printf_kept"] += "printf" not in failed
        if accel:
            stats["accel_units"] += 1
            stats["accel_kept"] += accelerator(entry.msgstr) == 1
        hyps.append(entry.msgstr)
        refs.append(human[key].msgstr)
        everything.append(entry.msgstr)
    stats["chrf"] = sacrebleu.corpus_chrf(hyps, [refs]).score if hyps else 0.0
    references = [human[k].msgstr for k, e in mine.items() if counted(e, human.get(k))]
    stats["chrf_all"] = sacrebleu.corpus_chrf(everything, [references]).score if hyps else 0.0
    stats["pairs"] = list(zip(everything, references, strict=True))
    msgfmt = subprocess.run(
        ["msgfmt", "-c", "--use-fuzzy", "-o", os.devnull, str(out)], capture_output=True, text=True
    )
    stats["msgfmt_errors"] = sum(
        1
        for line in msgfmt.stderr.splitlines()
        if re.match(r".*:\d+: ", line) and ": warning: " not in line
    )
    stats["msgfmt_fatal"] = msgfmt.returncode != 0
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--catalogs", type=Path, required=True)
    parser.add_argument("--src", type=Path, help="the src/ of the vaswani to run")
    parser.add_argument("--out", type=Path, default=Path("catalogs-out"))
    parser.add_argument(
        "--too-long", default="error", help="translate's --too-long (a toy model's 64 positions)"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if args.src is not None:
        env["PYTHONPATH"] = str(args.src.resolve())
    total: dict = {}
    seconds, pairs = 0.0, []
    for pot in sorted(args.catalogs.glob("*.pot")):
        out = args.out / f"{pot.stem}.po"
        out.unlink(missing_ok=True)
        command = [sys.executable, "-m", "vaswani", "translate", "--checkpoint", args.checkpoint]
        start = time.perf_counter()
        subprocess.run(
            [*command, "--input", str(pot), "--output", str(out), "--too-long", args.too_long],
            check=True,
            env=env,
            stderr=subprocess.DEVNULL,
        )
        seconds += time.perf_counter() - start
        stats = score(pot, out, pot.with_suffix(".po"))
        pairs += stats.pop("pairs")
        print(pot.stem, json.dumps(stats), flush=True)
        for key, value in stats.items():
            if isinstance(value, dict):
                for name, n in value.items():
                    total.setdefault(key, {})[name] = total.get(key, {}).get(name, 0) + n
            elif not key.startswith("chrf"):
                total[key] = total.get(key, 0) + value
        total.setdefault("chrf_by_catalog", {})[pot.stem] = round(stats["chrf"], 1)
        total.setdefault("chrf_all_by_catalog", {})[pot.stem] = round(stats["chrf_all"], 1)
    total["seconds"] = round(seconds, 1)
    import sacrebleu

    hyps, refs = zip(*pairs, strict=True) if pairs else ((), ())
    total["chrf_all_catalogs"] = round(sacrebleu.corpus_chrf(list(hyps), [list(refs)]).score, 2)
    print("total", json.dumps(total, indent=1))


if __name__ == "__main__":
    main()
