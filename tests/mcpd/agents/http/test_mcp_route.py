"""``/mcp`` on the agent socket, called directly: the requests refused at their method,
headers and session before anything runs, legacy sessions (their cap, their end, and
which socket may reach them), and a legacy agent's cancellation; and through a running
daemon, whose stateless clients' tasks are whose: another profile's socket, or a
server's process, never reaches a user's."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h11
import msgspec
import pytest
import trio
import trio.testing

from mcpd.agents.agent import Agent, Audience
from mcpd.agents.agent_server import new_session
from mcpd.agents.answerer import Answerer
from mcpd.agents.entry.holders import TcpKin
from mcpd.agents.entry.identity import AgentIdentity, Holder
from mcpd.agents.entry.peers import Peer
from mcpd.agents.http.exchange import RequestSender
from mcpd.agents.http.mcp_route import McpRoute, _cancel
from mcpd.agents.http.sessions import DELETED, LegacySession, OpenedBy
from mcpd.agents.http.wire import Reject, Wire
from mcpd.agents.profiles import Profile
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import NamingConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.all_servers import AllServers
from mcpd.servers.shared import AgentKey
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from tests.support.clients.agent import META, connect, make_config, running
from tests.support.clients.daemon_http import CURL, MCP, auth, http, modern_headers, post, stateless
from tests.support.clients.http_stream_client import Client, open_session, session_headers
from tests.support.daemons.reloading import wait_for
from tests.support.system.peer_probe import PEER_HTTP
from tests.support.system.peer_user import needs_root, peer_uid, run_as, shared_dir, socket_open_to
from tests.support.system.procs import scripted

JSON_POST = [
    (b"host", b"mcpd"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
]
STREAM_GET = [(b"host", b"mcpd"), (b"accept", b"text/event-stream")]


class Recording(Answerer):
    """The answerer as far as sessions go: who joined and left."""

    def __init__(self) -> None:
        self.joined: list[Audience] = []
        self.gone: list[object] = []

    def answer_now(self, conn: Agent, req: rpc.Request) -> bytes:
        raise AssertionError("no request is answered in these tests")

    async def dispatch(self, conn: Agent, req: rpc.Request) -> bytes | None:
        raise AssertionError("no request is answered in these tests")

    def agent_joined(self, conn: Audience) -> None:
        self.joined.append(conn)

    def agent_gone(self, owner: AgentKey) -> None:
        self.gone.append(owner)


def profile(name: str = "default") -> Profile:
    catalog = Catalog(NamingConfig())
    config = parse_config({"servers": {"a": {"command": "x"}}}, env={})
    base = AllServers(Supervisor(config, catalog), catalog)
    return Profile(base.view_of(name))


class Route:
    def __init__(self) -> None:
        self.handler = Recording()
        self.forgotten: list[str] = []
        self.route = McpRoute(
            self.handler,
            set(),
            lambda conn: None,
            new_session,
            lambda query, caller: profile(),
            self.forgotten.append,
        )

    def open(self, name: str = "default") -> str:
        """A legacy session, as ``initialize`` opens it on the socket of ``name``."""
        return self.route._open(new_session(), profile(name), RequestSender(None))


async def served(
    route: McpRoute,
    method: bytes,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    caller: RequestSender | None = None,
) -> bytes:
    """What the client reads back of one request the route serves (a Reject, as its
    caller turns it into a response, included)."""
    client, server = trio.testing.memory_stream_pair()
    wire = Wire(server)  # type: ignore[arg-type]
    peer = h11.Connection(h11.CLIENT)
    fields = [*headers, (b"content-length", str(len(body)).encode())]
    await client.send_all(
        peer.send(h11.Request(method=method, target="/mcp", headers=fields))
        + peer.send(h11.Data(data=body))
        + peer.send(h11.EndOfMessage())
    )
    with trio.fail_after(5):
        got = await wire.read_request()
        assert got is not None
        request, read_body = got
        try:
            await route.serve(wire, request, read_body, caller or RequestSender(None), {})
        except Reject as reject:
            return f"{reject.status} {reject.body.decode()}".encode()
        await client.send_eof()  # type: ignore[attr-defined]
        return await client.receive_some()


def status_of(answer: bytes) -> int:
    if answer.startswith(b"HTTP/1.1 "):
        return int(answer.split()[1])
    return int(answer.split()[0])


def rejected(answer: bytes) -> tuple[int, str]:
    status, _, body = answer.partition(b" ")
    message = msgspec.json.decode(body)["error"]["message"] if body else ""
    return int(status), message


@pytest.fixture
def route() -> Iterator[Route]:
    yield Route()


# -- refused before anything runs --


@pytest.mark.parametrize("method", [b"PUT", b"PATCH", b"HEAD"])
async def test_a_method_mcp_does_not_take_is_405_saying_which_it_does(
    route: Route, method: bytes
) -> None:
    with pytest.raises(Reject) as reject:
        await route.route.serve(
            None,  # type: ignore[arg-type]
            h11.Request(method=method, target="/mcp", headers=[(b"host", b"x")]),
            b"",
            RequestSender(None),
            {},
        )
    assert reject.value.status == 405
    assert reject.value.headers == [(b"allow", b"GET, POST, DELETE")]
    if method == b"HEAD":
        assert reject.value.body == b""  # a HEAD's answer carries no body
    else:
        error = json.loads(reject.value.body)["error"]
        assert error["message"] == (
            f"Method Not Allowed: /mcp takes POST, GET and DELETE, not {method.decode()}"
        )


@pytest.mark.parametrize(
    ("headers", "status", "words"),
    [
        (
            [*STREAM_GET, (b"mcp-protocol-version", mcp.LATEST_MODERN.encode())],
            405,
            "no GET stream",
        ),
        ([(b"host", b"mcpd"), (b"accept", b"application/json")], 406, "Not Acceptable"),
        (STREAM_GET, 400, "Missing session ID"),
        ([*STREAM_GET, (b"mcp-session-id", b"nope")], 404, "Session not found"),
    ],
)
async def test_a_get_that_opens_no_sessions_stream_is_refused_saying_why(
    route: Route, headers: list[tuple[bytes, bytes]], status: int, words: str
) -> None:
    got, message = rejected(await served(route.route, b"GET", headers))
    assert got == status and words in message


async def test_a_legacy_post_without_a_session_is_refused_and_a_modern_one_is_told_its_header(
    route: Route,
) -> None:
    ping = rpc.encode_request(1, "ping", None)
    got, message = rejected(await served(route.route, b"POST", JSON_POST, ping))
    assert (got, message) == (400, "Bad Request: Missing session ID")
    params = {"_meta": {mcp.KEY_PROTOCOL_VERSION: mcp.LATEST_MODERN}}
    modern = rpc.encode_request(2, "tools/list", params)
    got, message = rejected(await served(route.route, b"POST", JSON_POST, modern))
    assert got == 400 and "needs the MCP-Protocol-Version header" in message


async def test_a_post_to_a_session_that_does_not_exist_is_404(route: Route) -> None:
    headers = [*JSON_POST, (b"mcp-session-id", b"0" * 32)]
    ping = rpc.encode_request(1, "ping", None)
    assert rejected(await served(route.route, b"POST", headers, ping)) == (404, "Session not found")


# -- legacy sessions --


async def test_a_session_of_one_profiles_socket_does_not_exist_on_anothers(route: Route) -> None:
    sid = route.open("default").encode()
    elsewhere = RequestSender(None, fixed="other")
    ping = rpc.encode_request(1, "ping", None)
    post = [*JSON_POST, (b"mcp-session-id", sid)]
    get = [*STREAM_GET, (b"mcp-session-id", sid)]
    assert rejected(await served(route.route, b"POST", post, ping, elsewhere))[0] == 404
    assert rejected(await served(route.route, b"GET", get, b"", elsewhere))[0] == 404
    delete = [(b"host", b"mcpd"), (b"mcp-session-id", sid)]
    assert rejected(await served(route.route, b"DELETE", delete, b"", elsewhere))[0] == 404
    assert sid.decode() in route.route.sessions and route.handler.gone == []


async def test_delete_ends_a_session_once_and_forgets_what_was_approved_for_it(
    route: Route,
) -> None:
    sid = route.open()
    legacy = route.route.sessions[sid]
    delete = [(b"host", b"mcpd"), (b"mcp-session-id", sid.encode())]
    answer = await served(route.route, b"DELETE", delete)
    assert status_of(answer) == 200
    assert sid not in route.route.sessions
    assert route.handler.gone == [legacy] and route.forgotten == [legacy.identity.connection]
    assert legacy.news.closed
    again = await served(route.route, b"DELETE", delete)
    assert rejected(again)[0] == 404 and route.handler.gone == [legacy]


async def test_without_a_session_id_delete_is_404(route: Route) -> None:
    assert rejected(await served(route.route, b"DELETE", [(b"host", b"mcpd")]))[0] == 404


async def test_sessions_are_capped_and_the_oldest_ends_to_make_room(
    route: Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcpd.agents.http.mcp_route

    monkeypatch.setattr(mcpd.agents.http.mcp_route, "MAX_SESSIONS", 3)
    sids = [route.open() for _ in range(3)]
    oldest = route.route.sessions[sids[0]]
    newest = route.open()
    assert list(route.route.sessions) == [*sids[1:], newest]
    assert route.handler.gone == [oldest] and oldest.news.closed
    assert len(route.handler.joined) == 4
    assert len(set([*sids, newest])) == 4 and all(len(s) == 32 for s in sids)


def opened_by(route: Route, uid: int) -> str:
    return route.route._open(
        new_session(), profile(), RequestSender(Peer(pid=1000 + uid, uid=uid, gid=uid))
    )


async def test_one_who_opens_sessions_without_end_ends_their_own_not_others(
    route: Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The places are shared: a newcomer ends the oldest session of whoever holds the
    most of them, itself counted with its own."""
    import mcpd.agents.http.mcp_route

    monkeypatch.setattr(mcpd.agents.http.mcp_route, "MAX_SESSIONS", 4)
    victim = opened_by(route, 1000)
    flood = [opened_by(route, 2000) for _ in range(3)]
    for _ in range(20):
        flood.append(opened_by(route, 2000))
    assert victim in route.route.sessions
    assert list(route.route.sessions) == [victim, *flood[-3:]]
    # Another newcomer, with none yet, ends the flooder's oldest, not the victim's.
    other = opened_by(route, 3000)
    assert list(route.route.sessions) == [victim, *flood[-2:], other]
    # A newcomer that would hold as many as the most ends its own oldest.
    assert opened_by(route, 1000) in route.route.sessions
    assert victim not in route.route.sessions


