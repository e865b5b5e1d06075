"""The socket's profile methods called directly over a catalog of two servers' tools:
which profile an agent may switch to and what it is told when it may not, what
``mcpd/tools`` and ``mcpd/profiles`` show to whom, and how many agents each profile is
said to have."""

from __future__ import annotations

import os
from typing import Any

import msgspec
import pytest
from msgspec import UNSET, Raw

from mcpd.agents.entry.peers import Peer
from mcpd.agents.own_methods.profile_methods import PROFILE_METHODS, ProfileMethods
from mcpd.agents.profiles import Profile, Profiles
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.policy.decision.gate import CallGate
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.policy.waiting.approvals import Approvals
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.all_servers import AllServers
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

OWNER = Peer(pid=1, uid=os.getuid(), gid=0)
STRANGER = Peer(pid=2, uid=os.getuid() + 4242, gid=0)
A_SERVERS_PROCESS = Peer(pid=3, uid=os.getuid(), gid=0, server="git")


def tool(name: str) -> mcp.Tool:
    return mcp.Tool(name=name, description=f"does {name}", inputSchema=Raw(b'{"type":"object"}'))


class Conn:
    """A connection as far as the methods look at it."""

    def __init__(
        self, profile: Profile, peer: Peer | None = OWNER, fixed: str | None = None
    ) -> None:
        self.profile = profile
        self.peer = peer
        self.fixed_profile = fixed
        self.seen_version = -1
        self.spoke_mcp = True


class Extras:
    def __init__(self) -> None:
        self.joined_by: list[object] = []

    def joined(self, conn: object) -> None:
        self.joined_by.append(conn)

    def switched(self, conn: object) -> None:
        pass


class Gate:
    def __init__(self, config: Config) -> None:
        self.call_gate = CallGate(Approvals(), KnownSecrets())
        self.call_gate.configure(config.policy)


class Session:
    def __init__(self, profile: Profile) -> None:
        self.profile = profile


class Http:
    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}


class Sockets:
    def __init__(self) -> None:
        self.errors: dict[str, str] = {}


class Methods(ProfileMethods):
    def __init__(self, **more: Any) -> None:
        config = parse_config(
            {
                "servers": {"git": {"command": "x"}, "notes": {"command": "x"}},
                "profiles": {
                    "coding": {"servers": ["git"]},
                    "locked": {"servers": ["notes"], "socket": "/run/mcpd/locked.sock"},
                    **more,
                },
                "policy": [{"action": "deny", "tools": ["git/push"], "reason": "not here"}],
            },
            env={},
        )
        catalog = Catalog(config.naming)
        catalog.update("git", [tool("status"), tool("push")])
        catalog.update("notes", [tool("read")])
        self.profiles = Profiles(AllServers(Supervisor(config, catalog), catalog))
        self.profiles.configure(config.profiles, config.naming, 128)
        self.control = Gate(config)  # type: ignore[assignment]
        self.connections = set()
        self._http = None
        self.sockets = Sockets()  # type: ignore[assignment]
        self.extras = Extras()  # type: ignore[assignment]

    def view(self, conn: Any) -> Profile:
        profile: Profile = conn.profile
        return profile

    def conn(
        self, peer: Peer | None = OWNER, profile: str = "default", fixed: str | None = None
    ) -> Any:
        held = self.profiles.get(profile)
        assert held is not None
        conn = Conn(held, peer, fixed)
        self.connections.add(conn)  # type: ignore[arg-type]
        return conn

    async def call(self, conn: Any, method: str, params: dict[str, Any] | None = None) -> Any:
        raw = None if params is None else Raw(msgspec.json.encode(params))
        return await PROFILE_METHODS[method](self, conn, rpc.Request(1, method, raw), None)


# -- mcpd/useProfile --


async def test_switching_profile_changes_what_the_connection_sees_from_now_on() -> None:
    methods = Methods()
    conn = methods.conn()
    said = await methods.call(conn, "mcpd/useProfile", {"profile": "coding"})
    assert said == {
        "profile": "coding",
        "discovery": "all",
        "mode": "all",
        "count": 2,
        "listed": ["mcp__git__push", "mcp__git__status"],
    }
    assert conn.profile is methods.profiles.get("coding")
    # What it lists now is no change to be told of, for tools or for the rest.
    assert conn.seen_version == conn.profile.version
    assert methods.extras.joined_by == [conn]  # type: ignore[attr-defined]


@pytest.mark.parametrize("params", [None, {}, {"profile": None}])
async def test_switching_profile_without_naming_one_says_where_the_name_goes(
    params: dict[str, Any] | None,
) -> None:
    methods = Methods()
    conn = methods.conn()
    with pytest.raises(rpc.RPCError) as refused:
        await methods.call(conn, "mcpd/useProfile", params)
    assert refused.value.code == rpc.INVALID_PARAMS and "params.profile" in refused.value.message
    assert conn.profile is methods.profiles.default


@pytest.mark.parametrize("params", [{"profile": 5}, {"profile": ["coding"]}, {"policy": "yes"}])
async def test_a_profile_named_by_something_not_a_string_is_refused(
    params: dict[str, Any],
) -> None:
    methods = Methods()
    conn = methods.conn()
    with pytest.raises(rpc.InvalidParams):
        await methods.call(conn, "mcpd/useProfile", params)
    assert conn.profile is methods.profiles.default


