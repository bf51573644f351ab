"""Corpus formats (TMX, XLIFF, PO, MO, JSONL), several corpora in one dataset, cleaning, and
damaged or hostile files: pairs read, counts kept, one line for what cannot be read."""

import json
from collections import Counter
from pathlib import Path

import polib
import pytest

from helpers import cli
from vaswani.data import PrepareOptions
from vaswani.data.clean import normalised
from vaswani.data.corpora import DataError
from vaswani.data.readers import ReadOptions, open_corpora
from vaswani.data.readers.gettext import read_po
from vaswani.data.readers.xml import read_tmx, read_xliff
from vaswani.languages import language_matches
from vaswani.prepare import prepare

LO_CATALOGS = Path("/usr/lib/libreoffice/program/resource/de")


def pairs(reader):
    return list(reader)


TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4">
  <header srclang="en-US" datatype="plaintext" segtype="sentence" adminlang="en" o-tmf="x"
          creationtool="t" creationtoolversion="1"/>
  <body>
    <tu><tuv xml:lang="en-US"><seg>Open the <bpt i="1">&lt;b&gt;</bpt>file<ept i="1">&lt;/b&gt;</ept>.</seg></tuv>
        <tuv xml:lang="ES-es"><seg>Abra el <bpt i="1">&lt;b&gt;</bpt>archivo<ept i="1">&lt;/b&gt;</ept>.</seg></tuv>
        <tuv xml:lang="fr_FR"><seg>Ouvrez le fichier.</seg></tuv></tu>
    <tu><tuv xml:lang="en-GB"><seg>Save <hi>now</hi><ph x="1">{0}</ph></seg></tuv>
        <tuv xml:lang="es_MX"><seg>Guarde <hi>ahora</hi><ph x="1">{0}</ph></seg></tuv></tu>
    <tu><tuv xml:lang="en"><seg>Only English</seg></tuv>
        <tuv xml:lang="fr"><seg>Seulement français</seg></tuv></tu>
  </body>
</tmx>
"""


def test_tmx_pairs_languages_by_region_and_case_and_strips_or_keeps_codes(tmp_path):
    path = tmp_path / "memory.tmx"
    path.write_text(TMX)
    dropped = Counter()
    assert pairs(read_tmx(path, None, "es", dropped)) == [
        ("Open the file.", "Abra el archivo."),
        ("Save now", "Guarde ahora"),
    ]  # the source language from the header, en-US: its language, en, matches en-GB too
    assert dropped == {"a language missing": 1}
    kept = pairs(read_tmx(path, "EN", "fr-fr", Counter(), markup="keep"))
    assert kept == [("Open the <b>file</b>.", "Ouvrez le fichier.")]
    with pytest.raises(DataError, match=r"no unit has both en and de; its languages: en-US \(1\)"):
        pairs(read_tmx(path, "en", "de", Counter()))


def test_language_tags_match_by_language_or_exact_region():
    assert language_matches("es-ES", "es") and language_matches("ES", "es")
    assert language_matches("es_MX", "ES") and not language_matches("pt-PT", "pt-BR")
    assert language_matches("pt_br", "pt-BR") and not language_matches("esp", "es")


XLIFF12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" target-language="de" datatype="plaintext" original="ui">
    <body>
      <group id="g">
        <trans-unit id="1"><source>Print <x id="1"/>page</source><target>Seite <x id="1"/>drucken</target></trans-unit>
      </group>
      <trans-unit id="2"><source>Close</source></trans-unit>
      <trans-unit id="3"><source>Help</source><target state="new"></target></trans-unit>
      <trans-unit id="4"><source><g id="a">Bold</g> text</source><target><g id="a">Fetter</g> Text</target></trans-unit>
    </body>
  </file>
</xliff>
"""

XLIFF20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en" trgLang="de">
  <file id="f">
    <unit id="1">
      <segment><source>One.</source><target>Eins.</target></segment>
      <segment><source>Two <pc id="p">words</pc><ph id="x"/></source><target>Zwei <pc id="p">Wörter</pc></target></segment>
    </unit>
    <unit id="2"><segment state="initial"><source>Untranslated</source></segment></unit>
  </file>