def opened_over_tcp(route: Route, uid: int) -> str:
    holder = AgentIdentity(None, Holder(uid))
    return route.route._open(new_session(), profile(), RequestSender(None, identity=holder))


async def test_sessions_over_the_endpoint_are_shared_out_by_the_user_holding_them(
    route: Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every client of the endpoint counted as one holder: one user's initializes ended
    another's session, whose next request got 404."""
    import mcpd.agents.http.mcp_route

    monkeypatch.setattr(mcpd.agents.http.mcp_route, "MAX_SESSIONS", 4)
    victim = opened_over_tcp(route, 1000)
    flood = [opened_over_tcp(route, 2000) for _ in range(20)]
    assert list(route.route.sessions) == [victim, *flood[-3:]]


async def test_a_session_is_found_only_by_its_user_on_the_listener_it_was_opened_on(
    route: Route,
) -> None:
    """One route serves the daemon's socket, each profile's and the TCP endpoint: a
    session's id that anyone else brings, or its user brings elsewhere, names none."""
    user = Peer(pid=1000, uid=1000, gid=1000)
    sid = route.route._open(new_session(), profile(), RequestSender(user)).encode()
    ping = rpc.encode_request(1, "ping", None)
    requests = [
        (b"POST", [*JSON_POST, (b"mcp-session-id", sid)], ping),
        (b"GET", [*STREAM_GET, (b"mcp-session-id", sid)], b""),
        (b"DELETE", [(b"host", b"mcpd"), (b"mcp-session-id", sid)], b""),
    ]
    holder = AgentIdentity(None, Holder(1000))
    endpoint = RequestSender(None, identity=holder, tcp=TcpKin(None, None))  # type: ignore[arg-type]
    others = {
        "another user": RequestSender(Peer(pid=2000, uid=2000, gid=2000)),
        "a server's process": RequestSender(Peer(pid=1001, uid=1000, gid=1000, server="notes")),
        "its profile's socket": RequestSender(user, fixed="default"),
        "the TCP endpoint": endpoint,
    }
    for who, caller in others.items():
        for method, headers, body in requests:
            got = rejected(await served(route.route, method, headers, body, caller))
            assert got == (404, "Session not found"), (who, method, got)
    assert route.handler.gone == []
    answer = await served(route.route, b"DELETE", requests[2][1], b"", RequestSender(user))
    assert status_of(answer) == 200 and route.handler.gone != []


LEGACY_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "0"},
    },
}