async def test_an_unknown_profile_is_refused_naming_those_there_are() -> None:
    methods = Methods()
    conn = methods.conn()
    with pytest.raises(rpc.RPCError) as refused:
        await methods.call(conn, "mcpd/useProfile", {"profile": "codign"})
    message = refused.value.message
    assert "'codign'" in message and "coding" in message and "default" in message
    assert conn.profile is methods.profiles.default and methods.extras.joined_by == []  # type: ignore[attr-defined]


async def test_a_connection_on_a_profiles_own_socket_cannot_leave_that_profile() -> None:
    methods = Methods()
    conn = methods.conn(profile="locked", fixed="locked")
    for other in ("default", "coding"):
        with pytest.raises(rpc.RPCError, match="serves the profile 'locked' only"):
            await methods.call(conn, "mcpd/useProfile", {"profile": other})
        with pytest.raises(rpc.RPCError, match="serves the profile 'locked' only"):
            await methods.call(conn, "mcpd/tools", {"profile": other})
    assert conn.profile is methods.profiles.get("locked")


@pytest.mark.parametrize("peer", [STRANGER, A_SERVERS_PROCESS], ids=["other-user", "server"])
async def test_a_profile_with_its_own_socket_is_for_the_owner_only_on_the_daemons_socket(
    peer: Peer,
) -> None:
    methods = Methods()
    conn = methods.conn(peer)
    with pytest.raises(rpc.RPCError) as refused:
        await methods.call(conn, "mcpd/useProfile", {"profile": "locked"})
    assert "/run/mcpd/locked.sock" in refused.value.message
    assert conn.profile is methods.profiles.default
    owner = methods.conn()
    assert (await methods.call(owner, "mcpd/useProfile", {"profile": "locked"}))["count"] == 1


# -- mcpd/tools --


async def test_tools_of_the_agents_own_profile_without_a_name_and_of_another_with_one() -> None:
    methods = Methods()
    conn = methods.conn(profile="coding")
    own = await methods.call(conn, "mcpd/tools")
    assert own["profile"] == "coding" and "decisions" not in own
    assert sorted(t.local for t in own["tools"]) == ["mcp__git__push", "mcp__git__status"]
    other = await methods.call(conn, "mcpd/tools", {"profile": "locked"})
    assert [t.local for t in other["tools"]] == ["mcp__notes__read"]
    assert conn.profile is methods.profiles.get("coding")  # looking is not switching


async def test_tools_with_policy_say_what_the_rules_decide_for_each() -> None:
    methods = Methods()
    conn = methods.conn()
    out = await methods.call(conn, "mcpd/tools", {"policy": True})
    decisions = out["decisions"]
    assert set(decisions) == {"mcp__git__push", "mcp__git__status", "mcp__notes__read"}
    assert decisions["mcp__git__push"]["action"] == "deny"
    assert decisions["mcp__git__push"]["reason"] == "not here"
    assert decisions["mcp__git__status"]["action"] == "allow"


# -- mcpd/profiles --


async def test_the_owner_in_the_default_profile_is_told_of_every_profile() -> None:
    methods = Methods()
    methods.conn(profile="coding")
    methods.conn(profile="coding")
    owner = methods.conn()
    rows = {
        r["name"]: r
        for r in msgspec.to_builtins(await methods.call(owner, "mcpd/profiles"))["profiles"]
    }
    assert {"default", "coding", "locked"} <= set(rows)
    assert (rows["coding"]["agents"], rows["default"]["agents"], rows["locked"]["agents"]) == (
        2,
        1,
        0,
    )


@pytest.mark.parametrize(
    ("peer", "profile", "fixed"),
    [(OWNER, "coding", None), (STRANGER, "default", None), (OWNER, "locked", "locked")],
    ids=["chose-a-profile", "another-user", "profile-socket"],
)
async def test_an_agent_in_a_profile_is_told_of_its_own_only(
    peer: Peer, profile: str, fixed: str | None
) -> None:
    methods = Methods()
    conn = methods.conn(peer, profile, fixed)
    [row] = msgspec.to_builtins(await methods.call(conn, "mcpd/profiles"))["profiles"]
    assert row["name"] == profile


def test_only_connections_that_spoke_mcp_and_http_sessions_count_as_agents() -> None:
    methods = Methods()
    methods.conn(profile="coding")
    methods.conn(profile="coding").spoke_mcp = False  # `mcpd status` asking
    http = Http()
    locked = methods.profiles.get("locked")
    assert locked is not None
    http.sessions = {"s1": Session(locked), "s2": Session(locked)}
    assert methods.agents() == {"coding": 1}
    methods._http = http  # type: ignore[assignment]
    assert methods.agents() == {"coding": 1, "locked": 2}


def test_a_profile_whose_socket_failed_says_why_in_its_status() -> None:
    methods = Methods()
    methods.sockets.errors["locked"] = "address in use"
    rows = {r.name: r for r in methods.profile_status()}
    assert rows["locked"].socket_error == "address in use"
    assert rows["coding"].socket_error is UNSET
    [only] = methods.profile_status(only="coding")
    assert only.name == "coding"
