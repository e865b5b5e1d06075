"""One HTTP request in the shape of an agent connection: what a handler sends before
its answer reaches the response in order, a response that stops being read drops
what does not fit instead of stalling the handler, and later news goes to the
session's stream; who a client without a session is."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from mcpd.agents.agent import Agent
from mcpd.agents.connection.agent_connection import Connection
from mcpd.agents.entry.identity import AgentIdentity
from mcpd.agents.entry.peers import Peer
from mcpd.agents.http.exchange import Exchange, RequestSender, StatelessAgent
from protocol.mcp import core as mcp

IN_FLIGHT = 256  # what an exchange holds for its response before it drops


class Profile:
    version = 3

    def __init__(self, name: str) -> None:
        self.name = name


class Response:
    """The HTTP response as an event stream: what it was given, or a client gone."""

    def __init__(self, gone_after: int | None = None) -> None:
        self.events: list[bytes] = []
        self.gone_after = gone_after

    async def event(self, data: bytes) -> None:
        if self.gone_after is not None and len(self.events) >= self.gone_after:
            raise trio.BrokenResourceError
        self.events.append(data)


def exchange(news: Exchange | None = None, peer: Peer | None = None) -> Exchange:
    caller = RequestSender(peer)
    return Exchange(
        object(),  # type: ignore[arg-type]
        caller,
        Profile("default"),  # type: ignore[arg-type]
        object(),
        caller.who(),
        news=news,
    )


def message(n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "n": n}).encode()


async def pumped(ex: Exchange, response: Response) -> None:
    done = trio.Event()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ex.pump, response, done)
            await trio.testing.wait_all_tasks_blocked()
            ex.outbox.close()
        await done.wait()


async def test_what_is_sent_before_the_answer_reaches_the_response_in_order() -> None:
    ex = exchange()
    await ex.send(message(1))
    ex.send_nowait(message(2))
    ex.progress(mcp.ProgressParams(progressToken="t", progress=1))
    response = Response()
    await pumped(ex, response)
    got = [json.loads(e) for e in response.events]
    assert [m.get("n", m["method"]) for m in got] == [1, 2, "notifications/progress"]
    assert ex.dropped == 0


async def test_a_response_not_read_drops_what_does_not_fit_and_never_stalls() -> None:
    ex = exchange()
    for n in range(IN_FLIGHT + 100):
        ex.send_nowait(message(n))  # never waits, never raises
    assert ex.dropped == 100
    response = Response()
    await pumped(ex, response)
    assert [json.loads(e)["n"] for e in response.events] == list(range(IN_FLIGHT))


async def test_a_client_gone_ends_the_pump_and_later_sends_are_harmless() -> None:
    ex = exchange()
    for n in range(5):
        ex.send_nowait(message(n))
    response = Response(gone_after=2)
    done = trio.Event()
    with pytest.raises(trio.BrokenResourceError), trio.fail_after(10):
        await ex.pump(response, done)
    assert done.is_set() and len(response.events) == 2
    ex.send_nowait(message(9))
    await ex.send(message(10))  # the response is gone: nothing to send it to
    assert ex.dropped == 1


async def test_news_goes_to_the_sessions_stream_or_to_this_response() -> None:
    stateless = exchange()
    stateless.news_sender()(message(1))
    session_stream = exchange()
    in_session = exchange(news=session_stream)
    in_session.news_sender()(message(2))
    assert stateless.outbox.statistics().current_buffer_used == 1
    assert in_session.outbox.statistics().current_buffer_used == 0
    assert session_stream.outbox.statistics().current_buffer_used == 1


def test_a_caller_is_its_connections_identity_or_its_peers() -> None:
    peer = Peer(pid=1, uid=1000, gid=1000)
    known = AgentIdentity(peer)
    assert RequestSender(peer, identity=known).who() is known
    fresh = RequestSender(peer).who()
    assert fresh.peer == peer and fresh is not known
    assert RequestSender(None).who().peer is None


def test_an_exchange_is_an_agent_with_all_an_agent_declares_and_no_line_connection() -> None:
    # What the handlers read of an agent is declared on ``Agent``: an exchange sets each
    # of it, and is not a socket's connection whose constructor it would skip.
    ex = exchange()
    assert isinstance(ex, Agent) and not isinstance(ex, Connection)
    declared = {name for cls in Agent.__mro__ for name in vars(cls).get("__annotations__", {})}
    assert sorted(name for name in declared if not hasattr(ex, name)) == []


def test_an_exchange_takes_its_profile_and_peer_from_its_caller() -> None:
    peer = Peer(pid=1, uid=1000, gid=1000)
    ex = exchange(peer=peer)
    assert ex.peer == peer and ex.fixed_profile is None
    assert ex.seen_version == 3 and ex.spoke_mcp


async def test_a_stateless_client_is_its_user_where_it_came_in_its_profile_and_its_server() -> None:
    default, dev = Profile("default"), Profile("dev")

    def who(caller: RequestSender, profile: Profile = default) -> StatelessAgent:
        return caller.stateless_agent(profile)  # type: ignore[arg-type]

    user = who(RequestSender(Peer(pid=1, uid=1000, gid=1000)))
    # Its requests may come from any process and connection of its user.
    assert who(RequestSender(Peer(pid=2, uid=1000, gid=1000), identity=AgentIdentity(None))) == user
    with trio.socket.socket() as tcp:
        others = [
            who(RequestSender(Peer(pid=1, uid=1001, gid=1001))),
            who(RequestSender(Peer(pid=1, uid=1000, gid=1000)), dev),
            who(RequestSender(Peer(pid=1, uid=1000, gid=1000), "dev"), dev),
            who(RequestSender(Peer(pid=1, uid=1000, gid=1000, server="notes"))),
            who(RequestSender(Peer(pid=0, uid=1000, gid=1000, unverified=True))),
            who(RequestSender(None)),
            who(RequestSender(None, tcp=tcp)),
        ]
    assert len({user, *others}) == 1 + len(others)
