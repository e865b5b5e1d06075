"""``mcpd status``, ``reset``, ``auth``, ``tools`` and ``connect`` against a stand-in for
a daemon of another version: what it adds to an answer is passed over, what it leaves out that has a
default takes it, and an answer of another shape ends the command with exit code 4
and a sentence saying so, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpd.cli.client import running_daemon
from mcpd.cli.hosts.connect import endpoint_url
from mcpd.cli.main import main
from mcpd.config.loading.load import parse_config
from mcpd.login_answers import AuthStatus, LoggedOut
from mcpd.server_row import ResetOutcome
from tests.support.daemons.fake import answering as daemon
from tests.support.daemons.fake import result
from tests.support.parts.status_rows import daemon as daemon_status
from tests.support.parts.status_rows import document, login_row, server_row


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "mcpd.sock"


def run(*argv: str) -> int:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    code = done.value.code
    assert isinstance(code, int)
    return code


def as_json(value: object) -> Any:
    return msgspec.to_builtins(value)


def status_answer() -> Any:
    return as_json(
        document(
            daemon_status(version="9.9", pid=7, socket="/s", summary="1 server: 1 ready"),
            [server_row("notes", state="ready", tools=3, prompts=2)],
        )
    )


def test_status_passes_over_what_a_newer_daemon_adds(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = status_answer()
    answer["daemon"]["moon_phase"] = "full"
    answer["servers"][0]["mood"] = {"calm": True}
    answer["weather"] = []
    with daemon(sock, mcpd_status=answer):
        assert run("status", "--socket", str(sock)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("mcpd 9.9 (pid 7) on /s — 1 server: 1 ready; 0 tools, 0 prompts")
    assert out[2].split()[:5] == ["notes", "ready", "-", "3", "2"]


def test_status_takes_the_defaults_of_what_an_older_daemon_leaves_out(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = status_answer()
    row = answer["servers"][0]
    for key in ("prompts", "resources", "resource_templates", "warnings", "cut"):
        del row[key]
    for key in ("held", "findings", "state_file"):
        answer["daemon"].pop(key, None)
    with daemon(sock, mcpd_status=answer):
        assert run("status", "--socket", str(sock)) == 0
    notes = capsys.readouterr().out.splitlines()[2]
    assert notes.split()[:6] == ["notes", "ready", "-", "3", "0", "0"]


@pytest.mark.parametrize("number", [b"1e999", b"-1e999"])
@pytest.mark.parametrize("argv", [["status", "--json"], ["status"]], ids=["json", "table"])
def test_a_status_with_a_number_past_a_floats_range_exits_4_saying_so(
    sock: Path, capsys: pytest.CaptureFixture[str], number: bytes, argv: list[str]
) -> None:
    answer = status_answer()
    answer["daemon"]["uptime_s"] = 12345.5
    written = result({"id": 1}, answer).replace(b"12345.5", number)
    assert number in written

    def reply(msg: dict[str, Any]) -> bytes:
        return written.replace(b'"id": 1', f'"id": {json.dumps(msg["id"])}'.encode(), 1)

    with daemon(sock, mcpd_status=reply):
        assert run(*argv, "--socket", str(sock)) == 4
    err = capsys.readouterr().err
    assert err.startswith("mcpd: the answer of mcpd to mcpd/status could not be read ("), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "answer",
    [
        {"daemon": "up", "servers": [], "profiles": []},
        {"servers": []},
        [1, 2],
        "up",
    ],
)
def test_a_status_of_another_shape_exits_4_saying_so(
    sock: Path, capsys: pytest.CaptureFixture[str], answer: object
) -> None:
    with daemon(sock, mcpd_status=answer):
        assert run("status", "--socket", str(sock)) == 4
    err = capsys.readouterr().err
    assert err.startswith("mcpd: the answer of mcpd to mcpd/status could not be read (")
    assert "Traceback" not in err


def test_a_row_of_another_shape_in_the_status_beside_the_tools_exits_4(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = status_answer()
    answer["servers"][0]["tools"] = "three"
    with daemon(sock, tools_list={"tools": []}, mcpd_status=answer):
        assert run("tools", "--socket", str(sock)) == 4
    assert "the answer of mcpd to mcpd/status could not be read" in capsys.readouterr().err


def reset_answer(**fields: Any) -> Any:
    outcome = ResetOutcome(
        server="web",
        was="open",
        circuit="open",
        reset=True,
        state="ready",
        waiting=False,
        next_try=None,
    )
    return {**as_json(outcome), **fields}


def test_reset_reads_its_outcome_and_passes_over_what_is_added(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with daemon(sock, mcpd_reset=reset_answer(weather="fine")):
        assert run("reset", "web", "--socket", str(sock)) == 0
    assert capsys.readouterr().out == (
        "web: circuit closed on trial (was open); its next call decides\n"
    )


def test_a_reset_outcome_of_another_shape_exits_4(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with daemon(sock, mcpd_reset=reset_answer(reset="yes")):
        assert run("reset", "web", "--socket", str(sock)) == 4
    err = capsys.readouterr().err
    assert "the answer of mcpd to mcpd/reset could not be read" in err
    assert "$.reset" in err


def test_auth_status_reads_each_login_and_an_older_daemons_lack_of_unconfigured(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {**as_json(login_row("web", issuer="https://id.example")), "color": "blue"}
    with daemon(sock, mcpd_auth_status={"servers": [row]}):
        assert run("auth", "status", "--socket", str(sock)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:4] == ["web", "needs_login", "-", "https://id.example"]
    assert msgspec.convert({"servers": []}, AuthStatus).unconfigured == []


def test_auth_answers_of_another_shape_exit_4(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = LoggedOut(
        server="web", had_tokens=False, revoked=[], not_revocable=[], problem=None, unrevoked=[]
    )
    answers = {
        "mcpd_auth_status": {"servers": [{"server": "web"}]},
        "mcpd_auth_logout": {**as_json(gone), "revoked": "all"},
    }
    with daemon(sock, **answers):
        assert run("auth", "status", "--socket", str(sock)) == 4
        assert "to mcpd/auth/status could not be read" in capsys.readouterr().err
        assert run("auth", "logout", "web", "--socket", str(sock)) == 4
    assert "the answer of mcpd to mcpd/auth/logout could not be read" in capsys.readouterr().err


@pytest.mark.parametrize(
    "answer",
    [
        ["mcp__notes__search"],
        {"tools": {"name": "mcp__notes__search"}},
        {"tools": [{"description": "no name"}]},
        {"tools": [], "nextCursor": 2},
    ],
)
def test_a_tool_list_of_another_shape_exits_4_saying_so(
    sock: Path, capsys: pytest.CaptureFixture[str], answer: object
) -> None:
    with daemon(sock, tools_list=answer):
        assert run("tools", "--socket", str(sock), "--json") == 4
    err = capsys.readouterr().err
    assert err.startswith("mcpd: the answer of mcpd to tools/list could not be read (")
    assert "Traceback" not in err


def test_a_status_of_another_shape_is_no_running_daemon_whatever_config_it_names(
    sock: Path,
) -> None:
    with daemon(sock, mcpd_status={"daemon": {"config": "/etc/mcpd/config.toml"}}):
        assert running_daemon(str(sock)) is None


def test_the_endpoint_of_port_0_read_from_a_status_of_another_shape_exits_4(
    sock: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = parse_config({"daemon": {"http_listen": "127.0.0.1:0"}}, env={})
    answer = status_answer()
    answer["daemon"]["http"] = ["http://127.0.0.1:4711/mcp"]
    with daemon(sock, mcpd_status=answer), pytest.raises(SystemExit) as done:
        endpoint_url(config, str(sock))
    assert done.value.code == 4
    assert "the answer of mcpd to mcpd/status could not be read" in capsys.readouterr().err
    answer["daemon"]["http"] = "http://127.0.0.1:4711/mcp"
    served = sock.with_name("served.sock")
    with daemon(served, mcpd_status=answer):
        assert endpoint_url(config, str(served)) == "http://127.0.0.1:4711/mcp"


@pytest.mark.parametrize(
    "argv",
    [["approvals"], ["approvals", "--json"], ["approvals", "show", "a1"]],
    ids=["table", "json", "show"],
)
def test_approvals_of_another_shape_exit_4_saying_so(
    sock: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    answers = {
        "mcpd_approvals_list": {"approvals": "none", "version": 1},
        "mcpd_approvals_show": {"approval": [], "arguments": "{}"},
    }
    with daemon(sock, **answers):
        assert run(*argv, "--socket", str(sock)) == 4
    err = capsys.readouterr().err
    assert err.startswith("mcpd: the answer of mcpd to mcpd/approvals/")
    assert "could not be read" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "method"),
    [
        (["tools", "--pending"], "mcpd/pins/pending"),
        (["tools", "--findings"], "mcpd/pins/findings"),
        (["approve", "notes", "--yes"], "mcpd/pins/pending"),
        (["pins", "forget-unreadable"], "mcpd/pins/forget_unreadable"),
        (["pins", "export"], "mcpd/pins/export"),
    ],
)
def test_pin_answers_of_another_shape_exit_4_saying_so(
    sock: Path, capsys: pytest.CaptureFixture[str], argv: list[str], method: str
) -> None:
    answers = {
        "mcpd_pins_may_approve": {},
        "mcpd_pins_pending": {"pending": "none"},
        "mcpd_pins_findings": {"findings": [{"server": "notes", "rule": 3}]},
        "mcpd_pins_forget_unreadable": {"removed": 3, "approved": []},
        "mcpd_pins_export": {"version": 1},
    }
    with daemon(sock, **answers):
        assert run(*argv, "--socket", str(sock)) == 4
    err = capsys.readouterr().err
    assert err.startswith(f"mcpd: the answer of mcpd to {method} could not be read (")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "method"),
    [
        (["call", "mcp__notes__search"], "tools/call"),
        (["prompt", "greet"], "prompts/get"),
        (["read", "file:///a"], "resources/read"),
        (["prompts"], "prompts/list"),
        (["resources"], "resources/list"),
        (["auth", "status", "--json"], "mcpd/auth/status"),
    ],
)
def test_results_of_another_shape_exit_4_saying_so(
    sock: Path, capsys: pytest.CaptureFixture[str], argv: list[str], method: str
) -> None:
    answers = {
        "tools_call": ["done"],
        "prompts_get": "hello",
        "resources_read": 7,
        "prompts_list": {"prompts": "greet"},
        "resources_list": {"resources": [], "nextCursor": {"page": 2}},
        "mcpd_auth_status": {"servers": 3},
    }
    with daemon(sock, **answers):
        assert run(*argv, "--socket", str(sock)) == 4
    err = capsys.readouterr().err
    assert err.startswith(f"mcpd: the answer of mcpd to {method} could not be read (")
    assert "Traceback" not in err
