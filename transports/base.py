"""What every transport offers the daemon, declared once.

A transport moves JSON-RPC messages to one server and back: a child process over
stdio (``transports.stdio``), a Streamable HTTP endpoint (``transports.http``) or an
HTTP+SSE one of MCP 2024-11-05 (``transports.sse``). ``Transport`` is everything the
daemon uses of any of them. Each member says what it means for the transports it
does not otherwise apply to, so that a caller never has to ask which kind it holds.
What they raise is in ``transports.errors``.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, TypeAlias

import msgspec
import trio
from msgspec import Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.messages import (
    METHOD_NOT_FOUND,
    Notification,
    Request,
    encode_error,
    encode_result,
)
from protocol.jsonrpc.splice import SplicedCall
from protocol.mcp.core import Era
from protocol.pacing.read_budget import HeldBack
from protocol.shown.logfields import log_extra

from .errors import AuthError, TransportError
from .path_identity import PathIdentity
from .read_pace import ReadPace

# A request's or a notification's params: a typed struct, a JSON object built as a
# mapping, bytes passed on as they came, or none at all.
Params: TypeAlias = msgspec.Struct | Mapping[str, object] | Raw | UnsetType | None
NotificationHandler = Callable[[Notification], None]
# Answers a request a server sent us (elicitation, sampling, roots): the result to send
# back, or rpc.RPCError for an error answer. The transport never looks inside.
ServerRequestHandler = Callable[[rpc.Request], Awaitable[object]]
# Takes the answer to a request sent without waiting: (result, None) or (None, error).
ReplySink = Callable[[Raw | None, Exception | None], None]

# A server's requests being answered at once. Each holds a task until its answer is
# sent, and one that waits for an agent may wait for a person: a server that asks
# faster than it is answered would otherwise cost a task for every request it wrote.
MAX_ANSWERING: Final = 64
# The error code of a request refused because one of mcpd's bounds was reached (a
# server error of the implementation's own, as JSON-RPC leaves -32000 to -32099).
OVER_LIMIT: Final = -32000


class Started(msgspec.Struct, frozen=True):
    """A stdio server's process as mcpd started it (``Transport.started``)."""

    pid: int  # the process mcpd started: its sandbox's, whose descendants run the server
    mark: str  # what its descendants carry in their environment (``stdio.process.launch``)
    unprotected: str | None  # what of its sandbox could not be applied, and why
    # What its sandbox covers by a path (``stdio.sandbox.secret_folders``), as it was then.
    covered: tuple[PathIdentity, ...] = ()


class AuthHook(abc.ABC):
    """Where a transport gets its ``Authorization`` value, for credentials that change
    while it lives (an OAuth access token is refreshed, replaced after a new login)."""

    @abc.abstractmethod
    async def authorization(self) -> str | None:
        """The value for the next message (None: none); may wait for a refresh."""

    @abc.abstractmethod
    async def refused(self, error: AuthError, sent: str | None) -> str | None:
        """The server refused ``sent``: a value to send the message again with, or
        ``None`` to let ``error`` stand (the hook may raise its own error instead)."""

    @abc.abstractmethod
    async def refused_again(self, error: AuthError, sent: str | None) -> None:
        """The message was refused once more, with the value ``refused`` handed out:
        the hook may raise its own error (the login ended meanwhile); else ``error``
        stands."""

    @abc.abstractmethod
    def accepted(self, sent: str | None) -> None:
        """A message carrying ``sent`` went through."""


