"""A server shares the host's network namespace at every sandboxed level unless its
config takes the network away, and with it the host's abstract Unix sockets, which
have no path a mount could hide: an X server's ``@/tmp/.X11-unix/X0``, a D-Bus bus at
an ``abstract=`` address. The test binds one on the host, as those do; a sandboxed
server (default or strict) cannot connect to it, a server with ``sandbox = "off"``
can (what the sandbox stops), and a sandboxed server still uses an abstract socket
among its own processes. Nor do sandboxed servers reach each other's: one that listens
on an abstract name is out of every other server's reach (a hostile server must not
get a channel to another, nor answer for a name another one dials)."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from tests.support.daemons.sandboxed import (
    RUNTIME,
    agent_of,
    hostile,
    serving,
    steady,
    text,
    untouched,
    wait_ready,
)
from transports.stdio.sandbox import landlock

pytestmark = pytest.mark.timeout(120)

GREETING = "host-abstract-secret"


@pytest.fixture(autouse=True)
def _sandbox_scopes() -> None:
    why = landlock.scoping()
    if why is not None:
        pytest.skip(f"the kernel cannot keep a sandbox from abstract sockets here: {why}")


@asynccontextmanager
async def host_listener() -> AsyncIterator[str]:
    """An abstract Unix socket on the host that greets whoever connects; its name."""
    name = f"mcpd-test-abstract-{os.getpid()}-{secrets.token_hex(4)}"
    listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await listener.bind("\0" + name)
    listener.listen(8)

    async def greet() -> None:
        while True:
            conn, _ = await listener.accept()
            with conn:
                await conn.send(GREETING.encode())

    with listener:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(greet)
            yield name
            nursery.cancel_scope.cancel()


async def test_sandboxed_servers_cannot_reach_the_hosts_abstract_sockets(tmp_path: Path) -> None:
    servers = {
        "hostile": hostile(sandbox="strict", read=RUNTIME),
        "plain": hostile(),
        "open": hostile(sandbox="off"),
        "steady": steady(),
    }
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent, host_listener() as name:
            with trio.fail_after(90):
                await wait_ready(agent, *servers)
                before = await d.status()
                assert before["hostile"]["sandbox"]["level"] == "strict"
                assert before["plain"]["sandbox"]["level"] == "default"
                for alias in ("plain", "hostile"):
                    got = text(await agent.call(f"mcp__{alias}__abstract", {"name": name}))
                    assert got.startswith("refused: PermissionError"), (alias, got)
                    assert GREETING not in got, (alias, got)
                got = text(await agent.call("mcp__open__abstract", {"name": name}))
                assert got == f"ok: received {GREETING!r}", got
                await untouched(d, agent, before)
            assert "abstract Unix sockets" not in d.log()


async def test_a_sandboxed_server_still_uses_abstract_sockets_of_its_own(tmp_path: Path) -> None:
    servers = {
        "hostile": hostile(sandbox="strict", read=RUNTIME),
        "plain": hostile(),
        "steady": steady(),
    }
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            with trio.fail_after(90):
                await wait_ready(agent, *servers)
                for alias in ("plain", "hostile"):
                    name = f"mcpd-test-own-{alias}-{secrets.token_hex(4)}"
                    got = text(await agent.call(f"mcp__{alias}__abstract_own", {"name": name}))
                    assert got == "ok: its child received 'from its own process'", (alias, got)


async def test_sandboxed_servers_cannot_reach_each_others_abstract_sockets(
    tmp_path: Path,
) -> None:
    servers = {
        "hostile": hostile(sandbox="strict", read=RUNTIME),
        "plain": hostile(),
        "steady": steady(),
    }
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            with trio.fail_after(90):
                await wait_ready(agent, *servers)
                before = await d.status()
                names = {
                    alias: f"mcpd-test-served-{alias}-{secrets.token_hex(4)}"
                    for alias in ("plain", "hostile")
                }
                for alias, name in names.items():
                    got = text(await agent.call(f"mcp__{alias}__abstract_serve", {"name": name}))
                    assert got == f"ok: listening on @{name}", (alias, got)
                for alias, name in names.items():
                    # Its own listener answers it.
                    got = text(await agent.call(f"mcp__{alias}__abstract", {"name": name}))
                    assert got == f"ok: received 'hello from {name}'", (alias, got)
                    # The other server's does not.
                    other = "hostile" if alias == "plain" else "plain"
                    got = text(await agent.call(f"mcp__{other}__abstract", {"name": name}))
                    assert got.startswith("refused: PermissionError"), (other, got)
                    assert "hello" not in got, (other, got)
                await untouched(d, agent, before)
