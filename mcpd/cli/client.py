"""A small blocking client for the daemon's socket, used by the command line, and how a
command that works on mcpd's files finds the config the running daemon uses."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple, TypeVar

import msgspec
from msgspec import UnsetType

from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.messages import Json, JsonObject
from protocol.mcp import core as mcp

from .. import __version__
from ..agents.entry.dial import (
    COMMAND_LINE,
    CONNECT_WAIT,
    STARTING,
    TELL_WAITS,
    WAITING,
    DialError,
    connect_unix,
    no_daemon,
    not_listening,
)
from ..agents.entry.peers import is_stopped, peer_of, untrusted_daemon
from ..config.loading.paths import SOCKET_VAR, client_socket_path, config_unread
from ..config.tables.model import default_config_path, default_socket_path
from ..status_document import StatusDocument

CLI_INFO = mcp.Implementation(name="mcpd-cli", version=__version__)
# How long a command waits for its reply: one the daemon answers from what it holds
# (status, lists, approvals), or one that waits on a server or on starting servers
# (a tool's call, a reload).
QUICK: Final = 10.0
LONG: Final = 120.0
JSON_HELP = "print JSON, for a program to read, rather than a table"
SOCKET_HELP = (
    "daemon socket (default: $MCPD_SOCKET, else the [daemon] socket of the config, "
    "else the standard path)"
)

T = TypeVar("T")
# What mcpd answers with a server's own result, passed on as the server wrote it.
_RELAYED: Final = frozenset({"tools/call", "prompts/get", "resources/read", "completion/complete"})


def socket_path(text: str) -> str:
    """``--socket``: an empty path is refused, not taken for no option (the default);
    so is one of only spaces, which is a slip, not a file anyone named so."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "a path empty or of only spaces names no socket: give the daemon's socket, "
            "or leave --socket out"
        )
    return text


def _content(method: str, result: Json) -> Json:
    """A result as the commands read it: of mcpd's own methods, without the
    ``resultType`` that frames every modern result (each is complete), so that what
    they print or go through is what the method answers."""
    if method.startswith("mcpd/") and isinstance(result, dict):
        result.pop("resultType", None)
    return result


class DaemonUnreachable(Exception):
    """No daemon answers on the socket."""


class NotAnswering(DaemonUnreachable):
    """A daemon took the connection and gave no reply in time (it is stopped, or
    wedged)."""


class Untrusted(DaemonUnreachable):
    """What answers on the socket runs as a user the client does not talk to."""


class BadReply(Exception):
    """Something answered on the socket, but not with a reply the client can read."""


