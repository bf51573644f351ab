"""Code inside text (placeholders, markup, URLs, accelerators) never reaches the model and comes
back exactly once, whatever the model answers; a translation that still breaks a check is not
written."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import Mirror
from vaswani.documents.protect import protect
from vaswani.documents.spans import DEFAULT, NONE, ProtectError, Protection, spans
from vaswani.translation import pipeline
from vaswani.translation.request import Request

C = Protection(DEFAULT | {"printf"})
PY = Protection(DEFAULT | {"python"})


ANY = Protection()


def translated(texts, protect=ANY, model=None):
    done = pipeline.translate(model or Mirror(), texts, Request(protect=protect))
    return [found[0] if found else None for found in done.found]


@pytest.mark.parametrize(
    ("text", "protection", "kept"),
    [
        ("Invalid time period %s", C, ["%s"]),
        ("%1$s of %2$s, %-*d left, 100%%", C, ["%1$s", "%2$s", "%-*d", "%%"]),
        ("Copied %zu bytes at %'.2f MB/s", C, ["%zu", "%'.2f"]),
        ("Hello %(name)s, you have {count} new messages", PY, ["%(name)s", "{count}"]),
        ("Value {0} and {name!r:>10}", Protection(), ["{0}", "{name!r:>10}"]),
        ("Page %1 of %2", Protection(), ["%1", "%2"]),
        ("Set $HOME and ${prefix} with $(ARG1) in {{ user.name }}", Protection(), ["$HOME"]),
        ("Welcome to %PRODUCTNAME today", Protection(), ["%PRODUCTNAME"]),
        ("First line\\nsecond\\tcolumn", Protection(), ["\\n", "\\t"]),
        ("See https://example.org/a?b=1 or mail help@example.org", Protection(), ["https://"]),
        ("Look in /usr/share/locale and ~/.config/app now", Protection(), ["/usr/share/locale"]),
        ("Run `make install` first", Protection(), ["`make install`"]),
        ('Visit <a href="https://example.org">our site</a> for help.', Protection(), ["<a href"]),
    ],
)
def test_each_syntax_is_taken_out_and_put_back_once(text, protection, kept):
    protected = protect(text, protection)
    for span in spans(text, protection):
        assert span.text not in protected.text  # the model never sees it
    out = translated([text], protection)[0]
    assert out.unsafe is None and out.origin == "model"
    for piece in kept:
        assert out.text.count(piece) == text.count(piece), out.text
    assert sorted(s.text for s in spans(out.text, protection)) == sorted(
        s.text for s in spans(text, protection)
    )


def test_printf_directives_keep_their_order_wherever_the_words_go():
    # The mirror reverses the words; %s and %d must still come in their order.
    out = translated(["From %s copied %d files to %s"], C)[0].text
    assert [s.text for s in spans(out, C)] == ["%s", "%d", "%s"]
    assert out.startswith("TO ")  # the words did move


def test_markup_wraps_the_aligned_words_and_keeps_its_attributes():
    text = 'Visit <a href="https://example.org">our site</a> for help.'
    out = translated([text])[0].text
    assert out.count('<a href="https://example.org">') == 1 and out.count("</a>") == 1
    inside = re.search(r"<a [^>]*>(.*?)</a>", out).group(1)
    assert set(inside.split()) == {"OUR", "SITE"}  # the words the link wrapped


def test_accelerator_goes_on_a_letter_of_the_aligned_word_exactly_once():
    marker = Protection(accelerator="_")
    out = translated(["Save _As now"], marker)[0].text
    assert out.count("_") == 1 and "_AS" in out
    out = translated(["_Quit"], marker)[0].text
    assert out == "_QUIT"


def test_a_text_of_nothing_but_code_is_kept_as_it_is():
    found = translated(["%s: %s", "{0}", "<br/>"], C)
    assert [f.text for f in found] == ["%s: %s", "{0}", "<br/>"]
    assert {f.origin for f in found} == {"kept"}


def test_code_the_model_makes_up_is_dropped_before_anything_is_placed():
    model = Mirror()
    model.extra = " %d {x} <b>"  # a model trained on catalogs, adding their code anywhere
    out = translated(["Copy %s now", "Plain text"], C, model)
    assert [o.text for o in out] == ["NOW COPY %s", "TEXT PLAIN"]  # %s after "copy"
    assert [o.unsafe for o in out] == [None, None]


def test_a_translation_that_breaks_a_check_is_the_source_marked_unsafe():
    model = Mirror()
    model.extra = " 5%q"  # a % that no syntax reads, but printf would
    out = translated(["Copy %s now", "Plain text", "Line %s\nand %d"], C, model)
    assert [o.text for o in out] == ["Copy %s now", "Plain text", "Line %s\nand %d"]
    assert [o.unsafe for o in out] == ["placeholders"] * 3


def test_a_line_of_nothing_but_code_and_the_alignment_of_the_text_as_it_was():
    done = pipeline.translate(Mirror(), ["Title %d\n%s\nThe end"], Request(protect=C, align=True))
    assert done.found[0][0].text == "TITLE %d\n%s\nEND THE"
    assert done.alignments[0] == [(0, 0), (3, 4), (4, 3)]  # "%d" and "%s" are words of their own


def test_quotes_are_the_languages_and_a_span_goes_back_inside_them():
    protected = protect("Member '%s' does not exist in '%s'", C)
    assert protected.text == "Member '' does not exist in ''"  # the model sees the quotes
    french = "le membre «\xa0\xa0» n'existe pas dans «\xa0\xa0»"
    links = [(0, 1), (1, 2), (2, 3), (3, 5), (4, 6), (5, 7), (6, 8)]
    out = protected.place(french, links).text
    assert out == "le membre «\xa0%s\xa0» n'existe pas dans «\xa0%s\xa0»"


def test_code_stays_on_its_line():
    text = "Batch file contents:%s\n\t%s\n"
    out = translated([text], C)[0]
    assert out.unsafe is None and out.text == "CONTENTS:%s FILE BATCH\n\t%s\n"


def test_nothing_protected_when_asked():
    text = "Copy %s now"
    assert protect(text, NONE).text == text
    assert translated([text], NONE)[0].text == "NOW %S COPY"


def test_a_pattern_of_ones_own_and_a_bad_one():
    mine = Protection(patterns=(r"@\w+@",))
    out = translated(["Version @VERSION@ is out"], mine)[0].text
    assert out.count("@VERSION@") == 1
    with pytest.raises(ProtectError, match="not a regular expression"):
        Protection(patterns=("(unclosed",))
    # a group named as a syntax, or as another pattern's, is the user's own
    named = Protection(patterns=("(?P<url>@x@)", r"(?P<url>#\w+#)"))
    assert [s.text for s in spans("at @x@ and #Ä# now", named)] == ["@x@", "#Ä#"]


WORDS = st.sampled_from(["open", "the", "file", "now", "Save", "all", "of", "it"])
CODE = st.sampled_from(
    ["%s", "%d", "%1$s", "%(name)s", "{count}", "{0}", "%1", "$HOME", "https://x.org/a", "\\n"]
    + ["<br/>", "<b>", "</b>", "`ls`", "/usr/bin/env", "%%", "{{ x }}", "(%s)", "_Open"]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(WORDS, CODE), min_size=1, max_size=12),
    st.sampled_from(["", ".", ":", ","]),
    st.randoms(use_true_random=False),
)
def test_any_answer_of_the_model_keeps_every_span_once(parts, end, rng):
    text = " ".join(parts) + end
    protected = protect(text, PY)
    plain = protected.text.split()
    # Any translation: words dropped, repeated, moved, invented; any alignment.
    answer = [w.upper() for w in plain if rng.random() < 0.8] + ["NEU"] * rng.randint(0, 2)
    rng.shuffle(answer)
    links = [
        (rng.randrange(len(plain)), rng.randrange(len(answer)))
        for _ in range(rng.randint(0, 6))
        if plain and answer
    ]
    placed = protected.place(" ".join(answer), links)
    if not placed.text.strip():  # every word dropped: an empty translation is never written
        assert protected.check(placed.text) == "empty"
    else:
        assert protected.check(placed.text) is None, (text, placed.text)


def test_icu_messages_keep_their_syntax_and_translate_their_arms():
    text = "You have {count, plural, =0 {no files} one {# file} other {# files in {dir}}}."
    protected = protect(text, Protection())
    assert "{" not in protected.text and "#" not in protected.text
    assert protected.text.split() == ["You", "have", "no", "files", "file", "files", "in."]
    n = len(protected.text.split())
    out = protected.place(protected.text.upper(), [(i, i) for i in range(n)]).text
    assert protected.check(out) is None
    assert "=0 {NO FILES}" in out and "one {# FILE}" in out and "other {# FILES IN}" in out
    # An answer whose words leave an arm's braces (text between arms) is caught, not written.
    assert protected.check(out.replace("} other", "}. other")) == "placeholders"


def test_hostile_strings_give_one_clear_result():
    for text in ["{", "}{", "{{{x}}}", "%", "%(", "<b>unclosed", "</i>stray", "<b><i>x</b></i>"]:
        source = f"Open {text} now"
        out = translated([source], PY)[0]
        assert out.unsafe is None or out.text == source
        assert protect(source, PY).check(out.text) is None, out.text
    icu = "{count, plural, one {{n, select, x {# file}}} other {# files}}"
    out = translated([f"You have {icu}"])[0]
    assert out.unsafe is None and out.text.count("{") == icu.count("{")
    many = " ".join(f"word{k} %s" for k in range(20_000))  # thousands of spans in one string
    protected = protect(many, C)
    assert len(protected.pieces) == 20_000 and "%" not in protected.text
    placed = protected.place(protected.text.upper(), [(k, k) for k in range(20_000)])
    assert protected.check(placed.text) is None and placed.text.count("%s") == 20_000
    lines = protect("\n".join(f"word{k} %s" for k in range(20_000)), C)  # a line each
    placed = lines.place(lines.text.upper(), [(k, k) for k in range(20_000)])
    assert lines.check(placed.text) is None and placed.text.count("%s") == 20_000
    markers = Protection(DEFAULT | {"printf"}, accelerator="_")
    assert protect("_a %s " * 20_000, markers).accelerator is None  # 20,000 markers: none is one