</xliff>
"""


def test_xliff_1_2_and_2_0_read_translated_units_and_count_the_rest(tmp_path):
    (tmp_path / "a.xlf").write_text(XLIFF12)
    (tmp_path / "b.xliff").write_text(XLIFF20)
    dropped = Counter()
    assert pairs(read_xliff(tmp_path / "a.xlf", dropped)) == [
        ("Print page", "Seite drucken"),
        ("Bold text", "Fetter Text"),
    ]
    assert dropped == {"untranslated": 2}
    dropped = Counter()
    assert pairs(read_xliff(tmp_path / "b.xliff", dropped)) == [
        ("One.", "Eins."),
        ("Two words", "Zwei Wörter"),
    ]
    assert dropped == {"untranslated": 1}


def catalog():
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Plural-Forms": "nplurals=2;"}
    po.append(polib.POEntry(msgid="Open", msgstr="Öffnen"))
    po.append(polib.POEntry(msgctxt="menu", msgid="File", msgstr="Datei"))
    po.append(polib.POEntry(msgid='Say "hi"\tnow', msgstr='Sag "hallo"\tjetzt'))
    po.append(
        polib.POEntry(
            msgid="%d file", msgid_plural="%d files", msgstr_plural={0: "%d Datei", 1: "%d Dateien"}
        )
    )
    po.append(polib.POEntry(msgid="Guess", msgstr="Raten", flags=["fuzzy"]))
    po.append(polib.POEntry(msgid="Later", msgstr=""))
    po.append(polib.POEntry(msgid="Gone", msgstr="Weg", obsolete=True))
    return po


EXPECTED = [
    ("Open", "Öffnen"),
    ("File", "Datei"),
    ('Say "hi"\tnow', 'Sag "hallo"\tjetzt'),
    ("%d file", "%d Datei"),
    ("%d files", "%d Dateien"),
]


def test_po_and_mo_catalogs_give_the_same_pairs_and_count_what_they_skip(tmp_path):
    po = catalog()
    po.save(str(tmp_path / "de.po"))
    po.save_as_mofile(str(tmp_path / "de.mo"))
    dropped = Counter()
    assert pairs(read_po(tmp_path / "de.po", dropped)) == EXPECTED
    assert dropped == {"fuzzy": 1, "untranslated": 1, "obsolete": 1}
    read = open_corpora([tmp_path / "de.mo"], ReadOptions())
    assert sorted(pairs(read[0].pairs)) == sorted(EXPECTED)  # msgfmt sorts by msgid
    assert read[0].dropped == {}  # compiling left out the fuzzy, obsolete and untranslated ones


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('msgid "a"\nmsgstr "b\\q"\n', r"de.po:2: bad escape \\q"),
        ('msgid "a"\nmsgstr "b\n', "de.po:2: expected a quoted string"),
        ('msgid "a"\nmsgstrr "b"\n', "de.po:2: expected msgctxt, msgid or msgstr"),
        ('"orphan"\n', "de.po:1: a string outside"),
    ],
)
def test_a_damaged_po_is_one_line_with_file_and_line(tmp_path, text, message):
    (tmp_path / "de.po").write_text(text)
    with pytest.raises(DataError, match=message):
        pairs(read_po(tmp_path / "de.po", Counter()))


def test_jsonl_reads_named_fields_and_names_a_bad_line(tmp_path):
    path = tmp_path / "c.jsonl"
    rows = [{"de": "Hallo", "en": "Hello"}, {"de": "Welt", "en": "World", "id": 3}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"de": "x"}\n')
    read = open_corpora([path], ReadOptions(fields=("de", "en"), skip_invalid=True))
    assert pairs(read[0].pairs) == [("Hallo", "Hello"), ("Welt", "World")]
    assert read[0].dropped == {"invalid line": 1}
    with pytest.raises(DataError, match=r"c.jsonl:3: field 'en' is missing \(fields: de\)"):
        pairs(open_corpora([path], ReadOptions(fields=("de", "en")))[0].pairs)


def test_several_corpora_make_one_dataset_with_counts_per_corpus(tmp_path):
    (tmp_path / "a.tsv").write_text(
        "".join(f"number {i}\tNummer {i}\n" for i in range(300)) + "Same\tsame\n"
    )
    catalog().save(str(tmp_path / "b.po"))
    (tmp_path / "c.xlf").write_text(XLIFF12)
    meta = prepare(
        [str(tmp_path / n) for n in ("a.tsv", "b.po", "c.xlf")],
        tmp_path / "data",
        PrepareOptions(vocab_size=300, progress=False),
    )
    corpora = {Path(c["path"]).name: c for c in meta["corpora"]}
    assert corpora["a.tsv"]["kept"] == 300 and corpora["a.tsv"]["dropped"] == {
        "copy of the source": 1
    }
    assert corpora["b.po"]["kept"] == 5 and corpora["b.po"]["dropped"]["fuzzy"] == 1
    assert corpora["c.xlf"] == {**corpora["c.xlf"], "kept": 2, "pairs_read": 4}
    assert meta["pairs_read"] == 301 + 8 + 4
    assert sum(s["pairs"] for s in meta["splits"].values()) <= 307


def test_cleaning_drops_copies_normalised_duplicates_and_held_out_text(tmp_path):
    lines = [f"sentence {i}\tSatz {i}" for i in range(400)]
    lines += ["Sentence 5!\tsatz   5", "Copy me\tcopy me.", "sentence 7\tanders"]
    (tmp_path / "c.tsv").write_text("\n".join(lines) + "\n")
    (tmp_path / "external.txt").write_text("sentence 11\nSATZ 12\n")
    opts = PrepareOptions(
        vocab_size=300,
        progress=False,
        valid_fraction=0.1,
        test_fraction=0.1,
        exclude=(tmp_path / "external.txt",),
    )
    meta = prepare([str(tmp_path / "c.tsv")], tmp_path / "data", opts)
    dropped = meta["dropped_while_reading"]
    assert dropped["copy of the source"] == 1 and dropped["duplicate pair"] == 1
    assert dropped["in an --exclude file"] == 2 - sum(
        normalised(line) in held_out(tmp_path / "data") for line in ("sentence 11", "satz 12")
    )
    train_text = set(decoded_train(tmp_path / "data"))
    assert not train_text & held_out(tmp_path / "data")
    assert dropped.get("in the valid or test split", 0) == (
        "sentence 7" in held_out_sources(tmp_path / "data")
    )
    again = prepare(
        [str(tmp_path / "c.tsv")],
        tmp_path / "raw",
        PrepareOptions(vocab_size=300, progress=False, dedupe="exact", drop_copies=False),
    )
    assert "copy of the source" not in again["dropped_while_reading"]
    assert "duplicate pair" not in again["dropped_while_reading"]


def held_out(data):
    texts = set()
    for split in ("valid", "test"):
        for side in ("src", "tgt"):
            texts |= {normalised(t) for t in (data / f"{split}.{side}.txt").read_text().split("\n")}
    return texts - {""}


def held_out_sources(data):
    return {
        normalised(t)
        for split in ("valid", "test")
        for t in (data / f"{split}.src.txt").read_text().split("\n")
    }


def decoded_train(data):
    from vaswani.data import PreparedData

    prepared = PreparedData(data)
    train = prepared.split("train")
    for i in range(len(train)):
        src, tgt = train.pair(i)
        yield normalised(prepared.src_tokenizer.decode(src.tolist()))
        yield normalised(prepared.tgt_tokenizer.decode(tgt.tolist()))


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE tmx [<!ENTITY a "ha"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>
<tmx version="1.4"><header srclang="en"/><body>
<tu><tuv xml:lang="en"><seg>&d;</seg></tuv><tuv xml:lang="de"><seg>x</seg></tuv></tu></body></tmx>
"""

