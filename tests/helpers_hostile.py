"""What the hostile-input tests share: a run to damage without touching the session's, a JSON
file edited in place, a file outside the place the user named."""

import json
import shutil


def copy_run(run, tmp_path, name="copy"):
    copy = tmp_path / name
    shutil.copytree(run, copy, symlinks=True)
    return copy


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def outside_file(tmp_path, content=b"OUTSIDE"):
    target = tmp_path / "outside.bin"
    target.write_bytes(content)
    return target
