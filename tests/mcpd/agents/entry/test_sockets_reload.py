"""A reload and the agents connected to a profile's own socket: a socket moved or given
another mode keeps them connected and their calls in flight answered; a removed
profile's socket answers what its agents have in flight, refuses anything new with why,
and only then closes their connections, saying so in the log."""

from __future__ import annotations

import contextlib
import json
import logging
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import Agent, connect, running
from tests.support.daemons.pins import Changing

LIMIT = 60
HOLD = "mcp__tickets__hold"


def write_config(tmp_path: Path, server: Changing, profile: dict[str, Any] | None) -> Path:
    """The config file: one server, and the profile ``dev`` of it as ``profile`` says
    (None: no such profile). Its call_timeout, the grace a removed profile's agents get
    to be answered, is longer than any test waits: what ends sooner did not wait it."""
    lines = [
        "[daemon]",
        f"socket = {json.dumps(str(tmp_path / 'mcpd.sock'))}",
        f"state_dir = {json.dumps(str(tmp_path / 'state'))}",
        "startup_deadline = 20.0",
        f"call_timeout = {LIMIT * 10}.0",
        "[servers.tickets]",
        *(f"{key} = {json.dumps(value)}" for key, value in server.config().items()),
    ]
    if profile is not None:
        lines += ["[profiles.dev]", 'servers = ["tickets"]']
        lines += [f"{key} = {json.dumps(value)}" for key, value in profile.items()]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


Check = Callable[[Agent], Awaitable[None]]


async def held_across(
    tmp_path: Path,
    before: dict[str, Any],
    after: dict[str, Any] | None,
    meanwhile: Check,
    afterwards: Check,
) -> dict[str, Any]:
    """An agent on ``dev``'s socket calls ``hold``; once the call waits at the server,
    the config's ``dev`` becomes ``after`` and is reloaded, ``meanwhile`` runs, and the
    call is let go: its reply, once ``afterwards`` ran too."""
    server = Changing(tmp_path, control=True)
    path = write_config(tmp_path, server, before)
    with trio.fail_after(LIMIT):
        async with (
            running(load(path), str(path)) as daemon,
            connect(before["socket"], modern=False) as agent,
        ):
            await agent.initialize()
            replies: list[dict[str, Any]] = []

            async def call() -> None:
                replies.append(await agent.rpc("tools/call", {"name": HOLD, "arguments": {}}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await server.tell("announce")  # read once the call waits at the server
                write_config(tmp_path, server, after)
                await daemon.reload()
                await meanwhile(agent)
                await server.tell("answer")
            await afterwards(agent)
            return replies[0]


@pytest.mark.parametrize("change", ["path", "mode"])
async def test_a_moved_or_remoded_profile_socket_keeps_its_agents_and_their_calls(
    tmp_path: Path, change: str
) -> None:
    old, new = str(tmp_path / "dev.sock"), str(tmp_path / "dev2.sock")
    after = {"socket": new} if change == "path" else {"socket": old, "socket_mode": "0660"}

    async def still_served(agent: Agent) -> None:
        # The connection made before the reload is served on, in the profile's new form.
        assert [t["name"] for t in await agent.tools()] == [
            "mcp__tickets__create",
            "mcp__tickets__hold",
            "mcp__tickets__relist",
            "mcp__tickets__search",
        ]
        async with connect(after["socket"], modern=False) as fresh:
            await fresh.initialize()
            assert len(await fresh.tools()) == 4

    async def connected(agent: Agent) -> None:
        assert not agent.closed.is_set()
        assert len(await agent.tools()) == 4
        assert Path(old).exists() == (change == "mode")
        assert stat.S_IMODE(Path(after["socket"]).stat().st_mode) == (
            0o660 if change == "mode" else 0o600
        )

    reply = await held_across(tmp_path, {"socket": old}, after, still_served, connected)
    assert reply["result"]["content"] == [{"type": "text", "text": "called hold"}]


async def test_a_removed_profile_answers_what_its_agents_have_in_flight_then_closes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sock = str(tmp_path / "dev.sock")

    async def refused_meanwhile(agent: Agent) -> None:
        assert not Path(sock).exists()
        # Nothing new is run for it: the profile is gone, and the agent is told so.
        for method, params in (("tools/list", {}), ("tools/call", {"name": HOLD})):
            error = (await agent.rpc(method, params))["error"]
            assert error["message"] == (
                "the profile 'dev' was removed by a reload: this connection closes once "
                "its requests in flight are answered"
            )
        assert not agent.closed.is_set()

    async def closed(agent: Agent) -> None:
        await agent.closed.wait()

    with caplog.at_level(logging.INFO, "mcpd.agents"):
        reply = await held_across(tmp_path, {"socket": sock}, None, refused_meanwhile, closed)
    assert reply["result"]["content"] == [{"type": "text", "text": "called hold"}]
    assert (
        "profile dev: 1 connection(s) on its socket closed, 0 HTTP session(s) opened on "
        "it ended: the profile 'dev' was removed by a reload" in caplog.text
    )


async def test_a_removed_profile_ends_its_agents_subscriptions_and_closes_at_once(
    tmp_path: Path,
) -> None:
    sock = str(tmp_path / "dev.sock")
    server = Changing(tmp_path)
    path = write_config(tmp_path, server, {"socket": sock})
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon, connect(sock) as agent:
            ended: list[dict[str, Any]] = []

            async def listen() -> None:
                params = {"notifications": {"toolsListChanged": True}}
                ended.append(await agent.rpc("subscriptions/listen", params, rid="L"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(listen)
                ack = (await agent.wait_notifications(1))[0]
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                write_config(tmp_path, server, None)
                await daemon.reload()
                await agent.closed.wait()
            assert ended[0]["result"] == {
                "resultType": "complete",
                "_meta": {"io.modelcontextprotocol/subscriptionId": "L"},
            }


async def test_a_removed_profiles_agent_waiting_on_a_call_does_not_hold_the_stop(
    tmp_path: Path,
) -> None:
    sock = str(tmp_path / "dev.sock")
    server = Changing(tmp_path, control=True)
    path = write_config(tmp_path, server, {"socket": sock})
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon, connect(sock, modern=False) as agent:
            await agent.initialize()

            async def call() -> None:
                with contextlib.suppress(ConnectionError):  # the daemon stops meanwhile
                    await agent.rpc("tools/call", {"name": HOLD, "arguments": {}})

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await server.tell("announce")  # read once the call waits at the server
                write_config(tmp_path, server, None)
                await daemon.reload()
                daemon.stop()
                await agent.closed.wait()