@needs_root
@pytest.mark.skipif(CURL is None, reason="curl is not installed")
async def test_another_user_or_the_endpoint_with_a_users_session_id_finds_no_session(
    tmp_path: Path,
) -> None:
    """The owner's legacy session, opened on the daemon's socket: another user let on
    that socket, and a client of the TCP endpoint with its token, each bringing its id,
    can neither use it, stream it nor end it."""
    uid = peer_uid()
    shared = shared_dir()
    cfg = make_config(
        tmp_path,
        {"ta": JOBS},
        **socket_open_to(uid, shared),
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
    )
    ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    try:
        with trio.fail_after(60):
            async with running(cfg) as daemon:
                sock = daemon.socket_path
                sid = (await post(sock, LEGACY_INIT)).headers["mcp-session-id"]
                session = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
                theirs = [
                    ["POST", "/mcp", {**MCP, **session}, ping],
                    ["DELETE", "/mcp", session, ""],
                    ["GET", "/mcp", {"Accept": "text/event-stream", **session}, ""],
                ]
                out = await run_as(uid, PEER_HTTP, sock, json.dumps(theirs))
                assert daemon.agent_server.endpoint is not None
                port, token = daemon.agent_server.endpoint.port, daemon.http_token()
                endpoint = {**MCP, **auth(token), **session}
                over_tcp = [await http(port, "POST", "/mcp", endpoint, ping.encode())]
                over_tcp.append(await http(port, "DELETE", "/mcp", auth(token, **session)))
                mine = await post(
                    sock, json.loads(ping), *(f"{k}: {v}" for k, v in session.items())
                )
    finally:
        shutil.rmtree(shared)
    replies = [json.loads(line) for line in out.decode().splitlines()]
    assert [status for status, _ in replies] == [404, 404, 404], replies
    assert all("Session not found" in body for _, body in replies)
    assert [reply.status for reply in over_tcp] == [404, 404]
    assert mine.status == 200 and mine.json()["result"] == {}


