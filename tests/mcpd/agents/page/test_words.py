"""Words from a server, an agent or a config as the page writes them, read back by an
HTML parser: inside an element and inside a quoted attribute, the reader gets exactly
the text with each character that hides or reorders it written out, and no markup,
entity or attribute of anyone's."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpd.agents.page.words import on_page
from protocol.shown.visible import hidden, visible


class Reader(HTMLParser):
    """What a browser makes of a fragment: its tags with their attributes, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text += data


def read(fragment: str) -> Reader:
    reader = Reader()
    reader.feed(fragment)
    reader.close()
    return reader


def in_page(words: str) -> Reader:
    """``words`` where the page puts them: in two quoted attributes and an element."""
    return read(f"<li data-a=\"{on_page(words)}\" data-b='{on_page(words)}'>{on_page(words)}</li>")


MARKUP = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "' onmouseover='alert(1)",
    "&lt;b&gt; &amp; &#x3c; &quot;",
    '</li><li data-a="forged">',
    "<!-- a comment --> <![CDATA[ x ]]>",
]


@pytest.mark.parametrize("words", MARKUP)
def test_markup_is_read_back_as_the_text_it_is(words: str) -> None:
    reader = in_page(words)
    assert reader.tags == [("li", [("data-a", words), ("data-b", words)])]
    assert reader.text == words


@pytest.mark.parametrize(
    ("words", "written"),
    [
        ("safe.txt\u202eexe.bat", "safe.txt\\u202eexe.bat"),  # right-to-left override
        ("a\u2066b\u2069c\u200fd", "a\\u2066b\\u2069c\\u200fd"),  # isolates, a RLM
        ("ig\u200bnore\u200d\u2060\ufeff", "ig\\u200bnore\\u200d\\u2060\\ufeff"),  # zero-width
        ("ok\U000e0041\U000e0042\U000e007f", "ok\\U000e0041\\U000e0042\\U000e007f"),  # tags
        (
            "bell\x07 esc\x1b[2J csi\x9b1m del\x7f nul\x00",
            "bell\\x07 esc\\x1b[2J csi\\x9b1m del\\x7f nul\\x00",
        ),
        ("soft\u00adhyphen", "soft\\xadhyphen"),
        ("one\u2028two\u2029", "one\\u2028two\\u2029"),
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
    ],
)
def test_a_character_that_hides_or_reorders_is_written_out(words: str, written: str) -> None:
    reader = in_page(words)
    assert reader.text == written
    assert reader.tags == [("li", [("data-a", written), ("data-b", written)])]


def test_letters_and_emoji_beyond_the_basic_plane_are_shown_as_they_are() -> None:
    words = "caf\u00e9 \u65e5\u672c \U0001f600 \U0001d400 \U00020000 \u05e9\u05dc\u05d5\u05dd"
    assert on_page(words) == words
    assert in_page(words).text == words


def test_line_breaks_and_tabs_are_kept_and_a_lone_carriage_return_is_not() -> None:
    assert on_page("- old\r\n+ new\n\tindented") == "- old\n+ new\n\tindented"
    # A carriage return of its own would draw one line over another where text is shown raw.
    assert on_page("shown\rhidden") == "shown\\rhidden"
    assert on_page("\x0c\x0b") == "\\x0c\\x0b"


def test_an_escape_the_server_wrote_is_not_mistaken_for_one_of_the_page() -> None:
    # A server writing the two characters "\u202e" is shown them; the override itself
    # is shown the same way, so neither can pass for the other's absence.
    assert on_page("\\u202e") == "\\u202e"
    assert on_page("\u202e") == "\\u202e"


def test_the_empty_text_is_empty() -> None:
    assert on_page("") == ""


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF)))
def test_any_text_reads_back_as_itself_made_visible_with_no_markup(words: str) -> None:
    out = on_page(words)
    assert not any(hidden(ch) and ch not in "\n\t" for ch in out)
    assert not set("<>\"'") & set(out)
    expected = visible(words, lines=True)
    reader = in_page(words)
    assert reader.tags == [("li", [("data-a", expected), ("data-b", expected)])]
    assert reader.text == expected
