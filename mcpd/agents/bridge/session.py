"""The host's legacy session as ``mcpd bridge`` relayed it, to set it up again on a new
daemon connection: its ``initialize``, the resources it subscribed to, its log level.

A new connection has no session of its own. The bridge repeats these under its own
ids, keeps the answers from the host, and tells the host that the lists the daemon
offers may have changed, since the daemon it now talks to may not be the one it
listed them from.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from protocol.jsonrpc import messages as rpc

from .ledger import OpenRelays, OwnRequests


class _Uri(msgspec.Struct):
    uri: str


class _Listed(msgspec.Struct):
    listChanged: bool = False


class _Offers(msgspec.Struct):
    tools: _Listed | None = None
    prompts: _Listed | None = None
    resources: _Listed | None = None


class _Greeting(msgspec.Struct):
    capabilities: _Offers = msgspec.field(default_factory=_Offers)


class _Answer(msgspec.Struct):
    result: _Greeting


class HostSession:
    def __init__(self) -> None:
        self.initialize: msgspec.Raw | None = None
        self._subscribed: dict[str, msgspec.Raw | None] = {}  # uri -> the params sent
        self._log_level: msgspec.Raw | None = None

    def note(self, msg: rpc.Request) -> None:
        """What ``msg``, relayed to the daemon, changes of the session."""
        if msg.method == "initialize":
            self.initialize = msg.params
            self._subscribed.clear()
            self._log_level = None
        elif msg.method == "logging/setLevel":
            self._log_level = msg.params
        elif msg.method in ("resources/subscribe", "resources/unsubscribe"):
            try:
                uri = rpc.decode_as(msg.params, _Uri).uri
            except rpc.InvalidParams:
                return
            if msg.method == "resources/subscribe":
                self._subscribed[uri] = msg.params
            else:
                self._subscribed.pop(uri, None)

    def replay(self, own: OwnRequests, host: OpenRelays) -> bytes:
        """The lines that set the session up again, or nothing when there is none."""
        if self.initialize is None:
            return b""

        def request(method: str, params: msgspec.Raw | None) -> bytes:
            return rpc.encode_request(own.new(method, host), method, params) + b"\n"

        lines = [
            request("initialize", self.initialize),
            rpc.encode_notification("notifications/initialized") + b"\n",
        ]
        if self._log_level is not None:
            lines.append(request("logging/setLevel", self._log_level))
        lines += [request("resources/subscribe", p) for p in self._subscribed.values()]
        return b"".join(lines)


def list_changes(answer: bytes, say: Callable[[str], None]) -> bytes:
    """The notifications that tell the host its lists may have changed, for each list
    the daemon's answer to the repeated ``initialize`` offers to announce."""
    try:
        offers = rpc.decoder_for(_Answer).decode(answer).result.capabilities
    except (msgspec.DecodeError, RecursionError):
        say("mcpd did not take the host's session again; its requests get mcpd's errors")
        return b""
    lists = [
        name
        for name, offer in (
            ("tools", offers.tools),
            ("prompts", offers.prompts),
            ("resources", offers.resources),
        )
        if offer is not None and offer.listChanged
    ]
    say(
        "connected to mcpd again and set the host's session up anew"
        + (f"; told the host its {', '.join(lists)} may have changed" if lists else "")
    )
    return b"".join(
        rpc.encode_notification(f"notifications/{name}/list_changed") + b"\n" for name in lists
    )
