"""What ``mcpd approve`` and ``mcpd tools --pending|--findings`` show a person who must
judge a change: a definition one field to a line and its description a line to a line,
every character that hides or acts on a terminal escaped so a change of one invisible
character shows in the diff, and why each item waits."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.cli.pins.pending import (
    _picked,
    describe_pin,
    diff_of,
    lines_of,
    print_findings,
    print_pending,
    shown_name,
)

TOOL = {
    "name": "search",
    "title": "Search",
    "description": "Find notes.\nReturns ids.",
    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
    "annotations": {"readOnlyHint": True},
}


def item(**keys: Any) -> dict[str, Any]:
    base = {
        "server": "notes",
        "kind": "tool",
        "name": "search",
        "why": "changed",
        "reason": "",
        "rules": [],
        "digest": "",
        "offered": TOOL,
        "approved": TOOL,
    }
    return {**base, **keys}


def test_a_definition_is_one_field_to_a_line_in_a_fixed_order() -> None:
    assert lines_of(TOOL) == [
        "name: search",
        "title: Search",
        "description:",
        "  Find notes.",
        "  Returns ids.",
        "annotations:",
        "  {",
        '    "readOnlyHint": true',
        "  }",
        "inputSchema:",
        "  {",
        '    "properties": {',
        '      "q": {',
        '        "type": "string"',
        "      }",
        "    },",
        '    "type": "object"',
        "  }",
    ]
    assert lines_of(None) == []


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\u200bb", "a\\u200bb"),  # zero width
        ("\x1b[2Jcleared", "\\x1b[2Jcleared"),  # a terminal escape
        ("\u202eevil", "\\u202eevil"),  # right-to-left override
        ("a\rb", "a\\rb"),
    ],
)
def test_what_hides_or_acts_on_a_terminal_is_escaped(text: str, shown: str) -> None:
    lines = lines_of({"name": text, "description": text, "extra": text})
    assert lines[0] == f"name: '{shown}'"  # as `shown_name` shows a name
    assert lines[2] == f"  {shown}"
    # Other fields are JSON, which escapes controls its own way: none is left raw.
    assert not any(c in line for line in lines for c in "\x1b\u200b\u202e\r")


def test_a_change_of_one_invisible_character_shows_in_the_diff() -> None:
    changed = {**TOOL, "description": "Find notes.\u200b\nReturns ids."}
    diff = diff_of(item(offered=changed))
    assert "-  Find notes." in diff
    assert "+  Find notes.\\u200b" in diff
    assert diff[0] == "--- approved" and diff[1] == "+++ offered now"


def test_an_item_never_approved_is_diffed_against_nothing() -> None:
    diff = diff_of(item(approved=None, why="new"))
    assert diff[0] == "--- (nothing approved)"
    assert "+name: search" in diff
    assert not any(line.startswith("-") and not line.startswith("---") for line in diff)


@pytest.mark.parametrize("why", ["changed", "forgotten"])
def test_a_change_of_an_item_whose_approved_definition_is_not_kept_says_so(why: str) -> None:
    diff = diff_of(item(approved=None, why=why))
    assert diff[0] == "--- (approved, its definition not kept)"
    assert "+name: search" in diff


def test_an_unchanged_item_has_an_empty_diff() -> None:
    assert diff_of(item()) == []


def test_the_diff_is_coloured_for_a_terminal_only() -> None:
    offered = {**TOOL, "title": "Search all"}
    plain = diff_of(item(offered=offered))
    painted = diff_of(item(offered=offered), color=True)
    assert len(plain) == len(painted)
    assert "\x1b[31m-title: Search\x1b[0m" in painted
    assert "\x1b[32m+title: Search all\x1b[0m" in painted
    assert all("\x1b" not in line for line in plain)


@pytest.mark.parametrize(
    ("keys", "why"),
    [
        ({"why": "changed"}, "changed since it was approved"),
        ({"why": "new"}, "new since the server was approved"),
        ({"why": "new_server"}, "its server is not approved yet"),
        (
            {"why": "finding", "rules": ["hidden-text"]},
            "flagged by the finding rules (hidden-text)",
        ),
        (
            {"why": "changed", "rules": ["a", "b"]},
            "changed since it was approved; flagged: a, b",
        ),
        ({"why": "something-newer"}, "something-newer"),
        (
            {"why": "forgotten", "forgotten_names": 1200},
            "its name is among those whose pins the server had mcpd forget (about 1200), "
            "or matches one by chance",
        ),
        (
            {"why": "forgotten"},
            "its name is among those whose pins the server had mcpd forget, "
            "or matches one by chance",
        ),
    ],
)
def test_each_item_says_why_it_waits(keys: dict[str, Any], why: str) -> None:
    assert describe_pin(item(**keys)) == f"tool search of notes: {why}"


def test_a_name_a_server_chose_is_escaped_where_it_is_described() -> None:
    assert describe_pin(item(name="se\x1b]0;pwned\x07arch")) == (
        "tool 'se\\x1b]0;pwned\\x07arch' of notes: changed since it was approved"
    )


def test_the_pending_table_names_each_item_and_how_to_approve(
    capsys: pytest.CaptureFixture[str],
) -> None:
    items = [
        item(),
        item(server="git", kind="prompt", name="a-much-longer-name\u200b", why="new"),
    ]
    items[1]["local"] = "mcp__git__a-much-longer-name_"
    assert print_pending(items) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["SERVER", "KIND", "NAME", "LISTED", "AS", "WHY"]
    assert lines[2].startswith("git ") and "'a-much-longer-name\\u200b'  mcp__git__" in lines[2]
    assert lines[2].endswith("mcp__git__a-much-longer-name_  new since the server was approved")
    assert lines[-1] == (
        "2 items wait for approval; mcpd approve git; mcpd approve notes shows each change and asks"
    )


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("purge", "purge"),
        ("send mail", "send mail"),
        ("purge ", "'purge '"),
        (" purge", "' purge'"),
        ("purg\u0435", "'purg\\u0435'"),
        ("pur\u200bge", "'pur\\u200bge'"),
        ("it's\x1b", "'it\\'s\\x1b'"),
        ("a\U0001f600", "'a\\U0001f600'"),
    ],
)
def test_a_name_that_is_not_plain_ascii_is_shown_quoted_and_escaped(name: str, shown: str) -> None:
    assert shown_name(name) == shown


def test_one_pending_item_is_said_in_the_singular(capsys: pytest.CaptureFixture[str]) -> None:
    print_pending([item()])
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 item waits for approval;")
    print_pending([])
    assert capsys.readouterr().out == "nothing waits for approval\n"


def test_findings_quote_where_and_what_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    findings = [
        {
            "server": "notes",
            "kind": "tool",
            "name": "search",
            "rule": "hidden-text",
            "where": "description",
            "excerpt": "ignore\u200b previous",
        },
        {"server": "notes", "kind": "instructions", "name": "", "rule": "r", "where": "w",
         "excerpt": "e"},
    ]  # fmt: skip
    assert print_findings(findings) == 0
    assert capsys.readouterr().out.splitlines() == [
        "notes tool search: hidden-text in description: ignore\\u200b previous",
        "notes instructions: r in w: e",
        "2 findings",
    ]
    print_findings([])
    assert capsys.readouterr().out == "no findings\n"


def test_a_name_that_picks_several_waiting_items_is_refused_naming_each(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cyrillic = "purg\u0435"
    tool, prompt = item(name=cyrillic), item(kind="prompt", name=cyrillic)
    literal = item(name="purg\\u0435")
    assert _picked([tool, literal], ["purg\\u0435"], "notes") == [literal]
    assert _picked([tool, literal], ["'purg\\u0435'"], "notes") == [tool]
    with pytest.raises(SystemExit):
        _picked([tool, prompt], ["purg\\u0435"], "notes")
    err = capsys.readouterr().err
    assert "purg\\u0435 names 2 items of notes" in err and cyrillic not in err, err
    assert "tool 'purg\\u0435': " in err and "prompt 'purg\\u0435': " in err
