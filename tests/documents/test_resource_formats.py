"""The formats apps are localised in: each file translated through `translate_documents` by a
stand-in translator that upper-cases the text outside the code its format protects, then diffed
against its input: only the translatable values change, each format's code survives, and the
target's plural categories and language are written where the format keeps them."""

import difflib
import json
import zipfile
from io import BytesIO

import pytest
import yaml
from lxml import etree

from vaswani.documents.formats import (
    DocumentOptions,
    format_of,
    read_document,
    translate_documents,
)
from vaswani.documents.resources import icu_plurals, plural_categories
from vaswani.documents.spans import Protection, spans


def shouting(texts, alignments, code):
    """Each text upper-cased outside its spans (as a model leaves the protected code)."""
    out = []
    for text, protection in zip(texts, code, strict=True):
        found, pieces, at = spans(text, protection or Protection()), [], 0
        for span in found:
            pieces += [text[at : span.start].upper(), span.text]
            at = span.end
        out.append("".join(pieces) + text[at:].upper())
    return out, [None] * len(texts)


def translated(data: bytes, name: str, language="ru", options=None, translate=shouting) -> bytes:
    document = read_document(data, format_of(__import__("pathlib").Path(name)), name, options)
    return translate_documents([document], translate, language)[0]


def changed(before: bytes, after: bytes) -> tuple[list[str], list[str]]:
    """The lines taken out and put in, by a line diff."""
    old, new = before.decode().splitlines(), after.decode().splitlines()
    diff = list(difflib.unified_diff(old, new, lineterm="", n=0))
    removed = [d[1:] for d in diff if d.startswith("-") and not d.startswith("---")]
    added = [d[1:] for d in diff if d.startswith("+") and not d.startswith("+++")]
    return removed, added


ANDROID = """<?xml version="1.0" encoding="utf-8"?>
<!-- the app's strings -->
<resources xmlns:xliff="urn:oasis:names:tc:xliff:document:1.2">
    <string name="app_name" translatable="false">Notes</string>
    <string name="welcome">Welcome <xliff:g id="user" example="Ann">%1$s</xliff:g>, you have %2$d notes</string>
    <string name="styled">Tap <b>here</b> &amp; wait&#8230;</string>
    <string-array name="sorts">
        <item>By date</item>
        <item>By title</item>
    </string-array>
    <plurals name="deleted">
        <item quantity="one">%d note deleted</item>
        <item quantity="other">%d notes deleted</item>
    </plurals>
    <string name="empty"/>
</resources>
"""


def test_android_strings_change_only_their_text_and_keep_their_code():
    out = translated(ANDROID.encode(), "strings.xml").decode()
    removed, added = changed(ANDROID.encode(), out.encode())
    assert len(removed) == 6 and len(added) == 8  # 4 strings and items, 2 plural items, 2 new
    assert '<string name="app_name" translatable="false">Notes</string>' in out
    assert '<xliff:g id="user" example="Ann">%1$s</xliff:g>, YOU HAVE %2$d NOTES</string>' in out
    assert "TAP <b>HERE</b> &amp; WAIT&#8230;" in out  # entities as they were written
    quantities = [i.get("quantity") for i in etree.fromstring(out.encode()).iter("item")][2:]
    assert quantities == ["one", "few", "many", "other"]
    assert '<item quantity="few">%d NOTES DELETED</item>' in out


def test_android_escapes_are_read_and_an_apostrophe_written_escaped():
    source = '<resources><string name="a">Don\\\'t "stop" now</string></resources>'
    seen = []

    def french(texts, alignments, code):
        seen.extend(texts)
        return ['N\'arrête pas "maintenant"'] * len(texts), [None] * len(texts)

    out = translated(source.encode(), "strings.xml", "fr", translate=french).decode()
    assert seen == ['Don\'t "stop" now']
    assert '<string name="a">N\\\'arrête pas \\"maintenant\\"</string>' in out


def test_an_xml_file_is_read_by_its_root_element():
    xliff = (
        '<?xml version="1.0"?><!-- a job --><xliff version="1.2" '
        'xmlns="urn:oasis:names:tc:xliff:document:1.2"><file source-language="en" '
        'datatype="plaintext" original="x"><body><trans-unit id="1"><source>Open</source>'
        "</trans-unit></body></file></xliff>"
    )
    assert read_document(xliff.encode(), "xml", "job.xml").texts() == ["Open"]
    assert read_document(QT.encode(), "xml", "app.xml").texts() == [
        "&Open %1",
        "%n file(s) deleted",
    ]
    assert read_document(ANDROID.encode(), "xml", "strings.xml").texts()[0].startswith("Welcome")


