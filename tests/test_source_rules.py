"""Rules the whole source tree keeps: nothing unpickles code on load, the model package stays free
of training, data and CLI code, and functions and modules stay short enough to read."""

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "vaswani"


def test_every_torch_load_is_weights_only():
    offenders = []
    for path in SRC.rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"torch\.load\(", line) and "weights_only=True" not in line:
                offenders.append(f"{path.relative_to(SRC)}:{number}")
    assert not offenders, f"torch.load without weights_only=True: {offenders}"


def test_the_model_never_imports_training_data_or_cli_code():
    pattern = re.compile(r"^\s*(from|import)\s+vaswani\.(train|data|decode|cli)\b", re.M)
    for path in (SRC / "model").rglob("*.py"):
        match = pattern.search(path.read_text(encoding="utf-8"))
        assert match is None, f"{path.name} imports {match.group(0).strip()}"


def test_functions_and_modules_stay_short_enough_to_read():
    import ast

    long_functions, long_modules = [], []
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if lines > 500 and "Over 500 lines on purpose" not in docstring:
            long_modules.append(f"{path.relative_to(SRC)} ({lines})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 60:
                    long_functions.append(f"{path.relative_to(SRC)}:{node.name} ({length})")
    assert not long_functions, f"functions over 60 lines: {long_functions}"
    assert not long_modules, f"modules over 500 lines without a reason at the top: {long_modules}"


def test_files_vaswani_reads_from_directories_go_through_one_reader():
    """JSON and text files named inside run, data, checkpoint and model directories are read by
    vaswani.files (read_json, read_text): a damaged one is one line naming the file and where,
    never a JSONDecodeError or UnicodeDecodeError. Parsing what is not a file is allowed: a
    request body, a flag's value, a tokenizer serialised in memory, a file of the package."""
    not_files = ("body.decode", "json.loads(value)", ".to_str()", "resources.files(", "loads(line)")
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "files.py" and path.parent == SRC:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"json\.loads?\(|\.read_text\(", line) and not any(
                allowed in line for allowed in not_files
            ):
                offenders.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert not offenders, "read these with vaswani.files.read_json / read_text:\n" + "\n".join(
        offenders
    )