class Client:
    def __init__(self, path: str, timeout: float = LONG) -> None:
        self.path = path
        self.timeout = timeout
        try:
            self._sock = connect_unix(path, min(timeout, CONNECT_WAIT))
        except (FileNotFoundError, ConnectionRefusedError, PermissionError) as exc:
            said = no_daemon(path, exc) or (
                f"{not_listening(path, exc)}{unread_config(path)}; start one with {STARTING}"
            )
            raise DaemonUnreachable(said) from None
        except DialError as exc:
            raise DaemonUnreachable(str(exc)) from None
        self._sock.settimeout(timeout)
        refusal = untrusted_daemon(self._sock, path)
        if refusal is not None:
            self._sock.close()
            raise Untrusted(refusal)
        self._buf = b""
        self._ids = rpc.IdAllocator()
        # Said before anything else, with the first request (``for_a_person``).
        self._first = b""
        self._waiting: Callable[[JsonObject], None] | None = None

    def for_a_person(self) -> Client:
        """Say first that what this connection asks for is printed for a person to read
        (a table on a terminal): the daemon then takes it for no agent, so the shell
        that listed a server's tools may approve them next. Never for what a program
        reads (``--json``, ``--format``) or for a call: a program that hands a model the
        tools and runs its calls is that model's host, whose shell tool may not approve."""
        self._first = rpc.encode_notification(COMMAND_LINE, None) + b"\n"
        return self

    def tell_waits(self, waiting: Callable[[JsonObject], None]) -> Client:
        """Ask to be told when a call waits for a person: ``waiting`` gets its id and
        how long it waits (``dial.WAITING``)."""
        self._first += rpc.encode_notification(TELL_WAITS, None) + b"\n"
        self._waiting = waiting
        return self

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        params: Mapping[str, Json] | None = None,
        progress: Callable[[JsonObject], None] | None = None,
    ) -> Json:
        """Send one modern request; return the decoded result or raise rpc.RPCError.
        With ``progress``, the request asks for progress reports (which also extend a
        call's time limit) and each one's params go to it."""
        result = self._result(method, params, progress)
        try:
            decoded = msgspec.json.decode(result)
        except msgspec.DecodeError as exc:  # a number past a float's range, say
            raise BadReply(f"the answer of mcpd to {method} could not be read ({exc})") from None
        return _content(method, decoded)

    def request_as(
        self, method: str, shape: type[T], params: Mapping[str, Json] | None = None
    ) -> T:
        """``request``'s result as the type mcpd answers ``method`` with: what a daemon
        of another version adds is left out, what it leaves out that has a default
        takes it, and a result of another shape is a reply that cannot be read."""
        try:
            return msgspec.json.decode(self._result(method, params, None), type=shape)
        except msgspec.ValidationError as exc:
            raise BadReply(f"the answer of mcpd to {method} could not be read ({exc})") from None

    def _result(
        self,
        method: str,
        params: Mapping[str, Json] | None,
        progress: Callable[[JsonObject], None] | None,
    ) -> msgspec.Raw:
        """The result of ``method`` as the daemon wrote it."""
        meta = mcp.request_meta(mcp.LATEST_MODERN, {}, CLI_INFO)
        rid = self._ids.next()
        token = f"mcpd-cli-{rid}"
        if progress is not None:
            meta["progressToken"] = token
        body = {**(params or {}), "_meta": meta}
        try:
            first, self._first = self._first, b""
            self._sock.sendall(first + rpc.encode_request(rid, method, body) + b"\n")
            while True:
                line = self._readline()
                try:
                    msg = envelope.decode_message(line)
                    if isinstance(msg, rpc.Response) and msg.id == rid:
                        return msg.result
                    if (
                        progress is not None
                        and isinstance(msg, rpc.Notification)
                        and msg.method == "notifications/progress"
                        and msg.params is not None
                    ):
                        report = msgspec.json.decode(msg.params)
                        if isinstance(report, dict) and report.get("progressToken") == token:
                            progress(report)
                    if (
                        self._waiting is not None
                        and isinstance(msg, rpc.Notification)
                        and msg.method == WAITING
                        and msg.params is not None
                    ):
                        waits = msgspec.json.decode(msg.params)
                        if isinstance(waits, dict):
                            self._waiting(waits)
                except (rpc.DecodeFailure, msgspec.DecodeError) as exc:
                    raise self._unreadable(line, rid, exc, method) from None
                if isinstance(msg, rpc.ErrorResponse) and msg.id in (rid, None):
                    error, data = msg.error, msg.error.data
                    if isinstance(data, msgspec.Raw):  # the daemon's own: read whole
                        data = msgspec.json.decode(data)
                    raise rpc.RPCError(error.code, error.message, data)
        except TimeoutError:
            raise NotAnswering(
                f"{self._holder()} is not answering (no reply in {self.timeout:g} s)"
                + self._why_silent()
            ) from None
        except OSError as exc:
            raise DaemonUnreachable(f"lost the connection to mcpd on {self.path}: {exc}") from None

    def _unreadable(
        self, line: bytes, rid: int, exc: rpc.DecodeFailure | msgspec.DecodeError, method: str
    ) -> BadReply:
        """Why a reply could not be taken: mcpd's line, or a value in it that mcpd passed
        on as it came (a tool's result, a progress report), which this client cannot
        decode."""
        if isinstance(exc, msgspec.DecodeError) or (
            isinstance(exc, rpc.MalformedResponse) and exc.given == rid
        ):
            why = exc.why if isinstance(exc, rpc.MalformedResponse) else str(exc)
            if method not in _RELAYED:
                return BadReply(f"the answer of mcpd to {method} could not be read ({why})")
            return BadReply(
                f"the reply of mcpd on {self.path} holds a value that could not be decoded "
                f"({why}); what a tool server sent is passed on as it came"
            )
        return BadReply(
            f"the reply of mcpd on {self.path} could not be read ({exc.message}); "
            f"it began {line[:80]!r}"
        )

    def _holder(self) -> str:
        """What holds the socket, by its pid as the kernel says: nothing it said tells
        that it is mcpd. The pid of systemd (1), which made a socket it passes, would
        name the wrong process."""
        peer = peer_of(self._sock)
        if peer is None or peer.pid <= 1:
            return f"the process holding {self.path}"
        return f"the process holding {self.path} (pid {peer.pid})"

    def _why_silent(self) -> str:
        """What a person can do about a holder that does not answer because it is
        stopped: nothing else this client sees tells it apart from a wedged one."""
        peer = peer_of(self._sock)
        if peer is None or peer.pid <= 1 or not is_stopped(peer.pid):
            return ""
        return (
            f"; it is stopped (by a signal, Ctrl-Z or a debugger): `kill -CONT {peer.pid}` "
            "lets it go on"
        )

    def _readline(self) -> bytes:
        while b"\n" not in self._buf:
            chunk = self._sock.recv(1 << 20)
            if not chunk:
                raise ConnectionResetError("the daemon closed the connection")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def list_tools(self) -> list[JsonObject]:
        """Every tool, page by page, each as the daemon wrote it."""
        tools: list[JsonObject] = []
        cursor: str | None = None
        while True:
            result = self.request("tools/list", {"cursor": cursor} if cursor else None)
            page = result.get("tools", []) if isinstance(result, dict) else None
            following = result.get("nextCursor") if isinstance(result, dict) else None
            if not isinstance(page, list) or not all(_named_tool(t) for t in page):
                raise BadReply("the answer of mcpd to tools/list could not be read (not tools)")
            if following is not None and not isinstance(following, str):
                raise BadReply("the answer of mcpd to tools/list could not be read (its cursor)")
            cursor = following
            tools += [t for t in page if isinstance(t, dict)]
            if not cursor:
                return tools


