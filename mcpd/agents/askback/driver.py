"""One agent request that its server may answer by asking back: the driver.

``AskBackDriver.serve`` runs a tools/call, prompts/get or resources/read for an agent and
returns its reply, whichever era either side speaks (``askers`` explains the four
cases). For a modern agent the server's request may come after the agent's request
has been answered (with input_required), so the request to the server runs in a
task of this service's own, not of the agent's request, and its replies go to
whichever of the agent's retries is waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic

import msgspec
import trio
from msgspec import Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import features

from ...config.tables.model import DaemonConfig
from ...servers.shared import AgentKey, Whose
from ..connection.failures import Failures, split_failure
from .askers import AgentRequests, DirectAsker, Flow, Park, ParkedAsker, Parks, Retry, claim
from .rounds import Out, Req, RoundTrip, legacy_rounds


def may_be_asked(capabilities: rpc.JsonObject | None) -> bool:
    """Whether an agent with ``capabilities`` declared anything a server may ask of it."""
    caps = capabilities or {}
    return any(isinstance(caps.get(k), dict) for k in features.ASK_METHODS.values())


class AgentSide(msgspec.Struct):
    """The agent behind one request, as far as asking it things, and telling it why a
    server did not answer, goes."""

    owner: AgentKey
    modern: bool
    capabilities: dict[str, Any] | None  # as msgspec can read it: not the recursive rpc.Json
    requests: AgentRequests | None  # a legacy agent's: mcpd's requests to it
    send: Callable[[bytes], bool]  # whether the line went (False: dropped)
    # The daemon's own user's or root's: told an outage with its server's stderr line.
    own_user: bool = False
    # Whose its requests' bytes are weighed against while under way (None: not weighed).
    whose: Whose | None = None

    @property
    def asks(self) -> bool:
        """Whether it declared anything a server may ask of it."""
        return may_be_asked(self.capabilities)

    def upstream_capabilities(self) -> rpc.JsonObject | None:
        """What a modern server is told this agent can answer (a legacy agent's
        initialize capabilities, in the 2026 shape)."""
        caps = self.capabilities or {}
        if self.modern:
            return caps or None
        out = {k: caps[k] for k in ("elicitation", "sampling") if isinstance(caps.get(k), dict)}
        if isinstance(caps.get("roots"), dict):
            out["roots"] = {}
        return out or None


@dataclass(frozen=True, slots=True)
class Asked(Generic[Req]):
    """An agent's request whose server may ask it things, as the driver reads it: the
    request as its server is sent it, and of the agent's: its id, its method, what it
    names (a tool's or prompt's name as the agent called it, or a URI), its arguments,
    and the ``requestState`` and ``inputResponses`` it brings."""

    request: Req
    rid: rpc.Id
    method: str
    name: str | None
    arguments: Raw | UnsetType
    state: Raw | UnsetType
    responses: Raw | UnsetType


class AskBackDriver:
    def __init__(
        self, failures: Failures | None = None, settings: Callable[[], DaemonConfig] = DaemonConfig
    ) -> None:
        self.parks = Parks()
        self.failures = failures or Failures()
        # The daemon's settings as they are now (a reload may change them): how long a
        # legacy agent may take to answer what a modern server asks it (``ask_timeout``,
        # read as each request starts), and the line that bounds what it hands an agent.
        self._settings = settings
        self._nursery: trio.Nursery | None = None

    def max_line_bytes(self) -> int:
        """The daemon's ``max_line_bytes`` now: what bounds a server's ``requestState``
        a modern agent is handed (``state_bound.largest_state``)."""
        return self._settings().max_line_bytes

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def owner_gone(self, owner: AgentKey, why: str) -> None:
        """The agent disconnected: what its servers wait for fails at once (its own
        requests were failed by its connection or session as it closed)."""
        self.parks.owner_gone(owner, why)

    async def serve(self, agent: AgentSide, asked: Asked[Req], trip: RoundTrip[Req, Out]) -> bytes:
        """The reply to ``asked``, a request of ``agent``'s whose server may ask the
        agent things, its rounds going to the server and back as ``trip`` says."""
        request, rid = asked.request, asked.rid
        found = self.parks.find(asked.state)
        if found is True:
            raise rpc.RPCError(
                rpc.INVALID_PARAMS,
                "this requestState is mcpd's and has expired (the server stopped waiting); "
                "send the request again without it",
            )
        if isinstance(found, Park):
            responses = _decode(asked.responses)
            retry = Retry(agent.owner, asked.method, asked.name, asked.arguments, responses, rid)
            return await claim(found, retry).next()
        # An agent that declared nothing a server may ask is still the one to blame for
        # its calls: its asker refuses, and the server hears why.
        direct = DirectAsker(
            agent.owner,
            agent.capabilities if agent.asks else None,
            agent.requests or AgentRequests(),
            agent.send,
        )
        if not agent.modern:
            ask_timeout = self._settings().ask_timeout
            outcome = await legacy_rounds(request, direct, trip, ask_timeout=ask_timeout)
            return trip.shape(rid, outcome)
        if not agent.asks or self._nursery is None:
            return trip.shape(rid, await trip.send(request, direct))
        flow = Flow(agent.owner, asked.method, asked.name, asked.arguments, rid)
        asker_ = ParkedAsker(flow, agent.capabilities, self.parks)
        self._nursery.start_soon(self._drive, flow, request, asker_, trip)
        return await flow.next()

    async def _drive(
        self, flow: Flow, request: Req, asker: ParkedAsker, trip: RoundTrip[Req, Out]
    ) -> None:
        with flow.scope:
            try:
                outcome = await trip.send(request, asker)
                flow.deliver(lambda rid: trip.shape(rid, outcome))
            except BaseException as exc:
                # A fault here must cost this request only, never the daemon; what is not
                # an Exception (a cancellation) goes on up.
                failed, rest = split_failure(exc)
                if failed is None:
                    raise
                flow.deliver(lambda rid: self.failures.reply("an agent", rid, flow.method, failed))
                if rest is not None:
                    raise rest from None


def _decode(raw: Raw | UnsetType) -> object:
    if not isinstance(raw, msgspec.Raw):
        return None
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