# -- cancellation --


def legacy_session() -> LegacySession:
    caller = RequestSender(None)
    return LegacySession(new_session(), profile(), caller.who(), OpenedBy.of(caller))


def cancelled(request_id: Any) -> rpc.Notification:
    params = msgspec.json.encode({"requestId": request_id, "reason": "user"})
    return rpc.Notification("notifications/cancelled", msgspec.Raw(params))


async def test_a_cancellation_reaches_only_the_request_it_names() -> None:
    legacy = legacy_session()
    one, two = trio.CancelScope(), trio.CancelScope()
    legacy.requests.update({1: one, "1": two})
    _cancel(legacy, cancelled("1"))
    assert two.cancel_called and not one.cancel_called


@pytest.mark.parametrize("request_id", [None, [1], {"a": 1}, 2.5, 9])
async def test_a_cancellation_that_names_no_request_in_flight_changes_nothing(
    request_id: Any,
) -> None:
    legacy = legacy_session()
    scope = trio.CancelScope()
    legacy.requests[1] = scope
    _cancel(legacy, cancelled(request_id))
    _cancel(legacy, rpc.Notification("notifications/cancelled", msgspec.Raw(b"[]")))
    _cancel(legacy, rpc.Notification("notifications/cancelled", None))
    assert not scope.cancel_called


