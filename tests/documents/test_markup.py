"""Inline markup placed by word alignment: each element once, properly nested, around the words
aligned to those it wrapped; and HTML read into blocks and written back with all else kept."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vaswani.documents.html import HtmlDocument, HtmlError
from vaswani.documents.markup import Element, Tagged, place, words


def tagged(*parts) -> Tagged:
    """Plain text and elements from parts: strings are text, (opening, closing, parts) wrap."""
    text, root = [], Element("")

    def add(parent: Element, items) -> None:
        for item in items:
            if isinstance(item, str):
                text.append(item)
                continue
            opening, closing, inner = item
            element = Element(opening, closing, start=len("".join(text)))
            parent.children.append(element)
            add(element, inner)
            element.end = len("".join(text))

    add(root, parts)
    return Tagged("".join(text), root)


def test_a_tag_goes_around_the_word_aligned_to_the_one_it_wrapped():
    source = tagged("el ", ("<b>", "</b>", ["gran"]), " río")
    assert place(source, "the big river", [(0, 0), (1, 1), (2, 2)]) == "the <b>big</b> river"
    assert place(source, "der Fluss groß", [(0, 0), (1, 2), (2, 1)]) == "der Fluss <b>groß</b>"


def test_attributes_come_back_as_written_and_unaligned_tags_keep_their_relative_place():
    link = "<a HREF=\"x.html?a=1&amp;b=2\"  class='k'>"
    source = tagged(("<i>", "</i>", ["one"]), " two ", (link, "</a>", ["three four"]), " five")
    out = place(source, "eins zwei drei vier fünf", [])  # no alignment at all
    assert out == f"<i>eins</i> zwei {link}drei vier</a> fünf"


def test_nested_tags_stay_nested_when_their_words_are_reordered():
    source = tagged(("<b>", "</b>", ["big ", ("<i>", "</i>", ["red"])]), " car")
    # the inner word's translation lies outside the outer tag's: it is kept inside
    out = place(source, "voiture grande rouge", [(0, 1), (1, 0), (2, 0)])
    assert out.count("<b>") == out.count("</b>") == out.count("<i>") == out.count("</i>") == 1
    assert re.fullmatch(r"(.*)<b>(.*)<i>(.*)</i>(.*)</b>(.*)", out)


def test_empty_and_void_elements_follow_the_word_they_are_glued_to_or_precede_the_next():
    source = tagged("a", ("<br/>", "", []), " b ", ("<span>", "</span>", []), "c")
    assert place(source, "x y z", [(0, 1), (1, 0), (2, 2)]) == "x y<br/> <span></span>z"
    assert place(source, "", []) == "<br/><span></span>"


def parts_of(draw_random, depth=0):
    """A random nesting of words and elements (openings numbered, to find each once)."""
    parts = []
    for _ in range(draw_random.randint(0, 4)):
        if depth < 3 and draw_random.random() < 0.4:
            n = draw_random.randint(0, 10**6)
            parts.append((f"<e{n}>", f"</e{n}>", parts_of(draw_random, depth + 1)))
        else:
            parts.append(draw_random.choice(["w ", " w", "ww", " ", "w w "]))
    return parts


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 6), st.data())
def test_any_markup_comes_back_once_properly_nested_around_the_translation(random, n, data):
    source = tagged(*parts_of(random))
    translation = " ".join(["t"] * n)
    n_source = len(words(source.text))
    pairs = st.tuples(st.integers(0, max(n_source, 1)), st.integers(0, max(n, 1)))
    out = place(source, translation, data.draw(st.lists(pairs, max_size=8)))
    markup = re.findall(r"</?e\d+>", out)
    assert re.sub(r"</?e\d+>", "", out) == translation
    stack, seen = [], []
    for tag in markup:
        if tag.startswith("</"):
            assert stack and stack.pop() == tag[2:-1]  # closes what is open: well nested
        else:
            stack.append(tag[1:-1])
            seen.append(tag)
    assert not stack
    assert sorted(seen) == sorted(e.opening for e in source.elements)  # each exactly once


def rebuilt(page: str, translate=str.upper, language=None) -> str:
    """The page translated by `translate`, each word aligned to itself."""
    document = HtmlDocument.parse(page)
    texts = document.texts()
    alignments = [[(i, i) for i in range(len(words(t)))] for t in texts]
    return document.rebuild([translate(t) for t in texts], alignments, language)


def test_a_page_keeps_what_is_not_prose_and_translates_alt_title_and_lang():
    head = '<!DOCTYPE html>\n<html lang="en">\n<head><style>p > b { color: red }</style>'
    script = "<script>if (a < b && c) { x = '<p>'; }</script>"
    page = (
        f"{head}\n{script}\n<!-- a comment -->\n<body>\n"
        '<p class="x">Hello <a href="/a?b=1&amp;c=2" title="a link">big</a> world.</p>\n'
        "<pre>  keep\n   this </pre>\n"
        '<p>Use <code>x &lt; y</code> here.<img src=cat.png alt="A cat"></p>\n'
        "</body></html>\n"
    )
    out = rebuilt(page, language="de")
    assert out == (
        f'<!DOCTYPE html>\n<html lang="de">\n<head><style>p > b {{ color: red }}</style>'
        f"\n{script}\n<!-- a comment -->\n<body>\n"
        '<p class="x">HELLO <a href="/a?b=1&amp;c=2" title="A LINK">BIG</a> WORLD.</p>\n'
        "<pre>  keep\n   this </pre>\n"
        '<p>USE <code>x &lt; y</code> HERE.<img src=cat.png alt="A CAT"></p>\n'
        "</body></html>\n"
    )


def test_a_link_around_blocks_is_read_as_a_block_and_one_inside_text_as_inline():
    page = (
        '<div><a href="/x" title="Go there"><h2>A title</h2><p>Some <b>text</b>.</p></a> '
        '<a href="y">a link</a> after.</div>'
    )
    assert HtmlDocument.parse(page).texts() == [
        "A title",
        "Some text.",
        "a link after.",
        "Go there",
    ]
    assert rebuilt(page) == (
        '<div><a href="/x" title="GO THERE"><h2>A TITLE</h2><p>SOME <b>TEXT</b>.</p></a> '
        '<a href="y">A LINK</a> AFTER.</div>'
    )


def test_text_is_escaped_and_line_breaks_between_runs_split_blocks():
    document = HtmlDocument.parse("<p>Fish &amp; chips<br>\n  next   line</p>")
    assert document.texts() == ["Fish & chips", "next line"]
    out = document.rebuild(["Fisch & <Pommes>", "nächste Zeile"], [None, None])
    assert out == "<p>Fisch &amp; &lt;Pommes&gt;<br>\n  nächste Zeile</p>"


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ("<p>never <b>closed</p>", "<b> before line 1 is never closed"),
        ("<p><b>crossed <i>tags</b></i></p>", "</b> at line 1 where </i> belongs"),
    ],
)
def test_inline_elements_that_do_not_close_in_their_block_are_refused(page, message):
    with pytest.raises(HtmlError, match=message):
        HtmlDocument.parse(page)


def test_links_read_as_the_pairs_they_were_made_of():
    from vaswani.documents.markup import Links

    pairs = [(0, 1), (2, 0), (70000, 3)]
    links = Links(pairs)
    assert list(links) == pairs and len(links) == 3 and links[-1] == (70000, 3)
    assert sorted(links) == sorted(pairs) and not Links([])