EXTERNAL = """<?xml version="1.0"?>
<!DOCTYPE tmx [<!ENTITY secret SYSTEM "file://SECRET">]>
<tmx version="1.4"><header srclang="en"/><body>
<tu><tuv xml:lang="en"><seg>&secret;</seg></tuv><tuv xml:lang="de"><seg>x</seg></tuv></tu></body></tmx>
"""


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("laughs.tmx", BILLION_LAUGHS, "refused: the XML declares entities"),
        ("external.tmx", EXTERNAL, "refused: the XML declares entities"),
        ("unclosed.tmx", TMX.replace("</body>", ""), r"unclosed.tmx:\d+:\d+: damaged XML"),
        (
            "mismatch.xlf",
            XLIFF12.replace("</target></trans-unit>", "</source></trans-unit>", 1),
            r"mismatch.xlf:6:\d+: damaged XML \(mismatched tag\)",
        ),
        ("encoding.tmx", TMX.replace('encoding="UTF-8"', 'encoding="UTF-16"'), "damaged XML"),
        ("truncated.mo", None, "truncated MO catalog"),
        ("bad.po", 'msgid "a"\nmsgstr "\\z"\n', r"bad.po:2: bad escape \\z"),
    ],
)
def test_hostile_and_damaged_files_are_one_line_and_write_nothing(
    tmp_path, capsys, name, content, message
):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    path = tmp_path / name
    if content is None:
        catalog().save_as_mofile(str(path))
        path.write_bytes(path.read_bytes()[:-40])
    else:
        path.write_text(content.replace("SECRET", str(secret)))
    args = ["prepare", str(path), "--out", str(tmp_path / "out"), "--tgt-lang", "de"]
    code, out, err = cli(capsys, *args)
    assert code == 2 and err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert __import__("re").search(message, err), err
    assert "TOP-SECRET" not in out + err and not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".out.tmp-*"))


