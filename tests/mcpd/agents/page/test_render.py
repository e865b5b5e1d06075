"""The page as HTML, drawn from typed rows: every word a server, an agent or a config
supplies comes out as text (no markup, no script, no attribute broken out of, no link of
its own), every character that hides or reorders what a person reads is written out as
``mcpd status`` writes it, and the page says what waits, how servers fare and what a
login from the page looks like."""

from __future__ import annotations

from html.parser import HTMLParser

from mcpd.agents.page.decisions import OUTCOMES
from mcpd.agents.page.model import (
    PageData,
)
from mcpd.agents.page.render import login_target, message, page, regions
from mcpd.agents.page.sources import CallRow, HeldChange, PendingApproval, Waiting
from mcpd.local.state.statefile import SavedChange
from mcpd.server_row import BreakerCounts
from mcpd.servers.status.history import ServerHistory
from tests.support.parts.status_rows import daemon, document, profile, sandbox, server_row

NOW = 1_800_000_000.0
SINCE = "2027-01-15T08:00:00+00:00"

# What a hostile server (or agent) writes where it can: markup, a script, an attribute
# broken out of either quote, a javascript: link, a style, a closing tag of the page's.
HOSTILE = (
    "\"'><script>alert(1)</script><img src=x onerror=alert(2)>"
    '<a href="javascript:alert(3)">x</a><style>body{display:none}</style></textarea></pre>'
)
# Characters that reorder or hide what a person reads: a right-to-left override, a
# zero-width space, a tag character, a carriage return and a terminal escape.
HIDDEN = ("\u202e", "\u200b", "\U000e0041", "\r", "\x1b")
SNEAKY = "ok\u202eevil\u200bname\U000e0041\r\x1b[2J"
WRITTEN = "ok\\u202eevil\\u200bname\\U000e0041\\r\\x1b[2J"  # as mcpd status shows it


class Parsed(HTMLParser):
    """The elements and attributes a page is made of, and the text it shows."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parsed(html: str) -> Parsed:
    p = Parsed()
    p.feed(html)
    p.close()
    return p


def data_with(word: str, *, csrf: str | None = "the-csrf") -> PageData:
    """A page where every field a server, an agent or a config names holds ``word``."""
    servers = [
        server_row(
            word,
            transport=word,
            state=state,
            since=SINCE,
            last_error=word,
            stderr=[word],
            breaker=BreakerCounts(state=word, consecutive_failures=2, failures=0, opened=1),
            sandbox=sandbox(word),
        )
        for state in ("failed", "needs_login", "unresolved", "ready", word)
    ]
    status = document(
        daemon(version=word, summary=word, warnings=[word], profile=word),
        servers,
        [profile(word, servers=[word]), profile("default", mode=word)],
    )
    history = {
        word: ServerHistory(
            word,
            [SavedChange(NOW - 7200, "crash_loop", word), SavedChange(NOW - 7000, "ready")],
            [],
        )
    }
    return PageData(
        status,
        history,
        NOW,
        csrf,
        logins_from_page=True,
        approvals=Waiting([PendingApproval(word, word, word, word, NOW - 60, word)]),
        held=Waiting([HeldChange(word, word, word, word, word, NOW - 60, word)]),
        calls=[CallRow(NOW - 5, word, word, word, word, 1.5)],
    )


def test_hostile_words_add_no_element_and_no_attribute_to_the_page() -> None:
    plain = parsed(page(data_with("word")))
    hostile = parsed(page(data_with(HOSTILE)))
    assert hostile.tags == plain.tags  # the same elements, in the same order
    assert [k for k, _ in hostile.attrs] == [k for k, _ in plain.attrs]
    assert hostile.tags.count("script") == 1  # the page's own only
    assert not any(k.startswith("on") for k, _ in hostile.attrs)
    hrefs = [v for k, v in hostile.attrs if k in ("href", "action", "src")]
    assert not [h for h in hrefs if "javascript" in h.lower()]


def test_hostile_words_are_shown_as_the_text_they_are() -> None:
    shown = "".join(parsed(page(data_with(HOSTILE))).text)
    assert HOSTILE in shown
    # ...as a value of the page's forms, the words come back as they were.
    values = [v for k, v in parsed(page(data_with(HOSTILE))).attrs if k == "value"]
    assert HOSTILE in values


def test_each_region_is_escaped_on_its_own() -> None:
    """The live page swaps a region in as it is (``innerHTML``): each must hold no
    markup of a server's, without the page around it."""
    for name, html in regions(data_with(HOSTILE)).items():
        if name == "title":
            continue  # set as the document's title, which is text
        assert "<script" not in html and "<img" not in html and "<style" not in html, name
        assert "onerror=" not in html or "onerror=alert(2)&gt;" in html, name


