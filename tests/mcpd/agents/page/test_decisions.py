"""The page's parts for what waits on a person and for the latest calls: a call waiting
for approval with Approve and Deny (Deny alone where not every key of its arguments
fits, with the command that shows them whole), a held change with its diff and Approve (each form
naming its item exactly, with the session's token; none on a page for reading), what
waits beyond the first counted, a cut diff (no Approve) and a long name said to be cut,
what the finding rules flagged in a held change, the
latest calls with their filter, and the filter read from the page's address, where
nothing but a known outcome is taken."""

from __future__ import annotations

import re

import msgspec

from mcpd.agents.page.decisions import (
    FINDINGS_SHOWN,
    NAME_SENT,
    NAME_SHOWN,
    OUTCOMES,
    approval_items,
    call_filter,
    calls_section,
    held_items,
)
from mcpd.agents.page.model import PageData
from mcpd.agents.page.sources import CallFilter, CallRow, HeldChange, PendingApproval, Waiting
from mcpd.registry.findings.rules import Finding
from tests.support.parts.status_rows import daemon, document, server_row

NOW = 1_800_000_000.0
APPROVAL = PendingApproval("a-1", "mail", "mail__send", "pid 8 (host)", NOW - 60, '{"to": "x"}')
CHANGE = HeldChange(
    "files", "tool", "read", "its description changed", "-old\n+new", NOW - 30, "sha256:ab"
)


def data(csrf: str | None = "tok", **kw: object) -> PageData:
    status = document(daemon(), [server_row("mail"), server_row("files"), server_row("mail")])
    return PageData(status, {}, NOW, csrf, **kw)  # type: ignore[arg-type]


