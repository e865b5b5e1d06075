"""The endpoint knows mcpd's servers, through a running daemon: a server that shares the
host's loopback and gets hold of the page's cookie (a browser sends it to every port of
127.0.0.1, the server's own page too), of a one-time code, or of the endpoint's token,
gets nothing with it from its own process or from one it starts, and the log says so;
the user's own process with the same cookie, code or token is served. A connection
that no process can be seen to hold (its socket put in flight) is not told from a
server's; who holds a connection is looked up once, a failure too."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
import trio.testing

from mcpd.agents.entry import holders
from mcpd.agents.entry.holders import HolderLookup, Lookups, TcpKin, tcp_held
from mcpd.agents.entry.identity import Holder
from mcpd.local.ownership.tcp_holder import HolderUnknown, ServerNotRuledOut
from mcpd.policy.deciders.kin import AgentKin, Decider
from tests.support.clients.agent import Agent, connect, make_config, running
from tests.support.clients.tcp_client import held_by_a_child
from tests.support.page.http_session import code_url, csrf_of, http, session
from transports.complaints import Complaints
from transports.stdio.loopback.relay import relay_loopback

LIMIT = 60


def nobody(port: int, to: int) -> None:
    """No connection is relayed for a server."""
    return None


LOOPBACK = str(Path(__file__).resolve().parents[3] / "support" / "breakout" / "loopback_server.py")


def config(tmp_path: Path) -> Any:
    return make_config(
        tmp_path,
        {"thief": {"command": sys.executable, "args": [LOOPBACK]}},
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
        startup_deadline=10.0,
    )


def raw(port: int, method: str, path: str, headers: dict[str, str], body: str = "") -> str:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    lines += [f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
    return "\r\n".join(lines) + "\r\n\r\n" + body


async def from_server(
    agent: Agent, port: int, request: str, under: bool, close: bool = False
) -> dict[str, Any]:
    """What the server's process (``under``: a child of it) was answered; ``close``:
    sent corked and closed at once, unanswered."""
    out = await agent.call(
        "mcp__thief__request", {"port": port, "request": request, "under": under, "close": close}
    )
    seen: dict[str, Any] = json.loads(out["content"][0]["text"])
    return seen


async def test_a_servers_process_gets_nothing_with_the_pages_cookie(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "mcpd.http")
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon, connect(daemon.socket_path) as agent:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            own = f"http://127.0.0.1:{port}"
            cookie, csrf = await session(port, daemon.socket_path)
            act = {
                "Cookie": cookie,
                "Origin": own,
                "X-Mcpd-Csrf": csrf,
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            }
            for under in (False, True):
                page = await from_server(
                    agent, port, raw(port, "GET", "/", {"Cookie": cookie}), under
                )
                assert page["status"] == 403 and "mcpd-csrf" not in page["body"]
                assert "thief" in page["body"] and "server" in page["body"]
                post = raw(port, "POST", "/page/login", act, "server=thief")
                acted = await from_server(agent, port, post, under)
                assert acted["status"] == 403 and "thief" in json.loads(acted["body"])["error"]
            # The user's own process, with the same cookie, is served as before.
            mine = await http(port, "GET", "/", {"Cookie": cookie})
            assert mine.status == 200 and csrf_of(mine.body) == csrf
            fair = await http(port, "POST", "/page/login", act, b"server=thief")
            assert fair.status == 409 and "stdio server" in fair.json()["error"]
    said = [r for r in caplog.records if "a process of the server thief" in r.getMessage()]
    assert said and "the status page's session" in said[0].getMessage()
    assert said[0].__dict__["mcpd_event"] == "server_on_endpoint"


async def test_a_servers_process_trades_no_code_and_leaves_it_for_the_user(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon, connect(daemon.socket_path) as agent:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            query = urlsplit(await code_url(daemon.socket_path)).query
            for under in (False, True):
                traded = await from_server(agent, port, raw(port, "GET", f"/?{query}", {}), under)
                assert traded["status"] == 403 and traded["set_cookie"] == ""
                assert "thief" in traded["body"]
            mine = await http(port, "GET", f"/?{query}", {})
            assert mine.status == 200 and mine.headers["set-cookie"].startswith("mcpd_page_")


async def test_a_servers_process_is_refused_with_the_endpoints_token(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon, connect(daemon.socket_path) as agent:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            bearer = {"Authorization": f"Bearer {daemon.http_token()}"}
            for under in (False, True):
                status = await from_server(agent, port, raw(port, "GET", "/status", bearer), under)
                assert status["status"] == 403
                assert "thief" in json.loads(status["body"])["error"]["message"]
            mine = await http(port, "GET", "/status", bearer)
            assert mine.status == 200 and mine.json()["servers"][0]["alias"] == "thief"


def mark_call(port: int, token: str) -> str:
    """A request with the token that calls the server's ``mark`` tool."""
    params = {
        "name": "mcp__thief__mark",
        "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "thief", "version": "0"},
        },
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "mcp__thief__mark",
    }
    return raw(port, "POST", "/mcp", headers, body)


async def calls(port: int, token: str) -> int:
    """How many calls of the server's tools mcpd's metrics count."""
    metrics = await http(port, "GET", "/metrics", {"Authorization": f"Bearer {token}"})
    assert metrics.status == 200
    lines = metrics.body.decode().splitlines()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in lines
        if line.startswith("mcpd_calls_total{") and 'server="thief"' in line
    )


