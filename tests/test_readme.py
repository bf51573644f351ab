"""The manual's Python snippets (README.md and every page of docs/) run as written; the README
stays a front page whose links all lead somewhere."""

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
SNIPPETS = [
    (page, code)
    for page in PAGES
    for code in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
]


def test_the_manual_has_python_snippets():
    assert SNIPPETS


def test_the_readme_is_a_front_page_whose_links_lead_somewhere():
    text = README.read_text(encoding="utf-8")
    assert text.count("\n") <= 300
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#]+\.(?:md|png))\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).is_file(), f"{page.name} links to {target}"
    linked = set(re.findall(r"\]\(docs/([^)]+\.md)\)", text))
    assert linked == {page.name for page in PAGES[1:]}, (
        "every page of docs/ is in the README's table"
    )


@pytest.mark.parametrize(
    "page, code", SNIPPETS, ids=[f"{page.stem}-{i}" for i, (page, _) in enumerate(SNIPPETS)]
)
def test_snippet_runs(page, code, request, tmp_path):
    if "runs/ding" in code:
        # A snippet about a trained run: the test's trained numbers run, exported as the README's
        # commands above it export runs/ding.
        from vaswani.export import export

        run = request.getfixturevalue("numbers_run")
        if "Engine.load" in code:  # it measures --precision auto into the run: not the shared one
            run = Path(shutil.copytree(run, tmp_path / "run"))
        (tmp_path / "brief.html").write_text("<p>271493 <b>12</b></p>", encoding="utf-8")
        code = code.replace('"brief.html"', repr(str(tmp_path / "brief.html")))
        code = code.replace('"brief.en.html"', repr(str(tmp_path / "brief.en.html")))
        export(run, "ctranslate2", tmp_path / "ct2")
        code = code.replace("deploy/ding-ct2", str(tmp_path / "ct2"))
        code = code.replace("runs/ding", str(run)).replace("Das Haus ist klein.", "271493")
    exec(compile(code, str(page), "exec"), {"__name__": "__readme__"})