def test_android_references_to_other_resources_are_not_text():
    source = (
        '<resources><string name="a">@string/app_name</string>'
        '<string name="b">?android:attr/title</string><string name="c">At home</string></resources>'
    )
    document = read_document(source.encode(), "android", "strings.xml")
    assert document.texts() == ["At home"]


def test_android_cdata_keeps_its_markers_and_its_markup():
    source = '<resources><string name="a"><![CDATA[Read <b>this</b> now]]></string></resources>'
    out = translated(source.encode(), "strings.xml").decode()
    assert out == source.replace("Read", "READ").replace("this", "THIS").replace("now", "NOW")


def test_android_plurals_drop_the_categories_a_language_lacks():
    out = translated(ANDROID.encode(), "strings.xml", "ja").decode()
    quantities = [i.get("quantity") for i in etree.fromstring(out.encode()).iter("item")][2:]
    assert quantities == ["other"]
    etree.fromstring(out.encode())


QT = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="en_US">
<context>
    <name>MainWindow</name>
    <message>
        <location filename="../mainwindow.ui" line="14"/>
        <source>&amp;Open %1</source>
        <translation type="unfinished"></translation>
    </message>
    <message numerus="yes">
        <source>%n file(s) deleted</source>
        <translation type="unfinished"><numerusform></numerusform></translation>
    </message>
    <message>
        <source>Done</source>
        <translation>Fertig</translation>
    </message>
</context>
</TS>
"""


def test_qt_ts_fills_unfinished_translations_with_the_target_plural_forms():
    out = translated(QT.encode(), "app.ts", "ru").decode()
    removed, added = changed(QT.encode(), out.encode())
    assert len(removed) == len(added) == 3  # the TS language and two translations
    root = etree.fromstring(out.encode())
    assert root.get("language") == "ru"
    first, numerus, done = root.iter("translation")
    assert first.text == "&OPEN %1" and first.get("type") == "unfinished"
    assert [f.text for f in numerus] == ["%n FILE(S) DELETED"] * 3  # Russian has three forms
    assert done.text == "Fertig"  # translated already: kept
    lupdated = QT.replace('language="en_US"', 'language="fr_FR"').replace(
        "<numerusform></numerusform>", "<numerusform></numerusform>" * 2
    )
    french = etree.fromstring(translated(lupdated.encode(), "app.ts", "fr"))
    assert french.get("language") == "fr_FR"  # names the target already: kept
    assert len(list(french.iter("numerusform"))) == 2  # lupdate's count for French, not CLDR's 3
    spanish = etree.fromstring(translated(QT.encode(), "app.ts", "es"))
    assert len(list(spanish.iter("numerusform"))) == 2  # lrelease's count for Spanish: 2
    plain = translated(QT.encode(), "app.ts", "ru", DocumentOptions(fuzzy=False)).decode()
    assert "<translation>&amp;OPEN %1</translation>" in plain


RESX = """<?xml version="1.0" encoding="utf-8"?>
<root>
  <resheader name="resmimetype"><value>text/microsoft-resx</value></resheader>
  <data name="Greeting" xml:space="preserve">
    <value>Hello {0}, you have {1:N0} messages</value>
    <comment>shown at start</comment>
  </data>
  <data name="Logo" type="System.Drawing.Bitmap, System.Drawing" mimetype="application/x-microsoft.net.object.bytearray.base64"><value>iVBORw0KGgo=</value></data>
  <data name="&gt;&gt;button1.Name" xml:space="preserve"><value>button1</value></data>
</root>
"""


def test_resx_translates_string_values_only():
    out = translated(RESX.encode(), "Strings.resx").decode()
    removed, added = changed(RESX.encode(), out.encode())
    assert removed == ["    <value>Hello {0}, you have {1:N0} messages</value>"]
    assert added == ["    <value>HELLO {0}, YOU HAVE {1:N0} MESSAGES</value>"]


STRINGSDICT = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
\t<key>%d files selected</key>
\t<dict>
\t\t<key>NSStringLocalizedFormatKey</key>
\t\t<string>%#@files@ selected</string>
\t\t<key>files</key>
\t\t<dict>
\t\t\t<key>NSStringFormatSpecTypeKey</key>
\t\t\t<string>NSStringPluralRuleType</string>
\t\t\t<key>NSStringFormatValueTypeKey</key>
\t\t\t<string>d</string>
\t\t\t<key>one</key>
\t\t\t<string>%d file</string>
\t\t\t<key>other</key>
\t\t\t<string>%d files</string>
\t\t</dict>
\t</dict>
</dict>
</plist>
"""