def _named_tool(tool: Json) -> bool:
    """A tool as the commands read one: an object with a name."""
    return isinstance(tool, dict) and isinstance(tool.get("name"), str)


class ConfigInUse(NamedTuple):
    path: str
    # Where a running daemon answered when asked; None when it was not asked or none did.
    socket: str | None = None
    # Where that daemon keeps its state, as it says (a demo's is a directory of its own).
    state_dir: str | None = None


def config_in_use_help() -> str:
    """What ``--config`` of ``mcpd token`` and ``mcpd connect`` defaults to, for --help."""
    if os.environ.get("MCPD_CONFIG"):
        return default_config_path()
    return f"the running daemon's, else {default_config_path()}"


class Running(NamedTuple):
    """The daemon answering on ``socket``, and the config file it was started with
    (None: none, as for ``mcpd serve --demo``)."""

    socket: str
    config: str | None
    state_dir: str | None = None


def running_daemon(socket: str | None = None) -> Running | None:
    """The daemon answering on the socket (``--socket`` and the rest, as for every
    client command), or None when none answers there or its answer cannot be read.
    Raises ``Untrusted`` for a process that runs as another user: what it says it
    reads is no guide, and falling back to the default would hide why."""
    path = client_socket_path(socket)
    try:
        with Client(path, timeout=10) as client:
            daemon = client.request_as("mcpd/status", StatusDocument).daemon
    except Untrusted:
        raise
    except (DaemonUnreachable, BadReply, rpc.RPCError, OSError):
        return None
    if isinstance(daemon.config, UnsetType):
        return None  # a daemon that does not say which config it reads
    state_file = daemon.state_file
    return Running(
        path,
        daemon.config or None,
        os.path.dirname(state_file) if isinstance(state_file, str) and state_file else None,
    )


def config_in_use(explicit: str | None, socket: str | None = None) -> ConfigInUse:
    """The config file of ``mcpd token`` and ``mcpd connect``: ``--config``, else
    ``$MCPD_CONFIG``, else the one the daemon answering on the socket was started with,
    else the default path. The running daemon's, because that is the file whose token
    its HTTP endpoint checks and whose profiles it serves: the default path is only
    right for a daemon started without ``--config``. Raises ``Untrusted`` as
    ``running_daemon`` does."""
    if explicit:
        return ConfigInUse(explicit)
    if os.environ.get("MCPD_CONFIG"):
        return ConfigInUse(os.environ["MCPD_CONFIG"])
    running = running_daemon(socket)
    if running is None:
        return ConfigInUse(default_config_path())  # as for a daemon not yet started
    return ConfigInUse(running.config or default_config_path(), running.socket, running.state_dir)


def unread_config(path: str) -> str:
    """Why a command looked on the default socket ``path`` though ``$MCPD_CONFIG`` names
    the config whose socket it was to look on: that file could not be opened, or not
    read as TOML ("" when it could, or the command was not looking there for want of
    it)."""
    config = os.environ.get("MCPD_CONFIG")
    if not config or os.environ.get(SOCKET_VAR) or path != default_socket_path():
        return ""
    unread = config_unread(config)
    if unread is None:
        return ""
    return f"; $MCPD_CONFIG names {config}, which {unread}, so the default socket was tried"