def test_what_hides_or_reorders_text_is_written_out() -> None:
    """What a person reads (text, titles, labels) shows each such character as
    ``mcpd status`` does; only a form's values, which nobody reads, keep them."""
    html = page(data_with(SNEAKY))
    p = parsed(html)
    seen = "".join(p.text) + "".join(v for k, v in p.attrs if k != "value")
    for ch in HIDDEN:
        assert ch not in seen, repr(ch)
    assert WRITTEN in "".join(p.text)
    # The live page sets the title region as the document's title, as text.
    assert regions(data_with(SNEAKY))["title"] == f"mcpd \u00b7 {WRITTEN}"


def test_what_a_form_sends_back_is_the_word_as_it_is() -> None:
    """Approve, Deny, Log in and the filter name the item as the daemon knows it, so a
    name written out for the eye is not what the form sends."""
    p = parsed(page(data_with(SNEAKY)))
    values = [v for k, v in p.attrs if k == "value" and v not in ("the-csrf", "")]
    assert values and all(v in (SNEAKY, "approve", "deny") or v in OUTCOMES for v in values)
    assert values.count(SNEAKY) >= 5  # the id twice, the change's four fields, the login


def test_a_page_for_reading_has_no_form_and_no_token() -> None:
    html = page(data_with("word", csrf=None))
    p = parsed(html)
    assert ("method", "post") not in p.attrs  # the latest calls' filter is a GET
    assert ("name", "mcpd-csrf") not in p.attrs and 'action="/page/' not in html
    # What waits is still shown, with the command that deals with it.
    assert "needs a login" in html and "mcpd auth login word" in html


def test_a_page_for_acting_carries_its_token_in_every_form() -> None:
    p = parsed(page(data_with("word")))
    forms = p.attrs.count(("method", "post"))
    assert forms == 4  # approve, deny, release, log in
    assert [v for k, v in p.attrs if k == "value" and v == "the-csrf"] == ["the-csrf"] * forms
    assert ("content", "the-csrf") in p.attrs  # the meta the script reads it from
    actions = sorted(v for k, v in p.attrs if k == "action" and v != "/")
    assert actions == ["/page/decide", "/page/decide", "/page/login", "/page/release"]


def test_logins_start_from_the_page_only_where_it_says_so() -> None:
    data = data_with("word")
    off = PageData(data.status, data.history, NOW, "the-csrf", logins_from_page=False)
    assert "/page/login" not in page(off)
    assert "mcpd auth login word" in page(off)


def test_nothing_waiting_says_only_what_this_mcpd_records() -> None:
    status = document(daemon(summary="1 server"), [server_row("s", state="ready")])
    bare = regions(PageData(status, {}, NOW))["waiting"]
    assert "No server waits for a login or a fix to its configuration." in bare
    assert "approval" not in bare and "held" not in bare
    full = regions(PageData(status, {}, NOW, approvals=Waiting([]), held=Waiting([])))["waiting"]
    assert "no call waits for an approval; no changed definition is held." in full
    assert "calls" not in regions(PageData(status, {}, NOW))


def test_a_failed_servers_row_says_why_and_its_last_stderr_line() -> None:
    row = server_row(
        "s",
        state="failed",
        last_error="exited with status 1",
        stderr=["first", "the last thing it said", "   ", ""],
    )
    html = regions(PageData(document(daemon(), [row]), {}, NOW))["rows"]
    assert "exited with status 1" in html
    assert "stderr: the last thing it said" in html
    assert "first" not in html


def test_a_long_stderr_line_is_cut() -> None:
    row = server_row("s", state="failed", last_error="down", stderr=["x" * 5000])
    html = regions(PageData(document(daemon(), [row]), {}, NOW))["rows"]
    assert "x" * 300 in html and "x" * 301 not in html


def test_a_status_with_unreadable_times_still_draws() -> None:
    row = server_row("s", state="failed", since="not a time", retry_at="yesterday")
    html = regions(PageData(document(daemon(), [row]), {}, NOW))["rows"]
    assert "since" not in html and "next try" not in html
    assert 'data-state="failed"' in html


def test_a_login_comes_back_to_one_path_of_the_page() -> None:
    assert login_target("notes") == "/page/oauth/notes"
    # An alias cannot lead the browser elsewhere: each slash, dot or query is quoted.
    assert login_target("../../x?y#z") == "/page/oauth/..%2F..%2Fx%3Fy%23z"
    assert login_target("a/b").count("/") == 3


def test_a_message_escapes_its_title_and_links_back_when_asked() -> None:
    html = message(HOSTILE, "<b>ok</b>")
    p = parsed(html)
    assert "script" not in p.tags and "img" not in p.tags
    assert "<b>ok</b>" in html  # its text is HTML, by its callers
    assert ("href", "/") in p.attrs
    assert ("href", "/") not in parsed(message("t", "x", back=False)).attrs