class Transport(abc.ABC):
    """One server's messages, whatever carries them.

    A transport lives inside the ``async with`` of its ``open_*`` function, which
    starts it (a process, a connection pool, an event stream) and stops it on exit.
    """

    # Credentials that change, asked for before each message; given to the ``open_*``
    # function, as an HTTP+SSE transport's stream needs them to open. Both HTTP
    # transports send them; a stdio server has no channel for them.
    auth: AuthHook | None = None
    # How it reads what the server sends (``held_back``, ``read_work``), set by each
    # transport of mcpd's as it is built.
    _pace: ReadPace | None = None

    def __init__(self, alias: str) -> None:
        self.alias = alias
        # Who answers the server's own requests; set by the owner before any arrive.
        # Without one, ``ping`` is answered and anything else refused.
        self.on_request: ServerRequestHandler | None = None
        # Who hears that the server answered a request mcpd had given up on (it has read
        # the cancel, or finished): set by the owner, as ``on_request`` is.
        self.on_late_answer: Callable[[rpc.Id], None] | None = None
        # The era the handshake settled on, set by it before its first request. Only
        # Streamable HTTP changes how it speaks with it (a legacy session's id, its
        # push stream, cancelling by notification); the other two keep it.
        self.era: Era | None = None
        # Set once the transport can carry nothing more, with ``error`` saying why: a
        # stdio server exited or closed its stdout, an HTTP+SSE stream ended. Each
        # Streamable HTTP request stands alone, so that one closes only as it is left.
        self.closed = trio.Event()
        self.error: TransportError | None = None

    def _answered_late(self, rid: rpc.Id) -> None:
        if self.on_late_answer is not None:
            self.on_late_answer(rid)

    @abc.abstractmethod
    async def request(
        self,
        method: str,
        params: Params,
        *,
        headers: Mapping[str, str] | None = None,
        cancellable: bool = True,
    ) -> Raw:
        """Send one request and return its raw ``result``.

        ``headers`` go with it where messages have headers (HTTP); a stdio server
        gets none. Cancelling the caller abandons the request; the transport tells the
        server (``notifications/cancelled`` or closing the stream) when ``cancellable``.
        """

    @abc.abstractmethod
    async def notify(
        self, method: str, params: Params, *, headers: Mapping[str, str] | None = None
    ) -> None:
        """Send one notification (``headers`` as for ``request``)."""

    @abc.abstractmethod
    def send(
        self,
        method: str,
        params: Params | SplicedCall,
        reply: ReplySink,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> rpc.Id:
        """Send one request without waiting for its answer: ``reply`` gets it, once,
        unless the request is forgotten first. Returns what ``forget`` takes; raises the
        transport's error if it is closed.

        A ``SplicedCall`` (a tools/call built around its arguments' bytes) is written as
        it is, without encoding or a check. A stdio server's answer comes from the task
        that reads it, with no task per request; HTTP answers each request on an
        exchange of its own, which a task of the transport's awaits."""

    @abc.abstractmethod
    def forget(self, rid: rpc.Id, reason: str) -> None:
        """Give up on a request sent with ``send``: the server is told (a notification,
        or the exchange dropped), and its answer is not passed on."""

    # Members of one kind of transport: the others keep what is written here.

    async def listen(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Hold open what the server pushes on outside of any request, until the
        transport closes; started (for ``nursery.start``) once it is open. Only a
        legacy Streamable HTTP session has such a stream of its own: elsewhere what
        the server sends already comes on the one stream it has (stdout, the event
        stream), and this returns at once."""
        task_status.started()

    @property
    def session_lost(self) -> bool:
        """Whether the server forgot the session (a legacy Streamable HTTP one) and no
        handshake has set up a new one since: nothing but a handshake is sent then."""
        return False

    def reset_session(self) -> None:
        """Forget the session an earlier handshake began, before a new one. Only a
        legacy Streamable HTTP session is kept apart from its transport (its
        ``Mcp-Session-Id``); a stdio process or an HTTP+SSE stream is the session,
        and a new one comes with a new transport."""
        return

    @property
    def pid(self) -> int | None:
        """The server's process id, where mcpd started it (stdio); otherwise None."""
        return None

    @property
    def started(self) -> Started | None:
        """What mcpd started for the server (stdio): the process, the mark its
        descendants carry, and what of its sandbox could not be applied. None where
        mcpd started nothing (HTTP)."""
        return None

    def stderr_tail(self) -> list[str]:
        """The last lines the server wrote on stderr (stdio); HTTP has none."""
        return []

    @property
    def held_back(self) -> HeldBack | None:
        """Why mcpd reads what the server sends more slowly than it comes, while it
        does (``transports.read_pace``); every transport of mcpd's reads within a pace."""
        return self._pace.held_back if self._pace is not None else None

    @property
    def read_work(self) -> float:
        """Seconds of the thread every server and agent shares that taking apart what
        the server sent took so far (``transports.read_pace``): across a request, what
        reading its answer cost, with whatever else the server sent meanwhile. Every
        transport of mcpd's measures it; one that does not says 0."""
        return self._pace.worked if self._pace is not None else 0.0


def default_answer(req: Request) -> bytes:
    """The answer to a server's request when nobody else takes it: ``ping`` works
    (servers use it to see that the client is there), anything else is -32601."""
    if req.method == "ping":
        return encode_result(req.id, {})
    return encode_error(req.id, METHOD_NOT_FOUND, unsupported(req.method))


def unsupported(method: str) -> str:
    """mcpd's words refusing a server's request for ``method``."""
    return f"mcpd does not support {method!r}"


logger = logging.getLogger("mcpd.transport")


async def answer_server_request(
    alias: str, handler: ServerRequestHandler | None, req: rpc.Request
) -> bytes:
    """The encoded answer to a server's request: ``ping`` and (without a handler)
    everything else as ``default_answer`` says; otherwise what the handler answers."""
    if req.method == "ping" or handler is None:
        return default_answer(req)
    try:
        result = await handler(req)
    except rpc.RPCError as exc:
        return rpc.encode_error(req.id, exc.code, exc.message, exc.data)
    except Exception:
        logger.exception(
            "%s: answering the server's %s request failed",
            alias,
            req.method,
            extra=log_extra(alias, "server_request_failed"),
        )
        return rpc.encode_error(req.id, rpc.INTERNAL_ERROR, "mcpd failed to answer")
    return rpc.encode_result(req.id, result)
