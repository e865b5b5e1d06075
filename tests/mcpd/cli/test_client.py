"""The blocking client of the command line, against a stand-in on a socket: replies
matched by id, progress by token, what is broken or missing said as such; and how
a command finds the config the running daemon uses."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from mcpd.agents.entry import dial
from mcpd.cli import client as client_module
from mcpd.cli.client import (
    BadReply,
    Client,
    ConfigInUse,
    DaemonUnreachable,
    Running,
    Untrusted,
    config_in_use,
    running_daemon,
)
from protocol.jsonrpc import messages as rpc
from tests.support.cli.on_socket import mcpd
from tests.support.clients.agent import make_config, running
from tests.support.daemons.fake import FakeDaemon, error, notification, result
from tests.support.parts.status_rows import daemon as daemon_status
from tests.support.parts.status_rows import document
from tests.support.system.full_queue import full_queue
from tests.support.system.peer_user import needs_root, peer_uid, shared_dir, start_as


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "mcpd.sock"


def test_a_request_carries_the_modern_meta_and_gets_its_result(sock: Path) -> None:
    def echo(msg: dict[str, Any]) -> bytes:
        return result(msg, {"echo": msg["params"]["x"]})

    with FakeDaemon(sock, echo) as daemon, Client(str(sock)) as client:
        assert client.request("mcpd/echo", {"x": 1}) == {"echo": 1}
        assert client.request("mcpd/echo", {"x": 2}) == {"echo": 2}
    first, second = daemon.requests
    assert first["method"] == "mcpd/echo" and first["id"] != second["id"]
    meta = first["params"]["_meta"]
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcpd-cli"
    assert "progressToken" not in meta


def test_what_answers_another_request_is_passed_over(sock: Path) -> None:
    def answer(msg: dict[str, Any]) -> bytes:
        stray = {**msg, "id": "someone-else"}
        return (
            result(stray, "not yours")
            + error(stray, -32000, "not yours either")
            + notification("notifications/tools/list_changed", {})
            + result(msg, "yours")
        )

    with FakeDaemon(sock, answer), Client(str(sock)) as client:
        assert client.request("tools/list") == "yours"


def test_progress_for_this_request_alone_reaches_the_callback(sock: Path) -> None:
    def answer(msg: dict[str, Any]) -> bytes:
        token = msg["params"]["_meta"]["progressToken"]
        return (
            notification("notifications/progress", {"progressToken": token, "progress": 1})
            + notification("notifications/progress", {"progressToken": "other", "progress": 9})
            + notification("notifications/progress", {"progressToken": token, "progress": 2})
            + result(msg, {"done": True})
        )

    seen: list[dict[str, Any]] = []
    with FakeDaemon(sock, answer), Client(str(sock)) as client:
        assert client.request("tools/call", {"name": "x"}, seen.append) == {"done": True}
    assert [r["progress"] for r in seen] == [1, 2]


def test_an_error_reply_is_raised_with_its_code_and_one_without_an_id_too(sock: Path) -> None:
    def answer(msg: dict[str, Any]) -> bytes:
        if msg["params"].get("first"):
            return error(msg, -32602, "bad params", {"why": "x"})
        return error({"id": None}, -32700, "parse error")

    with FakeDaemon(sock, answer), Client(str(sock)) as client:
        with pytest.raises(rpc.RPCError) as caught:
            client.request("tools/call", {"first": True})
        assert (caught.value.code, caught.value.message) == (-32602, "bad params")
        with pytest.raises(rpc.RPCError) as caught:
            client.request("tools/call")
        assert caught.value.code == -32700


@pytest.mark.parametrize(
    "reply",
    [
        b"this is not json\n",
        b'{"jsonrpc": "2.0", "id": 1, "result": }\n',
        b"[1, 2\n",
        b"\xff\xfe\n",
    ],
)
def test_a_reply_that_cannot_be_read_is_a_bad_reply_naming_the_socket(
    sock: Path, reply: bytes
) -> None:
    with (
        FakeDaemon(sock, lambda msg: reply),
        Client(str(sock)) as client,
        pytest.raises(BadReply) as caught,
    ):
        client.request("mcpd/status")
    assert f"the reply of mcpd on {sock} could not be read" in str(caught.value)
    assert f"it began {reply[:-1]!r}" in str(caught.value)


@pytest.mark.parametrize("number", [b"1e400", b"9" * 5000])
def test_a_result_that_cannot_be_decoded_is_not_called_the_reply_of_mcpd(
    sock: Path, number: bytes
) -> None:
    # mcpd passes a tool's result on as its server wrote it: a value in it this client
    # cannot decode is not mcpd's line being unreadable.
    reply = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"n":' + number + b"}}\n"
    with (
        FakeDaemon(sock, lambda msg: reply),
        Client(str(sock)) as client,
        pytest.raises(BadReply) as caught,
    ):
        client.request("tools/call")
    said = str(caught.value)
    assert f"the reply of mcpd on {sock} holds a value that could not be decoded" in said
    assert "a number no JSON decoder reads" in said
    assert "what a tool server sent is passed on as it came" in said
    assert "could not be read" not in said


def test_a_long_bad_reply_is_quoted_only_in_its_beginning(sock: Path) -> None:
    junk = b"<" + b"x" * 5000 + b">\n"
    with (
        FakeDaemon(sock, lambda msg: junk),
        Client(str(sock)) as client,
        pytest.raises(BadReply) as caught,
    ):
        client.request("mcpd/status")
    assert f"it began {junk[:80]!r}" in str(caught.value)
    assert "x" * 80 not in str(caught.value)


def test_a_daemon_that_hangs_up_is_unreachable_not_a_hang(sock: Path) -> None:
    with (
        FakeDaemon(sock, lambda msg: None),
        Client(str(sock)) as client,
        pytest.raises(DaemonUnreachable, match=r"lost the connection to mcpd on .*closed"),
    ):
        client.request("mcpd/status")


def test_a_reply_split_across_writes_is_read_whole(sock: Path) -> None:
    def answer(msg: dict[str, Any]) -> bytes:
        return result(msg, {"tools": [{"name": "t" * 70000}]})

    with FakeDaemon(sock, answer), Client(str(sock)) as client:
        assert client.request("tools/list")["tools"][0]["name"] == "t" * 70000


def test_list_tools_follows_the_cursor_to_the_end(sock: Path) -> None:
    pages = {None: ({"name": "a"}, "p2"), "p2": ({"name": "b"}, "p3"), "p3": ({"name": "c"}, "")}

    def answer(msg: dict[str, Any]) -> bytes:
        tool, cursor = pages[msg["params"].get("cursor")]
        return result(msg, {"tools": [tool], **({"nextCursor": cursor} if cursor else {})})

    with FakeDaemon(sock, answer) as daemon, Client(str(sock)) as client:
        assert [t["name"] for t in client.list_tools()] == ["a", "b", "c"]
    assert [r["params"].get("cursor") for r in daemon.requests] == [None, "p2", "p3"]


# -- when nothing answers --


def test_no_socket_or_no_listener_is_unreachable_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(
        DaemonUnreachable, match=r"no mcpd is listening on \".*absent\" \(No such file"
    ):
        Client(str(tmp_path / "absent"))
    dead = tmp_path / "dead.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(dead))
    s.close()  # the file stays, nobody listens
    with pytest.raises(DaemonUnreachable, match=r"\(Connection refused\)"):
        Client(str(dead))


def test_a_system_daemon_is_pointed_at_when_the_users_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = tmp_path / "system.sock"
    system.touch()
    monkeypatch.setattr(dial, "SYSTEM_SOCKET", str(system))
    with pytest.raises(DaemonUnreachable) as caught:
        Client(str(tmp_path / "mine.sock"))
    assert f"a system mcpd listens on {system}: use --socket or MCPD_SOCKET" in str(caught.value)
    with pytest.raises(DaemonUnreachable) as caught:
        Client(str(system))
    assert "system mcpd" not in str(caught.value)


def test_a_socket_closed_by_its_mode_names_the_group_to_join_or_the_owner(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcpd.sock"
    path.touch()
    os.chmod(path, 0o660)
    said = dial._refused_by_mode(str(path))
    assert said.startswith(f"not allowed to connect to {path}: the socket's file permissions")
    assert "(ask to be added to group " in said
    os.chmod(path, 0o600)
    assert dial._refused_by_mode(str(path)).endswith("(mode 0600: its owner only)")
    gone = dial._refused_by_mode(str(tmp_path / "gone"))
    assert gone.endswith("keep you out")


def test_a_daemon_of_another_user_is_told_nothing(
    sock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_module, "untrusted_daemon", lambda s, path: f"{path}: stranger")
    with FakeDaemon(sock, lambda msg: result(msg, {})) as daemon:
        with pytest.raises(Untrusted, match="stranger"):
            Client(str(sock))
        with pytest.raises(Untrusted):
            running_daemon(str(sock))
        with pytest.raises(Untrusted):
            config_in_use(None, str(sock))
    assert daemon.requests == []


# -- the config in use --


def status_with(config: str | None, **daemon: Any) -> Any:
    said = msgspec.to_builtins(document(daemon_status(config=config, **daemon)))
    return lambda msg: result(msg, said)


def test_the_running_daemon_says_which_config_it_reads(sock: Path) -> None:
    with FakeDaemon(sock, status_with("/etc/mcpd/other.toml")):
        assert running_daemon(str(sock)) == Running(str(sock), "/etc/mcpd/other.toml")
    with FakeDaemon(sock.with_name("demo.sock"), status_with("")):
        assert running_daemon(str(sock.with_name("demo.sock"))) == Running(
            str(sock.with_name("demo.sock")), None
        )


def test_the_running_daemon_says_where_it_keeps_its_state(sock: Path, tmp_path: Path) -> None:
    state = tmp_path / "demo-state"
    with FakeDaemon(sock, status_with("", state_file=str(state / "state.json"))):
        assert running_daemon(str(sock)) == Running(str(sock), None, str(state))
        assert config_in_use(None, str(sock)).state_dir == str(state)
    assert config_in_use("/etc/mcpd/config.toml", str(sock)).state_dir is None


@pytest.mark.parametrize(
    "answer",
    [
        lambda msg: result(msg, {"servers": []}),
        lambda msg: result(msg, ["not", "a", "status"]),
        lambda msg: result(msg, {"daemon": "up"}),
        lambda msg: result(msg, msgspec.to_builtins(document())),
        lambda msg: error(msg, -32601, "method not found"),
        lambda msg: b"garbage\n",
        lambda msg: None,
    ],
)
def test_an_answer_without_a_config_is_no_running_daemon(sock: Path, answer: Any) -> None:
    with FakeDaemon(sock, answer):
        assert running_daemon(str(sock)) is None


def test_the_config_in_use_is_the_flag_then_the_variable_then_the_daemons_then_the_default(
    sock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCPD_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    default = f"{tmp_path}/xdg/mcpd/config.toml"
    with FakeDaemon(sock, status_with("/srv/running.toml")):
        assert config_in_use("/given.toml", str(sock)) == ConfigInUse("/given.toml")
        assert config_in_use(None, str(sock)) == ConfigInUse("/srv/running.toml", str(sock))
        monkeypatch.setenv("MCPD_CONFIG", "/from/env.toml")
        assert config_in_use(None, str(sock)) == ConfigInUse("/from/env.toml")
        monkeypatch.delenv("MCPD_CONFIG")
    assert config_in_use(None, str(sock)) == ConfigInUse(default)
    demo = sock.with_name("demo.sock")
    with FakeDaemon(demo, status_with(None)):
        assert config_in_use(None, str(demo)) == ConfigInUse(default, str(demo))


def test_a_listen_queue_that_stays_full_is_one_line_naming_the_socket(sock: Path) -> None:
    with full_queue(sock), pytest.raises(DaemonUnreachable) as raised:
        Client(str(sock), timeout=0.2)
    message = str(raised.value)
    assert str(sock) in message and "listen queue stayed full" in message
    assert "\n" not in message


# Connects and hangs up as fast as it can, from argv[2] processes, until killed (the
# others end once the first is gone); says "flooding" once a connection is made.
FLOOD = """
import os, socket, sys
leader = os.getpid()
for _ in range(int(sys.argv[2]) - 1):
    if os.fork() == 0:
        break
n = 0
while os.getpid() == leader or n % 256 or os.getppid() == leader:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sys.argv[1])
    except OSError:
        pass
    s.close()
    n += 1
    if n == 1 and os.getpid() == leader:
        print("flooding", flush=True)
"""


@needs_root
async def test_the_owners_status_gets_in_while_another_user_floods_the_socket(
    tmp_path: Path,
) -> None:
    sock = shared_dir() / "mcpd.sock"
    cfg = make_config(tmp_path, {}, socket=str(sock), socket_mode="0666")
    with trio.fail_after(120):
        async with running(cfg):
            flood = await start_as(peer_uid(), FLOOD, str(sock), "4")
            try:
                assert flood.stdout is not None
                assert b"flooding" in await flood.stdout.receive_some(64)
                for _ in range(6):
                    await mcpd(sock, "status")
            finally:
                flood.kill()
                await flood.wait()