async def test_a_servers_request_with_the_token_sent_as_its_socket_closes_runs_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "mcpd.http")
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon, connect(daemon.socket_path) as agent:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            # The request reaches mcpd only with the close: no process holds the
            # server's socket by the time mcpd looks.
            await from_server(agent, port, mark_call(port, token), False, close=True)
            await agent.call("mcp__thief__mark", {})  # the agent's own calls are counted
            refused = "no process holds its other end"
            while not any(refused in r.getMessage() for r in caplog.records):
                assert await calls(port, token) <= 2, "the closed request ran"
                await trio.sleep(0.05)
            assert await calls(port, token) == 2

    listener = trio.socket.socket()
    with trio.fail_after(LIMIT), listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.create_connection(listener.getsockname())
        conn, _ = await listener.accept()
        with conn, client:
            here = os.getpid()
            assert await tcp_held(conn, Lookups(lambda pid: None, nobody, list)) == Holder(
                os.geteuid(), pid=here
            )
            thief = Lookups(lambda pid: "thief" if pid == here else None, nobody, list)
            theirs = await tcp_held(conn, thief)
            assert theirs == Holder(os.geteuid(), "thief", here)
            # Its only descriptor in flight on a socket of this process's: no process
            # holds it now, a server's that sent its request first no more than another.
            ends = socket.socketpair()
            with ends[0], ends[1]:
                socket.send_fds(ends[0], [b"x"], [client.fileno()])
                client.close()
                with pytest.raises(ServerNotRuledOut, match="no process that mcpd can read"):
                    await tcp_held(conn, Lookups(lambda pid: None, nobody, list))


async def test_a_connection_mcpds_relay_opens_for_a_server_is_refused_as_the_servers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "mcpd.http")
    with trio.fail_after(LIMIT):
        async with running(config(tmp_path)) as daemon, trio.open_nursery() as nursery:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            bearer = {"Authorization": f"Bearer {daemon.http_token()}"}
            # A grant of the endpoint's port, as mcpd relays it for a server without a
            # network (its namespace's listener, here one of this one's).
            inside = socket.socket()
            inside.bind(("127.0.0.1", 0))
            inside.listen()
            relay_port = inside.getsockname()[1]
            nursery.start_soon(relay_loopback, "thief", [(inside, port)], Complaints())
            stream = await trio.open_tcp_stream("127.0.0.1", relay_port)
            async with stream:
                await stream.send_all(raw(port, "GET", "/status", bearer).encode())
                reply = b""
                while chunk := await stream.receive_some(1 << 16):
                    reply += chunk
            head, _, body = reply.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 403")
            assert "relay of the server 'thief'" in json.loads(body)["error"]["message"]
            mine = await http(port, "GET", "/status", bearer)
            assert mine.status == 200
            nursery.cancel_scope.cancel()
    said = [r for r in caplog.records if r.__dict__.get("mcpd_event") == "server_on_endpoint"]
    assert said and "the server thief, through mcpd's relay" in said[0].getMessage()


async def test_who_holds_a_connection_is_looked_up_once_a_failure_too() -> None:
    asked: list[str] = []

    async def found() -> Holder:
        asked.append("found")
        return Holder(1000, "thief", 42)

    async def unknown() -> Holder:
        asked.append("unknown")
        raise ServerNotRuledOut("no process holds it")

    owner, nobody = HolderLookup(found), HolderLookup(unknown)
    assert await owner.held() == await owner.held() == Holder(1000, "thief", 42)
    for _ in range(2):
        with pytest.raises(ServerNotRuledOut, match="no process holds it"):
            await nobody.held()
    assert asked == ["found", "unknown"]
    with pytest.raises(HolderUnknown):
        await nobody.held()


async def test_the_processes_that_hold_a_tcp_connection_are_looked_for_one_look_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that ends connections by the hundred, or an approval that asks of every
    connection, costs one look through /proc at a time among all of them (each
    connection's own and the token's), and a connection's once for its life."""
    looks: list[str] = []
    real_kin, real_deciders = holders.tcp_kin, holders.tcp_deciders

    def counted_kin(sock: trio.socket.SocketType, until: float) -> AgentKin:
        looks.append("kin")
        return real_kin(sock, until)

    def counted_deciders(sock: trio.socket.SocketType, until: float) -> tuple[Decider, ...]:
        looks.append("deciders")
        return real_deciders(sock, until)

    monkeypatch.setattr(holders, "tcp_kin", counted_kin)
    monkeypatch.setattr(holders, "tcp_deciders", counted_deciders)
    lookups = Lookups(lambda pid: None, nobody, list)
    with trio.fail_after(LIMIT):
        async with held_by_a_child() as (conn, child):
            tcp = TcpKin(conn, lookups)
            found: list[AgentKin] = []

            async def kin() -> None:
                found.append(await tcp.kin())

            # The lock held: another connection's look.
            async with trio.open_nursery() as nursery, lookups.one_at_a_time:
                nursery.start_soon(kin)
                await trio.testing.wait_all_tasks_blocked()
                assert looks == [] and found == []
            [agent] = found
            assert [p.pid for p in agent.agents] == [child.pid]
            assert await tcp.kin() is agent
            [decider] = await tcp.deciders()
            assert decider.lineage[0].pid == child.pid
            assert await tcp.deciders() == (decider,)
    assert looks == ["kin", "deciders"]
