"""``mcpd approvals`` in the process, against the daemon's answers: the list as a table
with how long each call waited and has left, each call's arguments under its row at a
glance, never cut to the terminal's width, with what to run where part of them is not
shown; ``show`` printing one call's arguments whole; what agents and servers wrote (tool
names, arguments, reasons, an executable's name) made visible so none of it drives the
terminal; a decision said in one line; and ``--watch`` drawing the list again only when
what a person would see changed."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from mcpd.cli import approvals
from mcpd.cli.approvals import cmd_approvals, render_approvals
from mcpd.policy.agent import AgentInfo
from mcpd.status_document import PendingView

HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202eevil\u200b\r"
TERMINAL = ("\x1b", "\x07", "\x9b", "\u202e", "\u200b", "\r")


def item(**kw: Any) -> dict[str, Any]:
    """A waiting call as ``mcpd/approvals/list`` sends it."""
    now = datetime.now(UTC)
    fields: dict[str, Any] = {
        "id": "a1b2c3",
        "agent": AgentInfo(uid=1000, pid=4242, exe="claude", profile="default"),
        "tool": "mail__send",
        "server": "mail",
        "original": "send",
        "arguments": '{"to": "x@example.org"}',
        "rule": 0,
        "reason": None,
        "asked": "operator",
        "since": (now - timedelta(seconds=30)).isoformat(),
        "deadline": (now + timedelta(seconds=90)).isoformat(),
        **kw,
    }
    out: dict[str, Any] = msgspec.to_builtins(PendingView(**fields))
    return out


def rendered(items: list[dict[str, Any]]) -> str:
    """The table of waiting calls as the daemon's JSON has them."""
    return render_approvals([msgspec.convert(i, PendingView) for i in items])


def test_nothing_waiting_says_so() -> None:
    assert rendered([]) == "no call waits for approval"


def test_a_waiting_call_is_a_row_with_its_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    lines = rendered([item()]).splitlines()
    assert lines[0].split() == ["ID", "WAITING", "LEFT", "AGENT", "TOOL"]
    row = lines[1]
    assert row.startswith("a1b2c3")
    assert "pid 4242 (claude), uid 1000, default" in row
    assert row.endswith("mail/send")
    assert lines[2] == '  {"to": "x@example.org"}'
    waited, left = (int(c) for c in row.split()[1:5:2])
    assert 29 <= waited <= 31 and 88 <= left <= 90
    assert lines[-1] == "1 waiting; decide with mcpd approvals approve|deny ID"


def test_times_past_the_deadline_or_ahead_of_the_clock_are_never_negative() -> None:
    now = datetime.now(UTC)
    late = item(since=(now + timedelta(hours=1)).isoformat(), deadline=now.isoformat())
    row = rendered([late]).splitlines()[1].split()
    assert row[1:5] == ["0", "s", "0", "s"]


def test_an_agent_without_a_process_is_named_by_its_connection() -> None:
    agent = AgentInfo(connection="http-7", profile="work")
    assert "connection http-7, work" in rendered([item(agent=agent)])


GLANCED = '{"body":"' + "y" * 1900 + '"…(7100 more characters),"repo":"prod","force":true}'


def test_arguments_are_not_cut_to_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the daemon shows at a glance has every key; the terminal folds the line."""
    monkeypatch.setenv("COLUMNS", "100")
    lines = rendered([item(arguments=GLANCED, shortened=True)]).splitlines()
    assert lines[2] == f"  {GLANCED}"
    assert lines[3] == (
        "  (long values are shortened where they stand: mcpd approvals show a1b2c3 shows"
        " them whole)"
    )


def test_a_call_whose_keys_do_not_all_fit_says_where_to_read_them() -> None:
    lines = rendered([item(arguments='{"k1":1,"k2":…', shortened=True, keys_left_out=998)])
    assert lines.splitlines()[3] == (
        "  (998 keys do not fit here: mcpd approvals show a1b2c3 shows them all; read them"
        " before you approve it)"
    )


def test_what_agents_and_servers_wrote_cannot_drive_the_terminal() -> None:
    agent = AgentInfo(pid=1, exe=HOSTILE, connection=HOSTILE, profile=HOSTILE)
    hostile = item(
        id=HOSTILE,
        agent=agent,
        server=HOSTILE,
        original=HOSTILE,
        arguments=HOSTILE + "\n" + HOSTILE,
        reason=HOSTILE,
    )
    table = rendered([hostile])
    assert not any(ch in table for ch in TERMINAL)
    assert "\\x1b[2J" in table and "\\u202e" in table
    assert "why they ask:" in table
    # head, row, its arguments, blank, why, its reason, the count
    assert len(table.splitlines()) == 7


# -- the commands, against the daemon's answers --


class Asked:
    """What the command asks the daemon, and the answers it gets, in order; past the
    last one, Ctrl-C."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, Any]] = []

    def __call__(
        self, client: object, method: str, shape: type[Any], params: Any = None, **kw: Any
    ) -> Any:
        self.asked.append((method, params))
        if not self.answers:
            raise KeyboardInterrupt
        return msgspec.convert(self.answers.pop(0), shape)


