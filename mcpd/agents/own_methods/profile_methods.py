"""The socket's methods about profiles (mcpd's own, under ``mcpd/``).

- ``mcpd/useProfile {profile}``: this connection sees that profile from now on
  (``mcpd bridge --profile`` sends it first); an error says which profiles exist.
- ``mcpd/tools {profile?, policy?}``: every tool of a profile under its names, whatever
  its discovery mode, and what ``tools/list`` gives its agents (``mcpd tools
  --profile``); with ``policy``, what the ``[[policy]]`` rules decide for a call to
  each (``mcpd tools --policy``).
- ``mcpd/profiles``: per profile what it exposes and how many agents use it (also in
  ``mcpd/status``); an agent in a profile is told of its own only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeAlias, TypeVar

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.mcp.serving import RequestContext

from ...policy.deciders.departed import Departed
from ...policy.deciders.kin import AgentKin
from ...policy.decision.rules import facts_of
from ...registry.profiles.views import ProfileView
from ...registry.tables.table import listed_name
from ...status_document import ProfileStatus
from ..agent import Agent, Audience
from ..daemon_seam import DaemonForAgents
from ..entry.sockets import ProfileSockets
from ..profiles import Profile, Profiles

if TYPE_CHECKING:
    from ..beyond_tools.extra_methods import ExtraMethods
    from ..http.http_side import HttpSide
    from ..http.tcp import Connect


class _Choice(msgspec.Struct):
    profile: str | None = None
    policy: bool = False


class ProfileMethods:
    control: DaemonForAgents
    profiles: Profiles
    connections: set[Agent]
    _http: HttpSide | None
    sockets: ProfileSockets
    extras: ExtraMethods
    departed: Departed  # agents gone whose processes live on
    endpoint: Connect | None  # where the HTTP endpoint listens

    def view(self, conn: Audience) -> Profile:
        raise NotImplementedError

    @property
    def http(self) -> HttpSide:
        """The HTTP side (made by ``agent_server.AgentServer`` for the first HTTP request)."""
        raise NotImplementedError

    def scope_of(self, conn: Agent) -> ProfileView | None:
        """What of the daemon's status ``conn``'s agent may read (``Profiles.scope``)."""
        return self.profiles.scope(self.view(conn), conn.peer, conn.fixed_profile)

    def _chosen(self, conn: Agent, choice: _Choice, required: bool) -> Profile:
        if choice.profile is None:
            if required:
                raise rpc.RPCError(rpc.INVALID_PARAMS, "params.profile names the profile")
            return self.view(conn)
        return self.profiles.choose(choice.profile, conn.peer, conn.fixed_profile)

    async def _use_profile(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> object:
        chosen = self._chosen(conn, rpc.decode_as(req.params, _Choice), required=True)
        conn.profile = chosen
        conn.seen_version = chosen.version  # what it lists from now on is not a change
        self.extras.joined(conn)
        self.extras.switched(conn)
        return profile_summary(chosen)

    async def _profile_tools(
        self, conn: Agent, req: rpc.Request, ctx: RequestContext | None
    ) -> object:
        choice = rpc.decode_as(req.params, _Choice)
        chosen = self._chosen(conn, choice, required=False)
        out = profile_summary(chosen)
        out["tools"] = chosen.view.listing()
        if choice.policy:
            gate, view, derived = self.control.call_gate, chosen.view, chosen.derived_from
            out["decisions"] = {
                e.local: gate.policy.decide(
                    facts_of(e, chosen.name, view.registry.server_flags(e.alias)[0], derived)
                ).summary()
                for e in view.entries()
            }
        return out

    async def _profiles(self, conn: Agent, req: rpc.Request, ctx: RequestContext | None) -> object:
        scope = self.scope_of(conn)
        return {"profiles": self.profile_status(only=None if scope is None else scope.name)}

    def agent_connections(self) -> list[Agent]:
        """The connections that spoke MCP, not those with only mcpd's own commands (as
        the one ``mcpd status`` asks on)."""
        return [c for c in self.connections if c.spoke_mcp]

    async def agents_kin(self) -> list[AgentKin]:
        """Who may not approve what every agent's model reads: each agent connected now,
        on a socket (by lines, or HTTP) or on the TCP endpoint, and what it started; and
        each one gone while a process of it (or its bridge's host) lives on."""
        found = [await c.kin() for c in self.agent_connections()]
        if self._http is not None:
            found += [await caller.kin() for caller in list(self._http.agents.values())]
        return found + self.departed.living()

    def agents(self) -> Counter[str]:
        """How many agents use each profile, by name."""
        agents: Counter[str] = Counter(self.view(c).name for c in self.agent_connections())
        if self._http is not None:  # no HTTP request yet, no HTTP session
            agents.update(s.profile.name for s in self._http.sessions.values())
        return agents

    def profile_status(
        self, default_cap_warned: bool = False, only: str | None = None
    ) -> list[ProfileStatus]:
        """Per profile (only the one named ``only``, if given): what it exposes."""
        rows = self.profiles.status(self.agents(), default_cap_warned, only)
        for row in rows:
            error = self.sockets.errors.get(row.name)
            if error:
                row.socket_error = error
        return rows


_Host = TypeVar("_Host", bound=ProfileMethods)
# One of mcpd's own methods, as the server of agents' requests calls it: given its host
# (``ProfileMethods``, or the server that derives from it), the connection and the
# request. Its result is what the reply encodes (``rpc.encode_result``), or the reply's
# bytes, or None when it wrote the reply itself.
OwnMethod: TypeAlias = Callable[
    [_Host, Agent, rpc.Request, RequestContext | None], Awaitable[object]
]


def owner_only(conn: Agent, method: str) -> None:
    """Refuses ``method`` to anyone but the daemon's user and root on its Unix socket."""
    if not conn.may_control():
        raise rpc.RPCError(
            -32000, f"{method} is only for the daemon's user and root, on its Unix socket"
        )


def profile_summary(chosen: Profile) -> dict[str, object]:
    view = chosen.view
    listed = [listed_name(item) for item in chosen.listing()]
    return {
        "profile": chosen.name,
        "discovery": view.profile.discovery,
        "mode": view.mode,
        "count": view.count(),
        "listed": listed,
    }


PROFILE_METHODS: Final[dict[str, OwnMethod[ProfileMethods]]] = {
    "mcpd/useProfile": ProfileMethods._use_profile,
    "mcpd/tools": ProfileMethods._profile_tools,
    "mcpd/profiles": ProfileMethods._profiles,
}