def test_stringsdict_rules_get_the_target_categories():
    out = translated(STRINGSDICT.encode(), "Localizable.stringsdict", "ru").decode()
    assert "<string>%#@files@ SELECTED</string>" in out
    keys = [k.text for k in etree.fromstring(out.encode()).iter("key")][-4:]
    assert keys == ["one", "few", "many", "other"]
    assert "\t\t\t<key>few</key>\n\t\t\t<string>%d FILES</string>\n" in out
    japanese = translated(STRINGSDICT.encode(), "Localizable.stringsdict", "ja").decode()
    assert [k.text for k in etree.fromstring(japanese.encode()).iter("key")][-1:] == ["other"]
    assert "<key>one</key>" not in japanese


PROPERTIES = """# Messages of the app
app.title = My Application
greeting=Hello {0}, it''s {1,number,integer} o''clock
multi = First part \\
        and the rest
accents=Caf\\u00e9 open
empty=
"""


def test_properties_keep_keys_comments_and_escapes():
    out = translated(PROPERTIES.encode(), "messages.properties", "de")
    removed, added = changed(PROPERTIES.encode(), out)
    assert added == [
        "app.title = MY APPLICATION",
        "greeting=HELLO {0}, IT''S {1,number,integer} O''CLOCK",
        "multi = FIRST PART AND THE REST",
        "accents=CAF\\u00c9 OPEN",  # an ASCII file stays ASCII
    ]
    assert len(removed) == 5  # the continued value was two lines


def test_an_ascii_properties_file_gets_escapes_as_java_8_reads_it():
    def umlauts(texts, alignments, code):
        return [f"{t} für Größe" for t in texts], [None] * len(texts)

    source = b"# XMLMessages\nInvalidCharInContent = An invalid character was found.\n"
    out = translated(source, "XMLMessages.properties", "de", translate=umlauts)
    assert out.isascii()  # Properties.load(InputStream) reads ISO-8859-1: no raw UTF-8
    assert b"f\\u00fcr Gr\\u00f6\\u00dfe" in out
    utf8 = "title = Café\n".encode()  # a file with UTF-8 of its own stays UTF-8
    assert "für".encode() in translated(utf8, "m.properties", "de", translate=umlauts)


def test_strings_files_in_utf16_are_written_back_in_utf16():
    source = '/* Title */\n"title" = "Open \\"%@\\" now";\nkey = "Delete %lld files?";\n'
    data = b"\xff\xfe" + source.encode("utf-16-le")
    out = translated(data, "Localizable.strings", "de")
    assert out.startswith(b"\xff\xfe")
    text = out[2:].decode("utf-16-le")
    assert text == source.replace("Open", "OPEN").replace("now", "NOW").replace(
        "Delete", "DELETE"
    ).replace("files?", "FILES?")


def test_json_nested_and_i18next_plural_keys():
    source = (
        '{\n  "menu": {\n    "open": "Open {{name}}",\n    "items_one": "{{count}} item",\n'
        '    "items_other": "{{count}} items"\n  },\n  "list": ["First", "Second"],\n'
        '  "version": 3\n}\n'
    )
    out = translated(source.encode(), "en.json", "ru").decode()
    data = json.loads(out)
    assert data["menu"]["open"] == "OPEN {{name}}" and data["list"] == ["FIRST", "SECOND"]
    assert list(data["menu"]) == ["open", "items_one", "items_few", "items_many", "items_other"]
    removed, added = changed(source.encode(), out.encode())
    assert len(removed) == 4 and len(added) == 6


def test_arb_keeps_metadata_sets_its_locale_and_plural_arms():
    source = (
        '{\n  "@@locale": "en",\n  "hello": "Hello {name}",\n'
        '  "@hello": {"description": "A greeting", "placeholders": {"name": {}}},\n'
        '  "files": "{count, plural, =0{No files} one{One file} other{{count} files}}"\n}\n'
    )
    out = json.loads(translated(source.encode(), "app_en.arb", "pl"))
    assert out["@@locale"] == "pl" and out["hello"] == "HELLO {name}"
    assert out["@hello"] == {"description": "A greeting", "placeholders": {"name": {}}}
    assert out["files"] == (
        "{count, plural, =0{NO FILES} one{ONE FILE} few{{count} FILES} many{{count} FILES} "
        "other{{count} FILES}}"
    )


