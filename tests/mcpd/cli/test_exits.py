"""How a command stops: with the exit code of what went wrong (2 usage, 3 no daemon, 4 a
reply that cannot be read, 78 a config the daemon would not take, 1 anything else it
could not do) and a message on stderr in which a server's words cannot drive the
terminal."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.cli.client import BadReply, DaemonUnreachable, Untrusted
from mcpd.cli.exits import (
    EXIT_BAD_REPLY,
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ask,
    fail,
)
from mcpd.config.tables.model import CONFIG_ERROR, EX_CONFIG
from protocol.jsonrpc import messages as rpc

HOSTILE = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202eevil\u200b\r"


class Answering:
    """A client whose one request ends as ``outcome`` says."""

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome
        self.asked: list[tuple[str, Any]] = []

    def request(self, method: str, params: Any, progress: Any = None) -> Any:
        self.asked.append((method, params))
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


def stopped(capsys: pytest.CaptureFixture[str], outcome: Any, **kw: Any) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        ask(Answering(outcome), "mcpd/x", **kw)  # type: ignore[arg-type]
    assert isinstance(info.value.code, int)
    return info.value.code, capsys.readouterr().err


def test_a_result_comes_back_as_it_is() -> None:
    client = Answering({"ok": True})
    assert ask(client, "mcpd/status", {"a": 1}) == {"ok": True}  # type: ignore[arg-type]
    assert client.asked == [("mcpd/status", {"a": 1})]


@pytest.mark.parametrize(
    ("outcome", "code", "said"),
    [
        (
            DaemonUnreachable("no daemon answers on /run/x.sock"),
            EXIT_UNREACHABLE,
            "no daemon answers",
        ),
        (Untrusted("runs as uid 0"), EXIT_UNREACHABLE, "runs as uid 0"),
        (BadReply("not JSON"), EXIT_BAD_REPLY, "not JSON"),
        (rpc.RPCError(-32602, "no tool named x"), EXIT_FAILED, "error -32602: no tool named x"),
        (
            rpc.RPCError(-32000, "servers.a: bad key", {CONFIG_ERROR: True}),
            EX_CONFIG,
            "mcpd: servers.a: bad key",
        ),
    ],
)
def test_each_failure_has_its_exit_code_and_says_why(
    capsys: pytest.CaptureFixture[str], outcome: Exception, code: int, said: str
) -> None:
    got, err = stopped(capsys, outcome)
    assert got == code and said in err and err.startswith("mcpd: ")


def test_an_error_without_its_code_is_said_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = stopped(capsys, rpc.RPCError(-32000, "no login waits"), code=False)
    assert code == EXIT_FAILED and err == "mcpd: no login waits\n"


def test_a_servers_words_in_an_error_cannot_drive_the_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = stopped(capsys, rpc.RPCError(-32000, f"tool failed: {HOSTILE}\nsecond line"))
    assert code == EXIT_FAILED
    for ch in ("\x1b", "\x07", "\x9b", "\u202e", "\u200b", "\r"):
        assert ch not in err
    assert "\\x1b[2J" in err and err.count("\n") == 1  # its own line break is escaped
    assert err.endswith("\\nsecond line\n")


@pytest.mark.parametrize("brk", ["\n", "\r\n", "\r", "\u2028", "\x85"])
def test_a_servers_error_cannot_add_lines_that_read_as_mcpds(
    capsys: pytest.CaptureFixture[str], brk: str
) -> None:
    message = f"err link{brk}[mcpd] daemon stopped{brk}mcpd: restart it"
    code, err = stopped(capsys, rpc.RPCError(-32000, message))
    assert code == EXIT_FAILED
    assert err.startswith("mcpd: error -32000: err link")
    assert err.count("\n") == 1 and "\n[mcpd]" not in err and "\nmcpd:" not in err
    for ch in ("\r", "\u2028", "\x85"):
        assert ch not in err


def test_fail_stops_with_the_code_given(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        fail(EXIT_USAGE, "--last must be 0 (all) or more")
    assert info.value.code == EXIT_USAGE
    assert capsys.readouterr().err == "mcpd: --last must be 0 (all) or more\n"


def test_a_host_written_with_non_ascii_letters_in_an_error_is_shown_in_ascii(
    capsys: pytest.CaptureFixture[str],
) -> None:
    said = "cannot start the login: the authorization server https://\u0430ccounts.google.com"
    code, err = stopped(capsys, rpc.RPCError(-32000, said), code=False)
    assert code == EXIT_FAILED and "\u0430" not in err
    assert "https://xn--ccounts-1fg.google.com (the host" in err
    assert "is written with non-ASCII letters" in err
