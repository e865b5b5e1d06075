"""The commands that ask the daemon, run in this process against a stand-in on a
socket: what ``tools``, ``call``, ``status`` and ``reload`` print of its answers
(servers' words escaped, long ones cut to the terminal), and the exit code of each
way it can go wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpd.cli.main import main
from tests.support.daemons.fake import answering as daemon
from tests.support.daemons.fake import error, notification, result

TOOLS = [
    {
        "name": "mcp__notes__search",
        "description": "Search the notes.\nSecond line.",
        "_meta": {"mcpd/server": "notes"},
    },
    {
        "name": "mcp__evil__x",
        "description": "Looks fine\u202e\x1b[2Jcleared",
        "_meta": {"mcpd/server": "evil\x1b[31m"},
    },
    {"name": "mcp__bare__tool"},
]

# What ``mcpd/tools`` says of the profile of every tool, beside its tools.
EVERY = {"profile": "default", "discovery": "all", "mode": "all", "count": 3, "listed": []}


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "mcpd.sock"


@pytest.fixture(autouse=True)
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")


def run(*argv: str) -> int:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    code = done.value.code
    assert isinstance(code, int)
    return code


# -- tools --


def test_tools_prints_a_table_with_servers_words_escaped_and_cut(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = {"name": "mcp__notes__long", "description": "word " * 100, "_meta": {}}
    with daemon(sock, tools_list={"tools": [*TOOLS, long]}):
        assert run("tools", "--socket", str(sock)) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "SERVER", "DESCRIPTION"]
    assert "Search the notes. Second line." in out
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\u202e" in out
    assert all(len(line) <= 100 for line in lines)
    assert next(line for line in lines if line.startswith("mcp__notes__long")).endswith("…")
    assert "mcp__bare__tool" in out and "?" in lines[3]
    assert lines[-1] == "4 tools"


def test_tools_json_and_policy_decisions(sock: Path, capsys: pytest.CaptureFixture[str]) -> None:
    decisions = {
        "mcp__notes__search": {"action": "allow", "rate": "30/min", "rule": 2},
        "mcp__evil__x": {"action": "deny", "rule": 0},
        "mcp__bare__tool": {"action": "ask", "rule": 1, "decider": "operator"},
    }
    with daemon(sock, mcpd_tools={**EVERY, "tools": TOOLS, "decisions": decisions}) as fake:
        assert run("tools", "--socket", str(sock), "--policy") == 0
        out = capsys.readouterr().out
        assert run("tools", "--socket", str(sock), "--policy", "--json") == 0
        listed = json.loads(capsys.readouterr().out)
    assert fake.requests[0]["params"]["policy"] is True
    assert "DECISION" in out.splitlines()[0]
    assert "allow (30/min) policy[2]" in out
    assert "deny policy[0]" in out
    row = next(line for line in out.splitlines() if line.startswith("mcp__bare__tool"))
    assert "ask (operator only) policy[1]" in row
    assert listed == {"tools": TOOLS, "decisions": decisions}
    other = sock.with_name("other.sock")
    with daemon(other, mcpd_tools={**EVERY, "tools": TOOLS, "decisions": {}}):
        assert run("tools", "--socket", str(other), "--policy") == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "mcp__bare" in line)
    assert " - " in row


@pytest.mark.parametrize(
    "answer",
    [
        {**EVERY, "tools": "search"},
        {**EVERY, "tools": TOOLS, "decisions": ["allow"]},
        {**EVERY, "tools": TOOLS, "listed": "all"},
        {"tools": TOOLS},
        ["mcp__notes__search"],
    ],
)
def test_tools_of_a_profile_of_another_shape_exit_4_saying_so(
    sock: Path, capsys: pytest.CaptureFixture[str], answer: object
) -> None:
    with daemon(sock, mcpd_tools=answer):
        assert run("tools", "--socket", str(sock), "--profile", "lean", "--policy") == 4
    err = capsys.readouterr().err
    assert err.startswith("mcpd: the answer of mcpd to mcpd/tools could not be read (")
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_tools_of_a_profile_say_how_its_agents_see_them(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    search = {
        "tools": TOOLS,
        "profile": "lean",
        "mode": "search",
        "discovery": "search",
        "listed": ["mcpd__search", "mcpd__call"],
    }
    with daemon(sock, mcpd_tools=search) as fake:
        assert run("tools", "--socket", str(sock), "--profile", "lean") == 0
    assert fake.requests[0]["params"]["profile"] == "lean"
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == (
        "3 tools; profile lean is in search mode (discovery search): its agents are listed "
        "2 tools (mcpd__search, mcpd__call) and find these by searching"
    )


def test_check_names_counts_the_hosts_prefix_and_says_what_to_set(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with daemon(sock, tools_list={"tools": TOOLS}):
        assert run("tools", "--socket", str(sock), "--check-names", "64") == 0
        assert "all 3 tool names fit 64 characters" in capsys.readouterr().out
        prefix = ["--check-names", "28", "--host-prefix", "mcp__mcpd__"]
        assert run("tools", "--socket", str(sock), *prefix) == 1
        out = capsys.readouterr().out
        assert "1 of 3 tool names do not fit 28 characters after the host's prefix" in out
        assert "  mcp__notes__search  (29)" in out
        assert "[naming] max_length = 17 makes mcpd shorten them" in out
        tight = ["--check-names", "20", "--host-prefix", "mcp__mcpd__"]
        assert run("tools", "--socket", str(sock), *tight) == 1
        said = capsys.readouterr().out
        assert "only 9 of 20 characters are left" in said and "a shorter host prefix" in said
        assert run("tools", "--socket", str(sock), "--check-names", "10") == 1
        said = capsys.readouterr().out
        assert "only 10 of 10" in said and "a host that takes longer names" in said


@pytest.mark.parametrize(
    ("answer", "code", "words"),
    [
        (lambda msg: error(msg, -32603, "registry gone"), 1, "error -32603: registry gone"),
        (lambda msg: b"{broken\n", 4, "could not be read"),
        (lambda msg: None, 3, "lost the connection"),
    ],
)
def test_tools_exit_code_says_what_went_wrong(
    sock: Path, capsys: pytest.CaptureFixture[str], answer: Any, code: int, words: str
) -> None:
    with daemon(sock, tools_list=answer):
        assert run("tools", "--socket", str(sock)) == code
    assert words in capsys.readouterr().err


def test_no_daemon_is_exit_3_naming_the_socket(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in ("tools", "status", "reload"):
        assert run(command, "--socket", str(sock)) == 3
        said = capsys.readouterr().err
        assert f'no mcpd is listening on "{sock}"' in said
        # and how to start one, as the bridge says
        assert said.endswith("; start one with `mcpd serve` or `systemctl start mcpd`\n")
    # A stray space from the command line shows.
    assert run("status", "--socket", f" {sock}") == 3
    assert f'no mcpd is listening on " {sock}"' in capsys.readouterr().err


# -- call --


@pytest.mark.parametrize(
    ("arguments", "words"),
    [("{not json", "arguments are not valid JSON"), ("[1]", "must be a JSON object")],
)
def test_call_arguments_must_be_a_json_object(
    sock: Path, capsys: pytest.CaptureFixture[str], arguments: str, words: str
) -> None:
    assert run("call", "--socket", str(sock), "mcp__notes__search", arguments) == 2
    assert words in capsys.readouterr().err


def test_call_prints_the_content_and_reports_progress_on_stderr(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def call(msg: dict[str, Any]) -> bytes:
        token = msg["params"]["_meta"]["progressToken"]

        def progress(**fields: Any) -> bytes:
            return notification("notifications/progress", {"progressToken": token, **fields})

        return (
            progress(progress=1, total=4, message="reading\x1b[2J")
            + progress(progress=2.5)
            + progress(message="no numbers")
            + result(msg, {"content": [{"type": "text", "text": "3 notes"}]})
        )

    with daemon(sock, tools_call=call) as fake:
        assert run("call", "--socket", str(sock), "mcp__notes__search", '{"q": "x"}') == 0
    captured = capsys.readouterr()
    assert captured.out == "3 notes\n"
    assert captured.err.splitlines() == [
        "mcpd: progress 1/4: reading\\x1b[2J",
        "mcpd: progress 2.5",
        "mcpd: progress: no numbers",
    ]
    assert fake.requests[0]["params"]["arguments"] == {"q": "x"}


def test_a_call_that_failed_exits_1_and_a_profile_is_taken_first(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = {"content": [{"type": "text", "text": "notes is down"}], "isError": True}
    with daemon(sock, tools_call=failed, mcpd_useProfile={}) as fake:
        argv = ["call", "--socket", str(sock), "--profile", "lean", "mcp__notes__search"]
        assert run(*argv) == 1
        assert run(*argv, "--json") == 1
    out = capsys.readouterr().out
    assert out.startswith("notes is down\n")
    assert json.loads(out[len("notes is down\n") :]) == failed
    assert [r["method"] for r in fake.requests] == [
        "mcpd/useProfile",
        "tools/call",
        "mcpd/useProfile",
        "tools/call",
    ]
    assert fake.requests[1]["params"]["arguments"] == {}


def test_a_profile_the_daemon_does_not_know_stops_the_call(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with daemon(sock, mcpd_useProfile=lambda msg: error(msg, -32602, "no profile x")) as fake:
        argv = ["call", "--socket", str(sock), "--profile", "x", "mcp__notes__search"]
        assert run(*argv) == 1
    assert "no profile x" in capsys.readouterr().err
    assert [r["method"] for r in fake.requests] == ["mcpd/useProfile"]


# -- status and reload --


def test_status_json_is_the_daemons_answer(sock: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = {"daemon": {"config": "/x.toml"}, "servers": []}
    with daemon(sock, mcpd_status=status):
        assert run("status", "--socket", str(sock), "--json") == 0
    assert json.loads(capsys.readouterr().out) == status


def test_reload_says_what_changed_and_what_waits_for_a_restart(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = {
        "added": ["docs"],
        "removed": [],
        "changed": ["web"],
        "unchanged": [],
        "restart": ["daemon.socket", "daemon.http_listen"],
        "settings": ["profiles", "policy"],
        "why": {"web": "its token\x1b[2J changed"},
    }
    with daemon(sock, mcpd_reload=report):
        assert run("reload", "--socket", str(sock)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "reloaded: added docs, removed -, changed web (restarted: its token\\x1b[2J changed), "
        "unchanged -",
        "in force now: profiles, policy",
        "not applied until mcpd restarts: daemon.socket, daemon.http_listen",
    ]


def test_a_reload_answered_in_another_shape_exits_4(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with daemon(sock, mcpd_reload={"added": "docs"}):
        assert run("reload", "--socket", str(sock)) == 4
    assert "the answer of mcpd to mcpd/reload could not be read" in capsys.readouterr().err


def test_a_config_the_daemon_refused_on_reload_exits_78(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = {"mcpd/configError": {"path": "servers.x.command"}}
    with daemon(sock, mcpd_reload=lambda msg: error(msg, -32000, "servers.x: bad", refused)):
        assert run("reload", "--socket", str(sock)) == 78
    assert "servers.x: bad" in capsys.readouterr().err
