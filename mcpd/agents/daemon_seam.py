"""What the agent side may ask of the rest of the daemon, and nothing more.

The servers are ``servers.all_servers.AllServers``, used as it is (a profile filters
what its agents see of them, ``profiles.Profile``). ``DaemonForAgents`` is the daemon itself: its
settings, whether it is ready, its status, the servers' recent history, metrics,
reload, the OAuth logins (``servers.auth_commands.Logins``, for ``mcpd auth``), the pins, the
policy and the calls waiting for approval; the wiring (``mcpd.daemon``) provides it.
``LineSink`` is how a connection writes its lines; the wiring hands over the
implementation the stdio transports use too (the agent side never imports
``transports``), so a burst of requests and the writes it causes upstream share one
batch.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import trio

from ..audit.log import AuditLog
from ..config.tables.model import DaemonConfig
from ..local.pins.pinfile import PinKeeper
from ..policy.decision.gate import CallGate
from ..policy.waiting.approvals import Approvals
from ..registry.profiles.views import ProfileView
from ..reloading.outcome import ReloadReport
from ..servers.auth_commands import Logins
from ..servers.shared import ResetOutcome, ServerHistory
from ..status_document import StatusDocument


class DaemonForAgents(abc.ABC):
    """The daemon as the agent side may ask it (``mcpd.daemon.Daemon``, which derives
    from this: it imports the agent side)."""

    logins: Logins  # ``mcpd auth``: the OAuth logins of the HTTP servers, by alias
    pins: PinKeeper  # ``mcpd approve``, ``mcpd tools --pending|--findings``, ``mcpd pins``

    @property
    @abc.abstractmethod
    def settings(self) -> DaemonConfig:
        """The ``[daemon]`` table in force (it may change on reload)."""
        ...

    @property
    @abc.abstractmethod
    def ready(self) -> bool: ...

    @abc.abstractmethod
    def status(self, scope: ProfileView | None = None, *, own_user: bool = False) -> StatusDocument:
        """``mcpd status``: everything (``scope`` None, which is the daemon's own user's
        and root's alone), or what an agent of the profile ``scope`` may read: its
        servers, its own profile, none of the daemon's paths; and of its servers, what
        they wrote on stderr, their pids and homes only if ``own_user``, the reader
        being the daemon's own user or root (``peers.is_owner``)."""
        ...

    @abc.abstractmethod
    def history(self, scope: ProfileView | None = None) -> list[ServerHistory]:
        """Each server's last day of states and last hour of calls (of the servers
        ``scope`` has), for the status page."""
        ...

    @abc.abstractmethod
    def metrics(self, scope: ProfileView | None = None) -> str:
        """Prometheus text for ``GET /metrics`` (of the servers ``scope`` has)."""
        ...

    @abc.abstractmethod
    async def reload(self) -> ReloadReport:
        """Re-read the config and put it in force, by ``mcpd reload`` or a SIGHUP;
        raises ``rpc.RPCError`` when it is rejected."""
        ...

    @abc.abstractmethod
    def reset(self, alias: str, who: str, scope: ProfileView | None = None) -> ResetOutcome:
        """``mcpd reset``: the server's circuit closed on trial, journaled as ``who``
        asked; raises ``rpc.RPCError`` for a server that does not run, or (``scope``
        given) that the profile ``scope`` does not have, naming only those it has."""
        ...

    @property
    @abc.abstractmethod
    def approvals(self) -> Approvals:
        """The calls waiting for a person (``mcpd approvals``)."""
        ...

    @property
    @abc.abstractmethod
    def audit(self) -> AuditLog:
        """The record of every call (``calls.jsonl``, the journal, the counts)."""
        ...

    @property
    @abc.abstractmethod
    def call_gate(self) -> CallGate:
        """The ``[[policy]]`` rules in force, their rate limits and the approvals."""
        ...

    @abc.abstractmethod
    def http_token(self) -> str:
        """The bearer token the HTTP endpoint wants now (``mcpd token --rotate`` changes it)."""
        ...

    @abc.abstractmethod
    def server_of(self, pid: int) -> str | None:
        """The server whose process ``pid`` is, or descends from (None: no server's)."""
        ...

    @abc.abstractmethod
    def server_pids(self) -> list[int]:
        """The first process of each server running or starting now."""
        ...

    @abc.abstractmethod
    def relayed_by(self, port: int, to: int) -> str | None:
        """The server whose host loopback grant mcpd relays through its own connection
        from 127.0.0.1:``port`` to the host's port ``to`` (None: no relay's)."""
        ...


class LineSink(Protocol):
    """A connection's ordered, non-blocking line writer."""

    limit: int

    @property
    def queued(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    def put(self, line: bytes) -> str | None: ...

    def put_spliced(self, line: bytes) -> None:
        """A line that needs no check: one built by ``protocol.jsonrpc.splice``."""
        ...

    def put_piece(self, piece: bytes | memoryview, end: bool = False) -> None:
        """Part of a line the caller has checked; nothing else is put until ``end``."""
        ...

    async def wait_room(self, limit: int | None = None) -> None: ...

    async def drain(self) -> None: ...

    async def run(self, write_timeout: float | None = None) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Lines:
    """How a connection writes and reads its lines, lent by the transports:
    ``writer(stream, fd, limit, check)`` makes its ``LineSink``; ``batch()`` batches
    the writes of one chunk read; ``receive(fd, max_bytes, wait_first)`` reads a chunk
    (waiting first when the last read emptied the socket)."""

    writer: Callable[[trio.abc.SendStream, int, int, Callable[[bytes], str | None]], LineSink]
    batch: Callable[[], AbstractContextManager[None]]
    receive: Callable[[int, int, bool], Awaitable[bytes]]
