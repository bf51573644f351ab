"""Outputs that would destroy what a command reads: an output that is, or is inside, an input, a
dataset or a run is refused whatever --force says; two inputs that would be written to one name
are refused; an output that is a device or a pipe is written into, never replaced."""

import os
import shutil
import stat
import subprocess
import sys
import threading

from helpers import cli, translate_cli


def test_backtranslate_never_writes_over_its_input(numbers_run, tmp_path, capsys):
    mono = tmp_path / "mono.de"
    mono.write_text("zwölf\ndreizehn\n")
    args = ["--checkpoint", str(numbers_run), "--input", str(mono)]
    code, _, err = cli(capsys, "backtranslate", *args, "--output", str(mono), "--force")
    assert code == 2 and "would write over --input" in err, err
    assert mono.read_text() == "zwölf\ndreizehn\n"
    inside = numbers_run / "bt.tsv"
    code, _, err = cli(capsys, "backtranslate", *args, "--output", str(inside))
    assert code == 2 and "the reverse model" in err and not inside.exists()


def test_distill_never_replaces_the_data_or_the_teacher(
    numbers_run, numbers_data, tmp_path, capsys
):
    project = tmp_path / "project"
    shutil.copytree(numbers_data, project / "data")
    (project / "notes.txt").write_text("mine")
    teacher = ["--teacher", str(numbers_run)]
    data = ["--data", str(project / "data")]
    code, _, err = cli(capsys, "distill", *teacher, *data, "--out", str(project), "--force")
    assert code == 2 and "would write over the dataset" in err, err
    assert (project / "notes.txt").read_text() == "mine" and (project / "data/meta.json").exists()
    before = sorted(p.name for p in numbers_run.iterdir())
    code, _, err = cli(capsys, "distill", *teacher, *data, "--out", str(numbers_run), "--force")
    assert code == 2 and "would write over the teacher" in err, err
    assert sorted(p.name for p in numbers_run.iterdir()) == before


def test_two_inputs_of_one_name_are_refused_for_an_output_dir(numbers_run, tmp_path, capsys):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.html").write_text(f"<p>{folder}</p>")
    inputs = [str(tmp_path / "a/x.html"), str(tmp_path / "b/x.html")]
    out = tmp_path / "out"
    code, _, err = translate_cli(capsys, numbers_run, "--input", *inputs, "--output-dir", str(out))
    assert code == 2 and "several inputs are named x.html" in err and not out.exists(), err


def test_an_output_that_is_a_fifo_is_written_into(numbers_run, tmp_path, capsys):
    expected = translate_cli(capsys, numbers_run, "4711")[1]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    code, _, err = translate_cli(capsys, numbers_run, "4711", "--output", str(fifo))
    reader.join(timeout=60)
    assert code == 0, err
    assert received == [expected.encode()] and expected.strip()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the pipe, not a file in its place


def test_an_output_of_dev_stdout_goes_to_stdout_and_dev_null_stays(numbers_run, tmp_path):
    for output in ("/dev/stdout", "/dev/null"):
        args = ["translate", "--checkpoint", str(numbers_run), "4711", "--output", output]
        args += ["--precision", "fp32"]  # no decoding.json written into the shared run
        done = subprocess.run(
            [sys.executable, "-m", "vaswani", *args], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert bool(done.stdout.strip()) == (output == "/dev/stdout"), done.stdout
    assert os.path.islink("/dev/stdout") and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_an_output_that_is_a_socket_is_refused(numbers_run, tmp_path, capsys):
    import socket

    where = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(where))
    try:
        code, _, err = translate_cli(capsys, numbers_run, "12", "--output", str(where))
        assert code == 2 and "is not a regular file" in err, err
    finally:
        server.close()