async def test_closing_a_session_cancels_its_requests_in_flight() -> None:
    legacy = legacy_session()
    scopes = [trio.CancelScope() for _ in range(3)]
    legacy.requests.update(enumerate(scopes))
    legacy.close(DELETED)
    assert all(s.cancel_called for s in scopes) and legacy.news.closed


async def test_a_call_in_flight_when_its_session_is_deleted_is_answered_saying_so(
    tmp_path: Path,
) -> None:
    """Its POST was answered with an empty 200, as if the call had been cancelled by
    its own agent, which would not have waited for it."""
    heard = tmp_path / "heard.jsonl"
    command, args = scripted("--hang-on-call", "--log-file", str(heard))
    cfg = make_config(tmp_path, {"slow": {"command": command, "args": list(args)}})
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            sid = await open_session(daemon, unix=sock)
            answered: list[tuple[int, dict[str, str], bytes]] = []

            async def call() -> None:
                request = {"jsonrpc": "2.0", "id": 9, "method": "tools/call"}
                request["params"] = {"name": "mcp__slow__tool0", "arguments": {}}  # type: ignore[assignment]
                async with Client.open(daemon, unix=sock) as c:
                    answered.append(await c.request("POST", session_headers(sid), request))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await wait_for(lambda: heard.exists() and '"tools/call"' in heard.read_text())
                async with Client.open(daemon, unix=sock) as c:
                    assert (await c.request("DELETE", {"mcp-session-id": sid}))[0] == 200
            [(status, head, body)] = answered
            assert status == 200 and head["content-type"] == "application/json"
            reply = json.loads(body)
            assert reply["id"] == 9 and reply["error"]["code"] == -32000
            assert reply["error"]["message"] == (
                "the agent ended its session: this call was ended before its tool server "
                "answered; it may have reached the server, so whether it ran is not known"
            )
            await wait_for(lambda: "notifications/cancelled" in heard.read_text())


# -- whose a stateless client's tasks are --

SUPPORT = Path(__file__).resolve().parents[3] / "support"
JOBS = {"command": sys.executable, "args": [str(SUPPORT / "asking" / "task_server.py")]}
TASKS_META = {
    **META,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {features.TASKS_EXTENSION: {}}},
}
ANSWERS = {"confirm": {"action": "accept", "content": {}}}


async def tasks_request(sock: str, method: str, **params: Any) -> dict[str, Any]:
    """One stateless request of an agent that takes tasks, on a connection of its own."""
    name = params.get("taskId", params.get("name"))
    return await stateless(sock, method, params, TASKS_META, name)


async def made_task(sock: str, tool: str) -> str:
    handle = (await tasks_request(sock, "tools/call", name=tool))["result"]
    assert handle["resultType"] == "task", handle
    return str(handle["taskId"])