def test_a_directory_of_catalogs_is_read_whole_and_loops_do_not_trap_it(tmp_path):
    (tmp_path / "cats" / "sub").mkdir(parents=True)
    catalog().save_as_mofile(str(tmp_path / "cats" / "a.mo"))
    catalog().save_as_mofile(str(tmp_path / "cats" / "sub" / "b.mo"))
    (tmp_path / "cats" / "sub" / "loop").symlink_to(tmp_path / "cats")
    read = open_corpora([tmp_path / "cats"], ReadOptions(format="mo"))
    assert [Path(c.description["path"]).name for c in read] == ["a.mo", "b.mo"]


@pytest.mark.skipif(not LO_CATALOGS.is_dir(), reason="libreoffice-l10n-de is not installed")
def test_the_libreoffice_catalogs_make_a_real_corpus(tmp_path):
    read = open_corpora([LO_CATALOGS], ReadOptions(format="mo"))
    found = [pair for corpus in read for pair in corpus.pairs]
    assert len(read) >= 20 and len(found) > 20_000
    assert ("Cancel", "Abbrechen") in found


def test_key_set_keeps_every_key_through_its_merges():
    from vaswani.data.clean import KeySet, key

    keys = [key(str(i)) for i in range(150_000)]  # past the first merge into the sorted array
    seen = KeySet()
    for k in keys:
        seen.add(k)
    assert len(seen.older) > 0 and len(seen) == len(set(keys))
    assert all(k in seen for k in keys[::97])
    assert not any(key(f"other {i}") in seen for i in range(2000))


def split_sources(data, split):
    from vaswani.data import PreparedData

    prepared = PreparedData(data)
    part = prepared.split(split)
    return [prepared.src_tokenizer.decode(part.pair(i)[0].tolist()) for i in range(len(part))]


def test_weights_repeat_or_thin_a_corpus_in_training_only(tmp_path):
    (tmp_path / "small.tsv").write_text("".join(f"small {i}\tklein {i}\n" for i in range(200)))
    (tmp_path / "big.tsv").write_text("".join(f"big {i}\tgroß {i}\n" for i in range(1000)))
    inputs = [str(tmp_path / "small.tsv"), str(tmp_path / "big.tsv")]
    opts = PrepareOptions(vocab_size=300, progress=False, valid_fraction=0.1, test_fraction=0.1)
    plain = prepare(inputs, tmp_path / "plain", opts)
    weights = ((str(tmp_path / "small.tsv"), 3.0), (str(tmp_path), 0.5))  # a directory: big.tsv
    weighted = prepare(
        inputs, tmp_path / "weighted", PrepareOptions(**{**vars(opts), "weights": weights})
    )
    plain_train = Counter(s.split()[0] for s in split_sources(tmp_path / "plain", "train"))
    train = Counter(s.split()[0] for s in split_sources(tmp_path / "weighted", "train"))
    assert train["small"] == 3 * plain_train["small"]
    assert 0.4 < train["big"] / plain_train["big"] < 0.6
    assert len(set(split_sources(tmp_path / "weighted", "train"))) == (
        plain_train["small"] + train["big"]
    )
    for split in ("valid", "test"):
        assert weighted["splits"][split]["pairs"] == plain["splits"][split]["pairs"]
    records = {Path(c["path"]).name: c for c in weighted["corpora"]}
    assert records["small.tsv"]["weight"] == 3.0 and records["big.tsv"]["weight"] == 0.5
    assert (
        records["big.tsv"]["dropped"]["left out by --weight"] == plain_train["big"] - train["big"]
    )
    with pytest.raises(
        DataError, match=r"the weights entry .*other.tsv: not one of the corpora read"
    ):
        prepare(
            inputs,
            tmp_path / "x",
            PrepareOptions(**{**vars(opts), "weights": ((str(tmp_path / "other.tsv"), 2.0),)}),
        )
    with pytest.raises(DataError, match="give a weight above 0"):
        prepare(
            inputs, tmp_path / "x", PrepareOptions(**{**vars(opts), "weights": ((inputs[0], 0.0),)})
        )