def with_daemon(monkeypatch: pytest.MonkeyPatch, *answers: Any) -> Asked:
    asked = Asked(*answers)

    @contextlib.contextmanager
    def client_for(args: argparse.Namespace, timeout: float = 0.0) -> Iterator[None]:
        yield None

    monkeypatch.setattr(approvals, "client_for", client_for)
    monkeypatch.setattr(approvals, "ask_as", asked)
    return asked


def args(**kw: Any) -> argparse.Namespace:
    base = {"socket": None, "action": None, "id": None, "reason": None, "watch": False}
    return argparse.Namespace(**{**base, "json": False, **kw})


def test_a_denial_with_a_reason_is_said_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    decided = item(id=HOSTILE, original=HOSTILE)
    asked = with_daemon(monkeypatch, {"approved": False, "decided": decided, "by": "uid 0"})
    assert cmd_approvals(args(action="deny", id="a1b2c3", reason="not now")) == 0
    assert asked.asked == [
        ("mcpd/approvals/decide", {"id": "a1b2c3", "approve": False, "reason": "not now"})
    ]
    out = capsys.readouterr().out
    assert out.startswith("denied \\x1b]0;owned") and out.count("\n") == 1
    assert not any(ch in out for ch in TERMINAL)
    assert "for pid 4242 (claude), uid 1000, default" in out


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"action": "approve"}, "needs the call's ID"),
        ({"reason": "r"}, "--reason goes with deny"),
        ({"action": "approve", "id": "x", "reason": "r"}, "--reason goes with deny"),
        ({"action": "deny", "id": "x", "watch": True}, "--watch lists"),
        ({"action": "show"}, "needs the call's ID"),
        ({"action": "show", "id": "x", "reason": "r"}, "--reason goes with deny"),
    ],
)
def test_a_wrong_combination_is_a_usage_error_before_asking(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kw: dict[str, Any],
    said: str,
) -> None:
    asked = with_daemon(monkeypatch)
    with pytest.raises(SystemExit) as info:
        cmd_approvals(args(**kw))
    assert info.value.code == 2 and said in capsys.readouterr().err
    assert asked.asked == []


def test_show_prints_the_arguments_whole_a_line_each_made_visible(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = '{\n  "body": "' + "y" * 9000 + f'",\n  "repo": "prod",\n  "why": "{HOSTILE}"\n}}'
    asked = with_daemon(
        monkeypatch, {"approval": item(reason="issues need a person"), "arguments": whole}
    )
    assert cmd_approvals(args(action="show", id="a1b2c3")) == 0
    assert asked.asked == [("mcpd/approvals/show", {"id": "a1b2c3"})]
    out = capsys.readouterr().out
    assert not any(ch in out for ch in TERMINAL)
    assert out.splitlines() == [
        "a1b2c3: mail/send for pid 4242 (claude), uid 1000, default",
        "why it asks: issues need a person",
        "arguments:",
        "  {",
        '    "body": "' + "y" * 9000 + '",',
        '    "repo": "prod",',
        '    "why": "\\x1b]0;owned\\x07\\x1b[2J\\x9b31m\\u202eevil\\u200b\\r"',
        "  }",
    ]


def test_watch_draws_again_only_when_the_list_changed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    one = item()
    asked = with_daemon(
        monkeypatch,
        {"version": 1, "approvals": []},
        {"version": 2, "approvals": [one]},
        {"version": 3, "approvals": [one]},  # a change nobody would see
        {"version": 4, "approvals": []},
    )
    assert cmd_approvals(args(watch=True)) == 0  # Ctrl-C ends it well
    assert [p for _, p in asked.asked] == [
        {"after": -1},
        {"after": 1},
        {"after": 2},
        {"after": 3},
        {"after": 4},
    ]
    out = capsys.readouterr().out
    assert out.count("mcpd approvals    ") == 3
    assert "\x1b[2J" not in out  # not a terminal: each list follows the last


def test_watch_as_json_is_a_line_per_change(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with_daemon(
        monkeypatch,
        {"version": 1, "approvals": [item(arguments=HOSTILE)]},
        {"version": 2, "approvals": []},
    )
    assert cmd_approvals(args(watch=True, json=True)) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert [len(json.loads(line)) for line in lines] == [1, 0]
    assert json.loads(lines[0])[0]["arguments"] == HOSTILE
    assert not any(ch in out for ch in TERMINAL)