async def test_a_stateless_clients_task_is_its_own_on_every_connection(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running(make_config(tmp_path, {"ta": JOBS})) as daemon:
            sock = daemon.socket_path
            task = await made_task(sock, "mcp__ta__build")
            got = await tasks_request(sock, "tasks/get", taskId=task)
            assert got["result"]["status"] == "input_required"
            await tasks_request(sock, "tasks/update", taskId=task, inputResponses=ANSWERS)
            done = await tasks_request(sock, "tasks/get", taskId=task)
            assert done["result"]["status"] == "completed"


def restricted(tmp_path: Path) -> Any:
    """Servers ta and tb; the profile ``restricted``, on its own socket, shows tb only."""
    profile = {"servers": ["tb"], "socket": str(tmp_path / "restricted.sock")}
    return make_config(tmp_path, {"ta": JOBS, "tb": JOBS}, profiles={"restricted": profile})


async def test_another_profiles_socket_neither_reads_nor_moves_a_users_task(
    tmp_path: Path,
) -> None:
    """Every stateless client of a user was one owner of tasks: one on a profile's
    socket read, answered and cancelled the task a user made in the default profile, on
    a server its own profile does not show."""
    with trio.fail_after(60):
        async with running(restricted(tmp_path)) as daemon:
            mine, theirs = daemon.socket_path, str(tmp_path / "restricted.sock")
            task = await made_task(mine, "mcp__ta__build")
            for method, extra in [
                ("tasks/get", {}),
                ("tasks/update", {"inputResponses": ANSWERS}),
                ("tasks/cancel", {}),
            ]:
                refused = await tasks_request(theirs, method, taskId=task, **extra)
                assert refused["error"]["message"] == f"Unknown task {task!r}", (method, refused)
            got = await tasks_request(mine, "tasks/get", taskId=task)
            assert got["result"]["status"] == "input_required"


async def test_a_task_another_profile_makes_with_the_same_id_is_not_found_for_mine(
    tmp_path: Path,
) -> None:
    """Both servers number their tasks alike: a client on the other profile's socket
    made one, which took the place of the user's own, so the user's next request for
    its task reached the other's (here, cancelled)."""
    with trio.fail_after(60):
        async with running(restricted(tmp_path)) as daemon:
            mine, theirs = daemon.socket_path, str(tmp_path / "restricted.sock")
            task = await made_task(mine, "mcp__ta__build")
            other = await made_task(theirs, "mcp__tb__build")
            assert "result" in await tasks_request(theirs, "tasks/cancel", taskId=other)
            got = await tasks_request(mine, "tasks/get", taskId=task)
            assert got["result"]["status"] == "input_required", got


async def test_a_servers_process_let_onto_a_profile_does_not_reach_its_users_tasks(
    tmp_path: Path,
) -> None:
    """A server's own process, let in on a profile's socket by its ``allow_servers``,
    read the task a user made on that socket, as one of the user's clients."""
    shared = str(tmp_path / "shared.sock")
    hostile = {
        "command": sys.executable,
        "args": [str(SUPPORT / "breakout" / "hostile_server.py")],
        "sandbox": "off",  # to reach the socket; which process it is, mcpd still knows
    }
    profile = {"servers": ["ta"], "socket": shared, "allow_servers": ["hostile"]}
    cfg = make_config(tmp_path, {"ta": JOBS, "hostile": hostile}, profiles={"shared": profile})
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as user:
            task = await made_task(shared, "mcp__ta__build")
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tasks/get",
                "params": {"taskId": task, "_meta": TASKS_META},
            }
            headers = dict(h.split(": ", 1) for h in modern_headers("tasks/get", task))
            arguments = {"socket": shared, "body": body, "headers": headers}
            sent = (await user.call("mcp__hostile__mcp_post", arguments))["content"][0]["text"]
            assert sent.startswith("ok: HTTP/1.1"), sent
            answer = json.loads(sent.partition("\r\n\r\n")[2])
            assert answer["error"]["message"] == f"Unknown task {task!r}", answer
            got = await tasks_request(shared, "tasks/get", taskId=task)
            assert got["result"]["status"] == "input_required"