def test_weight_flag_must_name_a_corpus_and_a_number(tmp_path, capsys):
    (tmp_path / "a.tsv").write_text("a b\tc d\n")
    for bad in ("a.tsv", "a.tsv=lots", "=2"):
        with pytest.raises(SystemExit) as stop:  # argparse's own check of the flag
            cli(
                capsys,
                "prepare",
                str(tmp_path / "a.tsv"),
                "--out",
                str(tmp_path / "out"),
                "--weight",
                bad,
            )
        err = capsys.readouterr().err
        assert stop.value.code == 2 and "give CORPUS=WEIGHT" in err, err


ENGLISH_GERMAN = [
    (
        "The file could not be opened because it is damaged.",
        "Die Datei konnte nicht geöffnet werden, weil sie beschädigt ist.",
    ),
    (
        "Do you want to save the changes to this document before closing?",
        "Möchten Sie die Änderungen an diesem Dokument vor dem Schließen speichern?",
    ),
    (
        "The printer is not responding; check that it is switched on.",
        "Der Drucker antwortet nicht; prüfen Sie, ob er eingeschaltet ist.",
    ),
]


def test_lang_id_drops_untranslated_and_swapped_pairs(tmp_path, capsys):
    good = [(f"{en} ({i})", f"{de} ({i})") for i in range(40) for en, de in ENGLISH_GERMAN]
    untranslated = [(en, en + " Again, in English.") for en, _ in ENGLISH_GERMAN]
    swapped = [(de, en + " Swapped.") for en, de in ENGLISH_GERMAN]
    short = [("OK", "OK."), ("Bitmap", "Bitmap"), ("Sender", "Absender")]  # not judged: kept
    rows = good + untranslated + swapped + short
    (tmp_path / "c.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in rows))
    opts = PrepareOptions(
        vocab_size=300,
        progress=False,
        lang_id=True,
        src_lang="en",
        tgt_lang="de-DE",
        drop_copies=False,
    )
    meta = prepare([str(tmp_path / "c.tsv")], tmp_path / "data", opts)
    dropped = meta["dropped_while_reading"]
    assert dropped["target in the source language"] == len(untranslated)
    assert dropped["source in the target language"] == len(swapped)
    assert sum(s["pairs"] + s["filtered_too_long"] for s in meta["splits"].values()) + sum(
        v for k, v in dropped.items() if k.startswith("in the")
    ) == len(good) + len(short)
    assert meta["cleaning"]["lang_id"] is True
    for flags, message in [
        ([], "--lang-id needs the pair's languages"),
        (["--src-lang", "en", "--tgt-lang", "xx"], "'xx': not a language"),
        (["--src-lang", "en", "--tgt-lang", "en-GB"], "are one language"),
    ]:
        code, _, err = cli(
            capsys,
            "prepare",
            str(tmp_path / "c.tsv"),
            "--out",
            str(tmp_path / "out"),
            "--lang-id",
            *flags,
        )
        assert code == 2 and message in err and not (tmp_path / "out").exists(), err


def test_tokenizer_sample_zero_learns_from_every_pair(tmp_path):
    (tmp_path / "c.tsv").write_text("".join(f"pair {i}\tPaar {i}\n" for i in range(300)))
    meta = prepare(
        [str(tmp_path / "c.tsv")],
        tmp_path / "all",
        PrepareOptions(vocab_size=300, progress=False, tokenizer_sample=0),
    )
    assert meta["tokenizer"]["sample_pairs"] == meta["splits"]["train"]["pairs"]
    few = prepare(
        [str(tmp_path / "c.tsv")],
        tmp_path / "few",
        PrepareOptions(vocab_size=300, progress=False, tokenizer_sample=50),
    )
    assert few["tokenizer"]["sample_pairs"] == 50
    with pytest.raises(DataError, match="tokenizer_sample=-1: must be 0"):
        prepare(
            [str(tmp_path / "c.tsv")],
            tmp_path / "x",
            PrepareOptions(progress=False, tokenizer_sample=-1),
        )