def test_an_icu_message_is_translated_a_piece_at_a_time_around_its_syntax():
    source = b'{"m": "Found {n, plural, =0 {no file} one {# file} other {# files}} in {dir}"}'
    document = read_document(source, "json", "en.json")
    assert document.texts() == ["Found ", "no file", "# file", "# files", " in {dir}"]
    numbered = [spans(t, p) for t, p in zip(document.texts(), document.protections(), strict=True)]
    assert [[s.text for s in found] for found in numbered] == [[], [], ["#"], ["#"], ["{dir}"]]
    out = json.loads(translate_documents([document], shouting, "pl")[0])["m"]
    assert out == (
        "FOUND {n, plural, =0 {NO FILE} one {# FILE} few {# FILES} many {# FILES} "
        "other {# FILES}} IN {dir}"
    )


def test_icu_plural_arms_follow_the_target_categories():
    message = "You have {n, plural, =0 {no mail} one {# mail} other {# mails}}."
    assert icu_plurals(message, "ja") == "You have {n, plural, =0 {no mail} other {# mails}}."
    arabic = icu_plurals(message, "ar")  # zero, one, two, few, many, other
    assert arabic.count("{# mails}") == 5 and arabic.count("{# mail}") == 1
    assert icu_plurals(message, "xx-unknown") == message
    assert plural_categories("ru") == ("one", "few", "many", "other")


YAML = """en:
  # greetings
  hello: Hello world   # shown first
  quoted: 'It''s here'
  named: "Hi %{name}"
  block: |
    Line one
    Line two
  count: 3
  enabled: true
  items:
    - First item
  files:
    one: "%{count} file"
    other: "%{count} files"
"""


def test_rails_yaml_keeps_keys_and_styles_and_names_the_target():
    out = translated(YAML.encode(), "en.yml", "ru").decode()
    data = yaml.safe_load(out)["ru"]
    assert data["hello"] == "HELLO WORLD" and data["quoted"] == "IT'S HERE"
    assert data["named"] == "HI %{name}" and data["block"] == "LINE ONE\nLINE TWO\n"
    assert data["count"] == 3 and data["enabled"] is True
    assert list(data["files"]) == ["one", "few", "many", "other"]
    assert "  hello: HELLO WORLD   # shown first\n" in out and "  # greetings\n" in out
    removed, added = changed(YAML.encode(), out.encode())
    assert len(removed) == 9 and len(added) == 11


XCSTRINGS = """{
  "sourceLanguage" : "en",
  "strings" : {
    "Hello %@" : {

    },
    "files" : {
      "localizations" : {
        "en" : {
          "variations" : {
            "plural" : {
              "one" : {
                "stringUnit" : {
                  "state" : "translated",
                  "value" : "%lld file"
                }
              },
              "other" : {
                "stringUnit" : {
                  "state" : "translated",
                  "value" : "%lld files"
                }
              }
            }
          }
        }
      }
    },
    "internal" : {
      "shouldTranslate" : false
    }
  },
  "version" : "1.0"
}
"""


def test_string_catalogs_gain_the_target_localization_and_nothing_else():
    out = translated(XCSTRINGS.encode(), "Localizable.xcstrings", "uk").decode()
    removed, added = changed(XCSTRINGS.encode(), out.encode())
    assert removed == [""]  # the empty object Xcode writes with a blank line now has content
    catalog = json.loads(out)["strings"]
    assert catalog["Hello %@"]["localizations"]["uk"]["stringUnit"] == {
        "state": "needs_review",
        "value": "HELLO %@",
    }
    plural = catalog["files"]["localizations"]["uk"]["variations"]["plural"]
    assert list(plural) == ["one", "few", "many", "other"]
    assert "localizations" not in catalog["internal"]