def fields(html: str) -> list[dict[str, str]]:
    """Each form's hidden fields, in order."""
    return [
        dict(re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', form))
        for form in re.findall(r"<form method=\"post\".*?</form>", html)
    ]


def test_an_approval_has_approve_and_deny_naming_it() -> None:
    (item,) = approval_items(data(approvals=Waiting([APPROVAL])))
    assert fields(item) == [
        {"id": "a-1", "decision": "approve", "csrf": "tok"},
        {"id": "a-1", "decision": "deny", "csrf": "tok"},
    ]
    assert item.count('action="/page/decide"') == 2
    assert "mail__send" in item and "pid 8 (host)" in item and "server mail" in item
    assert "{&quot;to&quot;: &quot;x&quot;}" in item  # the arguments, as text


def test_shortened_arguments_say_where_they_are_shown_whole() -> None:
    shortened = msgspec.structs.replace(APPROVAL, shortened=True)
    (item,) = approval_items(data(approvals=Waiting([shortened])))
    assert [f["decision"] for f in fields(item)] == ["approve", "deny"]
    assert "shortened where they stand: <code>mcpd approvals show a-1</code>" in item


def test_a_call_whose_keys_do_not_all_fit_is_not_approved_from_the_page() -> None:
    many = msgspec.structs.replace(APPROVAL, shortened=True, keys_left_out=40)
    (item,) = approval_items(data(approvals=Waiting([many])))
    assert fields(item) == [{"id": "a-1", "decision": "deny", "csrf": "tok"}]
    assert "40 keys of its arguments do not fit here" in item
    assert "<code>mcpd approvals show a-1</code>" in item


def test_a_held_change_shows_its_diff_and_approves_exactly_what_was_shown() -> None:
    (item,) = held_items(data(held=Waiting([CHANGE])))
    assert fields(item) == [
        {"server": "files", "kind": "tool", "name": "read", "digest": "sha256:ab", "csrf": "tok"}
    ]
    assert 'action="/page/release"' in item
    assert '<pre class="diff">-old\n+new</pre>' in item
    assert "files / read" in item and "tool held" in item and ", since " in item
    undated = held_items(data(held=Waiting([HeldChange("files", "tool", "read", "why", "")])))[0]
    assert ", since" not in undated


def test_a_page_for_reading_shows_what_waits_without_buttons() -> None:
    reading = data(csrf=None, approvals=Waiting([APPROVAL]), held=Waiting([CHANGE]))
    items = approval_items(reading) + held_items(reading)
    assert len(items) == 2
    assert not any("<form" in i or "<button" in i for i in items)


def test_what_waits_beyond_the_first_is_counted_with_the_commands_for_it() -> None:
    items = approval_items(data(approvals=Waiting([APPROVAL], more=7)))
    assert len(items) == 2
    assert "7 more calls wait for approval" in items[1] and "mcpd approvals" in items[1]
    items = held_items(data(held=Waiting([CHANGE], more=1)))
    assert len(items) == 2
    assert "1 more held change:" in items[1]
    assert "mcpd tools --pending" in items[1] and "mcpd approve SERVER" in items[1]


def test_a_cut_diff_has_no_approve_and_says_where_the_whole_change_is_shown() -> None:
    (whole,) = held_items(data(held=Waiting([CHANGE])))
    assert "cut short" not in whole and fields(whole) != []
    cut = msgspec.structs.replace(CHANGE, cut=True)
    (item,) = held_items(data(held=Waiting([cut])))
    assert fields(item) == []
    assert "The diff is cut short here, so the page does not approve it: " in item
    assert "<code>mcpd approve files</code> shows all of it." in item


def test_what_the_rules_flagged_is_shown_beside_the_change_the_first_few_counted() -> None:
    found = tuple(
        Finding("sensitive-file", f"inputSchema: p{i}.description", "send <~/.ssh/id_rsa>")
        for i in range(FINDINGS_SHOWN + 2)
    )
    (item,) = held_items(data(held=Waiting([msgspec.structs.replace(CHANGE, findings=found)])))
    assert item.count("Flagged: sensitive-file in inputSchema: p") == FINDINGS_SHOWN
    assert "p0.description: \u201csend &lt;~/.ssh/id_rsa&gt;\u201d" in item
    assert "2 more flagged: <code>mcpd tools --findings</code> lists them all." in item
    (plain,) = held_items(data(held=Waiting([CHANGE])))
    assert "Flagged" not in plain


def test_a_long_name_is_cut_where_it_is_shown() -> None:
    name = "n" * (NAME_SENT + 1)
    long = msgspec.structs.replace(CHANGE, name=name)
    (item,) = held_items(data(held=Waiting([long])))
    assert f"files / {'n' * NAME_SHOWN}\u2026</span>" in item
    # Its form would carry the whole name: it is approved with the command instead.
    assert fields(item) == [] and "approve it with <code>mcpd approve files</code>" in item
    (sent,) = held_items(
        data(held=Waiting([msgspec.structs.replace(CHANGE, name="n" * NAME_SENT)]))
    )
    assert fields(sent)[0]["name"] == "n" * NAME_SENT
    call = CallRow(NOW, "files", "t" * 10_000, "pid 8 (host)", "refused", None)
    section = calls_section(data(calls=[call]))
    assert f"<td>{'t' * NAME_SHOWN}\u2026</td>" in section and "t" * (NAME_SHOWN + 1) not in section


def test_nothing_recorded_is_nothing_drawn() -> None:
    assert approval_items(data()) == [] and held_items(data()) == []


def test_the_latest_calls_each_have_a_row() -> None:
    calls = [
        CallRow(NOW - 5, "files", "files__read", "pid 7 (host)", "ok", 3.5),
        CallRow(NOW - 4, "mail", "mail__send", "pid 8 (host)", "refused", None),
    ]
    html = calls_section(data(calls=calls))
    rows = re.findall(r"<tr><td>.*?</tr>", html)
    assert len(rows) == 2
    assert '<span class="pill up">ok</span>' in rows[0] and "3.5 ms" in rows[0]
    assert '<span class="pill down">refused</span>' in rows[1] and ">-</td>" in rows[1]
    assert "No calls." not in html


def test_no_calls_says_so() -> None:
    assert "No calls." in calls_section(data(calls=[]))


def test_the_filter_lists_each_server_once_and_keeps_the_choice() -> None:
    html = calls_section(data(calls=[], call_filter=CallFilter("mail", "timeout")))
    servers = re.search(r'<select name="server".*?</select>', html)
    assert servers is not None
    assert re.findall(r"<option[^>]*>([^<]*)</option>", servers.group()) == [
        "any server",
        "files",
        "mail",
    ]
    assert '<option value="mail" selected>' in html
    assert '<option value="timeout" selected>' in html
    assert html.count(" selected") == 2
    # A filter is a GET to the page itself: it changes nothing.
    assert '<form method="get" action="/" class="filter">' in html


def test_a_profiles_page_keeps_its_profile_in_the_filter() -> None:
    status = document(daemon(profile='work"><b>'), [])
    html = calls_section(PageData(status, {}, NOW, calls=[]))
    assert '<input type="hidden" name="profile" value="work&quot;&gt;&lt;b&gt;">' in html
    assert 'name="profile"' not in calls_section(data(calls=[]))


def test_the_filter_is_read_from_the_address() -> None:
    assert call_filter({}) == CallFilter()
    assert call_filter({"server": ["files"], "outcome": ["tool error"]}) == CallFilter(
        "files", "tool error"
    )
    assert call_filter({"server": [""], "outcome": [""]}) == CallFilter()
    assert call_filter({"server": ["a", "b"]}).server == "a"  # the first of repeats


def test_an_outcome_the_page_does_not_know_is_no_filter() -> None:
    for odd in ("OK", "ok ", "<script>", "tool_error", "x" * 10_000):
        assert call_filter({"outcome": [odd]}).outcome is None
    assert all(call_filter({"outcome": [o]}).outcome == o for o in OUTCOMES)


def test_a_filter_cannot_ask_for_more_calls_than_the_page_shows() -> None:
    assert call_filter({"limit": ["1000000"]}).limit == CallFilter().limit
