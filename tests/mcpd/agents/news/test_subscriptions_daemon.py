"""A resource subscription lasts only as long as the agent's profile routes its URI to
the server it was made at, in a running daemon. An agent of a profile showing ``good``
and ``evil`` subscribes to a URI only ``good`` lists, plainly and in its ``mcpd://``
form; once a reload (or the agent's own ``mcpd/useProfile``) leaves it seeing ``evil``
alone, where the plain URI would read from ``evil``, ``good``'s updates reach it no
more, under either spelling, while the owner, who still sees ``good``, hears each."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import META, Agent, connect, running

LIMIT = 60
SERVER = str(Path(__file__).resolve().parents[3] / "support" / "uris" / "shared_uri_server.py")
KEY = "secret://vault/key"
OTHER = "secret://vault/other"
WRAPPED = f"mcpd://good/{OTHER}"
UPDATED = "notifications/resources/updated"


def server(name: str, uris: str) -> str:
    args = [SERVER, name, uris, "", ""]
    return f"[servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\n"


def write_config(tmp: Path, p2: str) -> Path:
    path = tmp / "mcpd.toml"
    path.write_text(
        f'[daemon]\nsocket = "{tmp / "mcpd.sock"}"\nstartup_deadline = 20\n'
        + server("good", f"{KEY},{OTHER}")
        + server("evil", "evil://x")
        + f'[profiles.p2]\nservers = [{p2}]\nsocket = "{tmp / "p2.sock"}"\n'
        + '[profiles.p3]\nservers = ["evil"]\n'
    )
    return path


def updates(agent: Agent, after: int = 0) -> list[str]:
    return [m["params"]["uri"] for m in agent.notifications[after:] if m["method"] == UPDATED]


async def listen(agent: Agent, uris: list[str]) -> list[str]:
    """A listen for updates of ``uris``; those it honours."""
    count = len(agent.notifications)
    body = {"notifications": {"resourceSubscriptions": uris}, "_meta": META}
    message = {"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": body}
    await agent.send_raw(json.dumps(message).encode() + b"\n")
    acknowledged = (await agent.wait_notifications(count + 1))[count]
    return list(acknowledged["params"]["notifications"]["resourceSubscriptions"])


async def subscribe(agent: Agent, uris: list[str]) -> None:
    for uri in uris:
        assert (await agent.rpc("resources/subscribe", {"uri": uri}))["result"] == {}


async def touch(owner: Agent, watchers: list[Agent]) -> list[list[str]]:
    """``good`` says both its URIs changed; once the owner heard of both (the others'
    went out in the same pass, before the replies to their pings), the URIs each of
    ``watchers`` was told of."""
    before = [len(a.notifications) for a in watchers]
    heard = len(owner.notifications)
    for uri in (KEY, OTHER):
        await owner.call("mcp__good__touch", {"uri": uri})
    await owner.wait_notifications(heard + 2)
    assert updates(owner, heard) == [KEY, OTHER]
    for agent in watchers:
        await agent.result("ping")  # answered: all it was told has come
    return [sorted(updates(a, n)) for a, n in zip(watchers, before, strict=True)]


@contextlib.asynccontextmanager
async def watching(tmp_path: Path) -> AsyncIterator[tuple[Agent, Agent, Agent]]:
    """The owner on the daemon's socket and a legacy and a modern agent on p2's, each
    subscribed to both of good's URIs, and each told of good's updates."""
    path = write_config(tmp_path, '"good", "evil"')
    p2 = str(tmp_path / "p2.sock")
    async with (
        running(load(path), str(path)) as daemon,
        connect(daemon.socket_path, modern=False) as owner,
        connect(p2, modern=False) as legacy,
        connect(p2) as modern,
    ):
        for agent in (owner, legacy):
            await agent.initialize()
        await subscribe(owner, [KEY, OTHER])
        await subscribe(legacy, [KEY, WRAPPED])
        assert await listen(modern, [KEY, WRAPPED]) == [KEY, WRAPPED]
        assert await touch(owner, [legacy, modern]) == [sorted([KEY, WRAPPED])] * 2
        yield owner, legacy, modern


async def test_a_reload_that_hides_the_server_ends_its_updates_in_both_eras(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with watching(tmp_path) as (owner, legacy, modern):
            before = [len(a.notifications) for a in (legacy, modern)]
            write_config(tmp_path, '"evil"')
            await owner.result("mcpd/reload")
            assert await touch(owner, [legacy, modern]) == [[], []]
            # The plain URI reads evil's now, and the agents heard nothing of good.
            reply = await legacy.rpc("resources/read", {"uri": KEY})
            assert reply["result"]["contents"][0]["text"] == f"evil read {KEY}"
            since = legacy.notifications[before[0] :] + modern.notifications[before[1] :]
            assert "good" not in json.dumps(since)


async def test_a_profile_switch_that_hides_the_server_ends_its_updates(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with (
            watching(tmp_path) as (owner, _, _),
            connect(str(tmp_path / "mcpd.sock"), modern=False) as switching,
        ):
            await switching.initialize()
            await subscribe(switching, [KEY, WRAPPED])
            assert await touch(owner, [switching]) == [sorted([KEY, WRAPPED])]
            await switching.use_profile("p3")
            assert await touch(owner, [switching]) == [[]]
