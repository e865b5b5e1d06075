"""A small blocking client for the daemon's socket, used by the command line."""

from __future__ import annotations

import socket
from typing import Any

import msgspec

from protocol import jsonrpc as rpc
from protocol import mcp

from .. import __version__

CLI_INFO = mcp.Implementation(name="mcpd-cli", version=__version__)
SOCKET_HELP = (
    "daemon socket (default: $MCPD_SOCKET, else the [daemon] socket of the config, "
    "else the standard path)"
)


class Unreachable(Exception):
    """No daemon answers on the socket."""


class BadReply(Exception):
    """Something answered on the socket, but not with a reply the client can read."""


class Client:
    def __init__(self, path: str, timeout: float = 120.0) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            self._sock.close()
            raise Unreachable(f"no mcpd is listening on {path} ({exc.strerror})") from None
        except PermissionError:
            self._sock.close()
            raise Unreachable(f"not allowed to connect to {path}") from None
        self._buf = b""
        self._ids = rpc.IdAllocator()

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one modern request; return the decoded result or raise rpc.RPCError."""
        body = dict(params or {})
        body["_meta"] = mcp.request_meta(mcp.LATEST_MODERN, {}, CLI_INFO)
        rid = self._ids.next()
        try:
            self._sock.sendall(rpc.encode_request(rid, method, body) + b"\n")
            while True:
                line = self._readline()
                try:
                    msg = rpc.decode_message(line)
                    if isinstance(msg, rpc.Response) and msg.id == rid:
                        return msgspec.json.decode(msg.result)
                except (rpc.DecodeFailure, msgspec.DecodeError) as exc:
                    reason = exc.message if isinstance(exc, rpc.DecodeFailure) else str(exc)
                    raise BadReply(
                        f"the reply of mcpd on {self.path} could not be read ({reason}); "
                        f"it began {line[:80]!r}"
                    ) from None
                if isinstance(msg, rpc.ErrorResponse) and msg.id in (rid, None):
                    raise rpc.RPCError.from_object(msg.error)
        except OSError as exc:
            raise Unreachable(f"lost the connection to mcpd on {self.path}: {exc}") from None

    def _readline(self) -> bytes:
        while b"\n" not in self._buf:
            chunk = self._sock.recv(1 << 20)
            if not chunk:
                raise ConnectionResetError("the daemon closed the connection")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            result = self.request("tools/list", {"cursor": cursor} if cursor else None)
            tools.extend(result.get("tools", []))
            cursor = result.get("nextCursor")
            if not cursor:
                return tools
