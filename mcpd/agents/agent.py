"""An agent's connection (or HTTP exchange) as the calls it makes need it: where their
outcomes go, where a call that must wait for a person is awaited, and what the agent
is (its session, profile, identity). ``connection.Connection`` derives from it, and so
do HTTP exchanges; what routes a call (``toolcall``) and what answers the other
requests (``extra_methods``) know the agent by this alone."""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable

from protocol import jsonrpc as rpc
from protocol.server import RequestContext, ServerSession

from ..policy.kin import AgentKin
from ..servers.shared import Call, Outcome, ProgressSink, Whose
from .askback.askback import AgentRequests, DirectAsker
from .identity import AgentIdentity
from .profiles import ProfileServers


class Agent(abc.ABC):
    """An agent's connection (or HTTP exchange), as its calls need it: the connection
    derives from this, which keeps it out of this module's imports."""

    session: ServerSession
    # The request contexts of the _meta it sends again and again, by those bytes.
    contexts: dict[bytes, RequestContext]
    profile: ProfileServers
    owner: object
    asks: AgentRequests  # what servers ask this agent through mcpd (a legacy agent)
    refuser: DirectAsker  # answers a server's request for an agent that declared none
    progress: ProgressSink
    identity: AgentIdentity  # who it is, for the policy and the audit log
    # The versions of the prompt and resource lists it was last told of (None: it has
    # not begun to hear of their changes).
    seen_offered: tuple[int, int] | None = None

    @abc.abstractmethod
    def finish(self, call: Call, outcome: Outcome) -> None:
        """A call's one outcome (``servers.calls.Caller``)."""

    def whose(self) -> Whose:
        """Whose its calls are (``servers.calls.Caller``)."""
        return self.identity.whose()

    @abc.abstractmethod
    def in_task(self, call: Call, answer: Callable[[], Awaitable[bytes]]) -> None:
        """``call``, started without a task, is answered by ``answer`` in a task of
        its request instead (it waits for a person's decision)."""

    @abc.abstractmethod
    async def kin(self) -> AgentKin:
        """Who may not decide this agent's calls that wait for approval: asked for once
        a call is to wait, and only then."""

    @abc.abstractmethod
    def offer(self, data: bytes, rid: rpc.Id | None = None) -> bool:
        """``send_nowait``, saying whether the message went: False when it was dropped
        (the agent let what waits for it fill up, or is gone)."""

    def send_nowait(self, data: bytes, rid: rpc.Id | None = None) -> None:
        """A message for the agent that answers none of its requests (or an error
        answering ``rid``); an agent that reads too slowly misses some."""
        self.offer(data, rid)

    @abc.abstractmethod
    def news_sender(self) -> Callable[[bytes], None]:
        """Where what answers no request goes later (a subscribed resource's updates)."""