def test_string_catalog_substitutions_are_translated_with_the_target_categories():
    unit = lambda value: {"stringUnit": {"state": "translated", "value": value}}  # noqa: E731
    catalog = {
        "sourceLanguage": "en",
        "strings": {
            "photos": {
                "localizations": {
                    "en": {
                        "stringUnit": {"state": "translated", "value": "%#@p@ in %#@a@"},
                        "substitutions": {
                            "p": {
                                "argNum": 1,
                                "formatSpecifier": "lld",
                                "variations": {
                                    "plural": {
                                        "one": unit("%arg photo"),
                                        "other": unit("%arg photos"),
                                    }
                                },
                            },
                            "a": {
                                "argNum": 2,
                                "formatSpecifier": "lld",
                                "variations": {
                                    "plural": {
                                        "one": unit("%arg album"),
                                        "other": unit("%arg albums"),
                                    }
                                },
                            },
                        },
                    }
                }
            }
        },
        "version": "1.0",
    }
    data = json.dumps(catalog).encode()
    out = json.loads(translated(data, "Localizable.xcstrings", "ru"))
    ru = out["strings"]["photos"]["localizations"]["ru"]
    assert ru["stringUnit"]["value"] == "%#@p@ IN %#@a@"
    photos = ru["substitutions"]["p"]
    assert photos["argNum"] == 1 and photos["formatSpecifier"] == "lld"
    assert list(photos["variations"]["plural"]) == ["one", "few", "many", "other"]
    assert photos["variations"]["plural"]["many"]["stringUnit"]["value"] == "%arg PHOTOS"
    assert (
        out["strings"]["photos"]["localizations"]["en"]
        == catalog["strings"]["photos"]["localizations"]["en"]
    )


def test_i18next_nesting_is_kept():
    out = json.loads(translated(b'{"a": "Press $t(common:ok) to go on"}', "en.json"))
    assert out["a"] == "PRESS $t(common:ok) TO GO ON"


def slides() -> bytes:
    a = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
    p = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
    slide = (
        f"<p:sld {a} {p}><p:cSld><p:spTree><p:sp><p:txBody>"
        '<a:p><a:r><a:t>Costs </a:t></a:r><a:r><a:rPr b="1"/><a:t>fell</a:t></a:r></a:p>'
        '<a:p><a:fld type="slidenum"><a:t>7</a:t></a:fld></a:p>'
        "</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"
    )
    notes = f"<p:notes {a} {p}><a:p><a:r><a:t>Thank the team</a:t></a:r></a:p></p:notes>"
    layout = f"<p:sldLayout {a} {p}><a:p><a:r><a:t>Click to edit</a:t></a:r></a:p></p:sldLayout>"
    out = BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("ppt/presentation.xml", f"<p:presentation {p}/>")
        z.writestr("ppt/slides/slide1.xml", slide)
        z.writestr("ppt/notesSlides/notesSlide1.xml", notes)
        z.writestr("ppt/slideLayouts/slideLayout1.xml", layout)
    return out.getvalue()


def test_pptx_slides_and_notes_are_translated_with_their_runs():
    def upper(texts, alignments, code):
        from vaswani.documents.markup import words

        return [t.upper() for t in texts], [[(i, i) for i in range(len(words(t)))] for t in texts]

    out = zipfile.ZipFile(BytesIO(translated(slides(), "deck.pptx", translate=upper)))
    slide = out.read("ppt/slides/slide1.xml").decode()
    assert "<a:t>COSTS </a:t>" in slide and '<a:rPr b="1"/><a:t>FELL</a:t>' in slide
    assert "<a:t>7</a:t>" in slide  # a field: the slide number
    assert b"THANK THE TEAM" in out.read("ppt/notesSlides/notesSlide1.xml")
    assert b"Click to edit" in out.read("ppt/slideLayouts/slideLayout1.xml")


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
@pytest.mark.parametrize(
    "name", ["strings.xml", "x.resx", "a.stringsdict", "a.properties", "en.yml", "en.json"]
)
def test_a_file_translated_into_itself_comes_back_byte_for_byte(name, bom):
    """With its byte-order mark, where it had one (Visual Studio writes one). Not a Qt .ts: a
    message's translation goes into its own element, source or not."""
    sources = {
        "strings.xml": ANDROID,
        "x.resx": RESX,
        "a.stringsdict": STRINGSDICT,
        "a.properties": PROPERTIES,
        "en.yml": YAML,
        "en.json": '{\n  "a": "Open {{name}}",\n  "b": ["x", 2]\n}\n',
    }
    data = bom + sources[name].encode()

    def same(texts, alignments, code):
        return list(texts), [None] * len(texts)

    assert translated(data, name, language=None, translate=same) == data
    changed = translated(data, name, language=None)  # translated: the mark stays too
    assert changed.startswith(bom) and changed != data
