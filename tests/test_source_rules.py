"""Rules the whole source tree keeps (../shared/RELIABILITY.md, item 1)."""

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
