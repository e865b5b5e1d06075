"""A server without a network granted host loopback ports (``host_loopback``), through
a running daemon: it reaches the listeners on those ports and nothing else, a flood of
connections is capped, and the relay goes with the server."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from tests.support.daemons.sandboxed import (
    agent_of,
    call,
    hostile,
    serving,
    steady,
    text,
    wait_ready,
)
from transports.stdio.loopback.relay import MAX_OPEN

pytestmark = pytest.mark.timeout(120)


class HostListener:
    """A listener on the host's loopback that greets each connection with its port and
    counts the connections it accepted and those whose other side ended."""

    def __init__(self, listener: trio.SocketListener) -> None:
        self.listener = listener
        self.port: int = listener.socket.getsockname()[1]
        self.accepted = 0
        self.ended = 0
        self._changed = trio.Condition()

    async def serve(self, stream: trio.SocketStream) -> None:
        async with stream:
            self.accepted += 1
            await stream.send_all(f"hello from {self.port}".encode())
            while await stream.receive_some(1024):
                pass
            async with self._changed:
                self.ended += 1
                self._changed.notify_all()

    async def wait_ended(self, count: int) -> None:
        async with self._changed:
            while self.ended < count:
                await self._changed.wait()


@asynccontextmanager
async def host_listeners(count: int) -> AsyncIterator[list[HostListener]]:
    found = []
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
            host = HostListener(listener)
            await nursery.start(trio.serve_listeners, host.serve, [listener])
            found.append(host)
        yield found
        nursery.cancel_scope.cancel()


def namespaces_held(pid: int) -> int:
    """How many network namespaces the daemon holds a descriptor of."""
    held = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("net:[")
        except OSError:
            continue
    return held


async def test_a_granted_port_is_reached_and_no_other(tmp_path: Path) -> None:
    async with host_listeners(3) as (granted, also, other):
        servers = {
            "hostile": hostile(
                network=False, host_loopback=[f"127.0.0.1:{granted.port}", also.port]
            ),
            "closed": hostile(network=False),
            "steady": steady(),
        }
        with serving(tmp_path, servers) as d:
            async with agent_of(d) as agent:
                await wait_ready(agent, "hostile", "closed", "steady")
                rows = await d.status()
                assert rows["hostile"]["sandbox"]["network"] is False
                assert rows["hostile"]["sandbox"]["host_loopback"] == [granted.port, also.port]
                assert rows["hostile"]["sandbox"]["unprotected"] is None
                assert rows["closed"]["sandbox"]["host_loopback"] == []
                for port in (granted.port, also.port):
                    got = await call(agent, "hostile", "receive", host="127.0.0.1", port=port)
                    assert got == f"ok: received 'hello from {port}'", got
                for port in (other.port, 22, 1):
                    got = await call(agent, "hostile", "connect", host="127.0.0.1", port=port)
                    assert got.startswith("refused: ConnectionRefusedError"), got
                # Nothing but loopback exists in there: no other address to try.
                got = await call(agent, "hostile", "connect", host="10.0.0.1", port=80)
                assert got.startswith("refused: OSError"), got
                # Without the grant, neither port is there.
                for port in (granted.port, also.port, other.port):
                    got = await call(agent, "closed", "connect", host="127.0.0.1", port=port)
                    assert got.startswith("refused: ConnectionRefusedError"), got
                # The daemon's own endpoint: not a TCP port of the host it relays.
                assert text(await agent.call("mcp__steady__tool0", {"text": "a"})) == "tool0:a"
    assert (granted.accepted, also.accepted, other.accepted) == (1, 1, 0)


async def test_a_flood_of_connections_is_capped(tmp_path: Path) -> None:
    async with host_listeners(1) as (granted,):
        servers = {"hostile": hostile(network=False, host_loopback=[granted.port])}
        with serving(tmp_path, servers) as d:
            async with agent_of(d) as agent:
                await wait_ready(agent, "hostile")
                flood = MAX_OPEN + 8
                got = await call(
                    agent, "hostile", "hold_many", host="127.0.0.1", port=granted.port, count=flood
                )
                assert got == f"ok: greeted {MAX_OPEN}, closed 8", got
                assert granted.accepted == MAX_OPEN
                # Once those ended, their places are free again.
                with trio.fail_after(30):
                    await granted.wait_ended(MAX_OPEN)
                got = await call(agent, "hostile", "receive", host="127.0.0.1", port=granted.port)
                assert got == f"ok: received 'hello from {granted.port}'", got
                assert d.proc.poll() is None
        # Said once for the whole run of refusals, not once per connection (read once
        # mcpd is done, its log all copied).
        assert d.log().count("are refused while") == 1, d.log()


async def test_the_relay_ends_with_the_server(tmp_path: Path) -> None:
    async with host_listeners(1) as (granted,):
        servers = {"hostile": hostile(network=False, host_loopback=[granted.port])}
        with serving(tmp_path, servers) as d:
            async with agent_of(d) as agent:
                await wait_ready(agent, "hostile")
                assert namespaces_held(d.pid) == 1
                got = await call(
                    agent, "hostile", "receive", host="127.0.0.1", port=granted.port, keep=True
                )
                assert got == f"ok: received 'hello from {granted.port}'", got
                assert granted.ended == 0
                await agent.call("mcp__hostile__quit", {})  # an error: it dies mid-call
                # The connection it held through the relay is closed with it.
                with trio.fail_after(30):
                    await granted.wait_ended(1)
                # Serving again: ``degraded`` for ``stable_after`` after the call it
                # died in.
                with trio.fail_after(30):
                    while True:
                        row = (await d.status())["hostile"]
                        if row["state"] in ("ready", "degraded") and row["restarts"] >= 1:
                            break
                        await trio.sleep(0.05)
                # The restarted server has its own relay, and the old one's namespace
                # is not held any more.
                assert namespaces_held(d.pid) == 1
                got = await call(agent, "hostile", "receive", host="127.0.0.1", port=granted.port)
                assert got == f"ok: received 'hello from {granted.port}'", got
                assert granted.accepted == 2


async def test_a_grant_that_cannot_be_set_up_keeps_its_server_from_starting(
    tmp_path: Path,
) -> None:
    # A PATH with bubblewrap and the rest, but no nsenter.
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("bwrap", "prlimit", "setpriv", "true"):
        found = shutil.which(name)
        if found is not None:
            (tools / name).symlink_to(found)
    servers = {"db": hostile(network=False, host_loopback=[5432]), "steady": steady()}
    with serving(tmp_path, servers, wrap=("env", f"PATH={tools}")) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "steady")
            with trio.fail_after(30):
                while not (await d.status())["db"].get("last_error"):
                    await trio.sleep(0.05)
            row = (await d.status())["db"]
            assert row["state"] not in ("ready", "degraded")
            assert "servers.db.host_loopback cannot be applied" in row["last_error"]
            assert "nsenter (util-linux) is not installed" in row["last_error"]
            assert text(await agent.call("mcp__steady__tool0", {"text": "a"})) == "tool0:a"
