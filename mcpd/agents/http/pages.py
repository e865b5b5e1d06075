"""The read-only pages of the HTTP side (``http_side``): ``/status``, ``/tools``,
``/prompts``, ``/resources``, ``/healthz`` and ``/metrics``, each of the profile the
request may read: the one ``?profile=`` names, its socket's own, or the default one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeAlias

import msgspec

from protocol.jsonrpc import messages as rpc

from ...registry.profiles.views import ProfileView
from ...servers.all_servers import AllServers
from ..daemon_seam import DaemonForAgents
from ..lists.formats import FORMATS, translate
from ..profiles import Profile
from .exchange import RequestSender
from .wire import Reject

Query: TypeAlias = dict[str, list[str]]
PageAnswer: TypeAlias = tuple[int, str, bytes]  # the status, the content type and the body
PageHandler: TypeAlias = Callable[[Query, RequestSender], PageAnswer]

METRICS_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
_encode: Final = msgspec.json.Encoder().encode


class ReadPages:
    def __init__(
        self,
        servers: AllServers,
        control: DaemonForAgents,
        profile: Callable[[Query, RequestSender], Profile],
        scope: Callable[[Query, RequestSender], ProfileView | None],
    ) -> None:
        """``profile``: the profile a request may read; ``scope``: what of the daemon's
        status it may read (``Profiles.scope``)."""
        self.servers = servers
        self.control = control
        self._profile = profile
        self._scope = scope

    def find(self, path: str) -> PageHandler | None:
        """The page at ``path`` (None: there is none)."""
        pages: dict[str, PageHandler] = {
            "/status": self.status,
            "/tools": self.tools,
            "/prompts": self.prompts,
            "/resources": self.resources,
            "/healthz": self.healthz,
            "/metrics": self.metrics,
        }
        return pages.get(path)

    def status(self, query: Query, caller: RequestSender) -> PageAnswer:
        scope = self._scope(query, caller)
        own_user = caller.who().reads_shared_output(caller.fixed)
        return 200, "application/json", _encode(self.control.status(scope, own_user=own_user))

    def tools(self, query: Query, caller: RequestSender) -> PageAnswer:
        listing = self._profile(query, caller).listing()
        tools = msgspec.json.decode(rpc.encode(listing))
        fmt = (query.get("format") or ["mcp"])[0]
        if fmt == "mcp":
            return 200, "application/json", _encode({"tools": tools})
        if fmt not in FORMATS:
            known = ", ".join(["mcp", *FORMATS])
            raise Reject(400, _encode({"error": f"unknown format {fmt!r}; use one of {known}"}))
        return 200, "application/json", _encode(translate(tools, fmt))

    def prompts(self, query: Query, caller: RequestSender) -> PageAnswer:
        sees = self._profile(query, caller).view.admits_prompt
        return 200, "application/json", _encode({"prompts": self.servers.prompt_listing(sees)})

    def resources(self, query: Query, caller: RequestSender) -> PageAnswer:
        s, sight = self.servers, self._profile(query, caller).view
        body = {
            "resources": s.resource_listing(sight),
            "resourceTemplates": s.template_listing(sight),
        }
        return 200, "application/json", _encode(body)

    def healthz(self, query: Query, caller: RequestSender) -> PageAnswer:
        scope = self._scope(query, caller)
        states = self.servers.states(None if scope is None else scope.has_server)
        down = [s for s in states if not s.available]
        if not self.control.ready:
            body = {"status": "starting", "servers": down}
        elif down:
            body = {"status": "unavailable", "servers": down}
        else:
            return 200, "application/json", _encode({"status": "ok", "servers": len(states)})
        return 503, "application/json", _encode(body)

    def metrics(self, query: Query, caller: RequestSender) -> PageAnswer:
        return 200, METRICS_TYPE, self.control.metrics(self._scope(query, caller)).encode()
