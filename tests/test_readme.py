"""The README's Python snippets run as written."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_has_python_snippets():
    assert SNIPPETS


@pytest.mark.parametrize("code", SNIPPETS, ids=[f"snippet{i}" for i in range(len(SNIPPETS))])
def test_readme_snippet_runs(code, request, tmp_path):
    if "runs/ding" in code:
        # A snippet about a trained run: the test's trained numbers run, exported as the README's
        # commands above it export runs/ding.
        from vaswani.export import export

        run = request.getfixturevalue("numbers_run")
        export(run, "ctranslate2", tmp_path / "ct2")
        code = code.replace("deploy/ding-ct2", str(tmp_path / "ct2"))
        code = code.replace("runs/ding", str(run)).replace("Das Haus ist klein.", "271493")
    exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
