"""Translation memory: exact matches answered verbatim, fuzzy matches reported, read by
prepare's readers, a million entries within bounded memory."""

import json
import subprocess
import sys
import textwrap

import polib

from helpers import Server, translate_cli
from vaswani.serve import Served, ServeSettings, create_app
from vaswani.translation.engine import load_run
from vaswani.translation.memory import Memory
from vaswani.translation.request import Aids
from vaswani.translation.segment import Sentences

TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4"><header srclang="en" datatype="plaintext" segtype="sentence"
 adminlang="en" creationtool="test" creationtoolversion="1" o-tmf="none"/><body>
<tu><tuv xml:lang="en"><seg>42</seg></tuv><tuv xml:lang="de"><seg>die Antwort</seg></tuv></tu>
</body></tmx>
"""


def test_exact_matches_after_whitespace_and_fuzzy_ones_by_score():
    memory = Memory([("Open the  file.", "Öffne die Datei."), ("", "x"), ("y", " ")])
    assert len(memory) == 1  # empty sources and targets are not entries
    known = memory.exact(["  Open the file. ", "Open the file", "Open the file."])
    assert sorted(known) == [0, 2]
    assert known[0][0].text == "Öffne die Datei." and known[0][0].origin == "memory"
    assert known[0][0].confidence == 1.0
    fuzzy = memory.fuzzy(["Open the files.", "Something else"], 80)
    assert list(fuzzy) == [0]
    score, source, target = fuzzy[0]
    assert 80 <= score < 100 and (source, target) == ("Open the file.", "Öffne die Datei.")


def test_tmx_memories_pick_the_languages_asked(tmp_path):
    tmx = tmp_path / "memory.tmx"
    tmx.write_text(TMX)
    assert Memory.read([tmx], "en", "de").entries == {"42": "die Antwort"}
    assert Memory.read([tmx], "de", "en").entries == {"die Antwort": "42"}


def test_a_memory_answers_a_real_model_s_lines_and_marks_them(numbers_run, capsys, tmp_path):
    tsv = tmp_path / "memory.tsv"
    tsv.write_text("42\tdie Antwort\n")
    code, out, err = translate_cli(
        capsys,
        numbers_run,
        "--memory",
        str(tsv),
        "--fuzzy-threshold",
        "50",
        "--output-format",
        "jsonl",
        "42",
        "43",
        "271493!  42",
    )
    assert code == 0 and "translation memory: 1 entries" in err
    first, second, third = (json.loads(line) for line in out.splitlines())
    assert first == {"translation": "die Antwort", "confidence": 1.0, "origin": "memory"}
    assert second["fuzzy_match"] == {"score": 50.0, "source": "42", "target": "die Antwort"}
    assert "origin" not in second and second["translation"] != "die Antwort"
    assert third["translation"].endswith(" die Antwort")  # its second sentence from the memory


def test_the_server_answers_from_its_memory(numbers_run):
    run = load_run(numbers_run)
    aids = Aids(memory=Memory([("42", "die Antwort")]), fuzzy_threshold=60)
    served = Served(run, aids=aids)
    server = Server(create_app(settings=ServeSettings(precision="fp32"), served=[served]))
    try:
        status, body = server.request("POST", "/translate", {"texts": ["42", "421"]})
        assert status == 200, body
        assert body["translations"][0] == "die Antwort"
        assert body["origins"] == ["memory", "model"] and body["confidences"][0] == 1.0
        assert body["fuzzy_matches"][1]["source"] == "42"
        status, body = server.request("POST", "/translate", {"texts": ["42"]})
        assert status == 200 and body["translations"] == ["die Antwort"]  # no model call
    finally:
        server.stop()


def test_a_million_entries_within_bounded_memory(tmp_path):
    path = tmp_path / "big.tsv"
    with path.open("w") as out:
        for i in range(1_000_000):
            out.write(f"sentence number {i} of the memory\tSatz Nummer {i} des Speichers\n")
    script = textwrap.dedent(
        f"""
        from vaswani.translation.memory import Memory
        memory = Memory.read([{str(path)!r}])
        assert len(memory) == 1_000_000
        assert memory.exact(["sentence number 999999 of the memory"])[0][0].text.endswith("999999 des Speichers")
        # this process's own peak: VmHWM starts afresh at exec, where ru_maxrss keeps the peak
        # of the forked test process (over 1 GiB late in the suite)
        status = open("/proc/self/status").read()
        print(int(status.split("VmHWM:")[1].split()[0]) // 1024)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    peak_mib = int(done.stdout.split()[-1])
    assert peak_mib < 1024, f"{peak_mib} MiB for a 60 MB memory"


def test_a_message_of_two_sentences_is_answered_whole(numbers_run, capsys, tmp_path):
    memory = tmp_path / "approved.po"
    memory.write_text('msgid "271493! 42."\nmsgstr "Zwei Sätze. Ein Eintrag."\n')
    po = tmp_path / "app.po"
    po.write_text('msgid "271493!  42."\nmsgstr ""\n\nmsgid "271493! 7."\nmsgstr ""\n')
    out = tmp_path / "app.de.po"
    code, _, err = translate_cli(
        capsys, numbers_run, "--memory", str(memory), "--input", str(po), "--output", str(out)
    )
    assert code == 0, err
    entries = {e.msgid: e.msgstr for e in polib.pofile(str(out))}
    assert entries["271493!  42."] == "Zwei Sätze. Ein Eintrag."
    assert entries["271493! 7."] and "Eintrag" not in entries["271493! 7."]
    memory = Memory([("It is red. It is blue.", "Rot. Blau.")])
    sentences = memory.unsplit(Sentences.of(["It is red.  It is blue.", "It is red. It is old."]))
    assert [len(text.sentences) for text in sentences.texts] == [1, 2]
