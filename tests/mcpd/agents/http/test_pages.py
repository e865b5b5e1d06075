"""The read-only pages of the HTTP side (``ReadPages``), each answered for the profile
and the scope the request may read, with stand-ins for the servers and the daemon:
which paths are pages, ``/tools`` in the model APIs' formats or refused naming those
there are, and ``/healthz`` saying starting, unavailable (naming who) or ok."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, cast

import pytest

from mcpd.agents.daemon_seam import DaemonForAgents
from mcpd.agents.entry.peers import Peer
from mcpd.agents.http.exchange import RequestSender
from mcpd.agents.http.pages import METRICS_TYPE, Query, ReadPages
from mcpd.agents.http.wire import Reject
from mcpd.agents.profiles import Profile
from mcpd.registry.profiles.views import ProfileView
from mcpd.servers.all_servers import AllServers
from mcpd.servers.shared import ServerState

# A user neither mcpd's own nor root.
STRANGER = 4242 if os.getuid() != 4242 else 4243
CALLER = RequestSender(peer=Peer(pid=5, uid=STRANGER, gid=STRANGER))
TOOL = {"name": "notes__search", "description": "Search.", "inputSchema": {"type": "object"}}


class Scope:
    """What of the daemon a request may read: these servers."""

    def __init__(self, *servers: str) -> None:
        self.servers = servers

    def has_server(self, alias: str) -> bool:
        return alias in self.servers


class Servers:
    def __init__(self, states: list[ServerState]) -> None:
        self._states = states

    def states(self, only: Callable[[str], bool] | None = None) -> list[ServerState]:
        return [s for s in self._states if only is None or only(s.server)]


def up(alias: str) -> ServerState:
    return ServerState(server=alias, state="ready", available=True)


def down(alias: str) -> ServerState:
    return ServerState(server=alias, state="failed", available=False, reason="it exited")


# A server down as /healthz names it.
DOWN = {"server": "git", "state": "failed", "available": False, "reason": "it exited"}


class Daemon:
    def __init__(self, ready: bool = True) -> None:
        self.ready = ready
        self.asked: list[tuple[object, bool]] = []

    def status(self, scope: object = None, *, own_user: bool = False) -> dict[str, object]:
        self.asked.append((scope, own_user))
        return {"servers": []}

    def metrics(self, scope: object = None) -> str:
        return f"mcpd_up 1 # {scope is not None}\n"


class ProfileStub:
    def listing(self) -> list[dict[str, Any]]:
        return [TOOL]


def pages(
    states: list[ServerState] | None = None,
    *,
    ready: bool = True,
    scope: Scope | None = None,
) -> tuple[ReadPages, Daemon]:
    daemon = Daemon(ready)

    def profile(query: Query, caller: RequestSender) -> Profile:
        return cast(Profile, ProfileStub())

    def scoped(query: Query, caller: RequestSender) -> ProfileView | None:
        return cast(ProfileView, scope)

    read = ReadPages(
        cast(AllServers, Servers(states or [])), cast(DaemonForAgents, daemon), profile, scoped
    )
    return read, daemon


def body(answer: tuple[int, str, bytes]) -> tuple[int, Any]:
    status, kind, data = answer
    assert kind == "application/json"
    return status, json.loads(data)


@pytest.mark.parametrize(
    "path", ["/status", "/tools", "/prompts", "/resources", "/healthz", "/metrics"]
)
def test_each_page_is_found_at_its_path(path: str) -> None:
    read, _ = pages()
    assert read.find(path) is not None


@pytest.mark.parametrize("path", ["/", "/status/", "/STATUS", "/tools.json", "/mcp"])
def test_other_paths_are_no_page(path: str) -> None:
    read, _ = pages()
    assert read.find(path) is None


def test_tools_come_in_mcps_shape_by_default() -> None:
    read, _ = pages()
    assert body(read.tools({}, CALLER)) == (200, {"tools": [TOOL]})
    assert body(read.tools({"format": ["mcp"]}, CALLER)) == (200, {"tools": [TOOL]})


def test_tools_come_in_a_model_apis_format_when_asked() -> None:
    read, _ = pages()
    status, tools = body(read.tools({"format": ["anthropic"]}, CALLER))
    assert status == 200
    assert tools == [
        {"name": "notes__search", "description": "Search.", "input_schema": {"type": "object"}}
    ]


def test_an_unknown_format_is_refused_naming_the_formats_there_are() -> None:
    read, _ = pages()
    with pytest.raises(Reject) as info:
        read.tools({"format": ["yaml"]}, CALLER)
    assert info.value.status == 400
    assert json.loads(info.value.body) == {
        "error": "unknown format 'yaml'; use one of mcp, anthropic, openai, openai-responses"
    }


def test_healthz_says_starting_until_ready_naming_who_is_down() -> None:
    read, _ = pages([up("notes"), down("git")], ready=False)
    assert body(read.healthz({}, CALLER)) == (503, {"status": "starting", "servers": [DOWN]})


def test_healthz_says_unavailable_naming_who_is_down() -> None:
    read, _ = pages([up("notes"), down("git")])
    assert body(read.healthz({}, CALLER)) == (503, {"status": "unavailable", "servers": [DOWN]})


def test_healthz_is_ok_counting_the_servers() -> None:
    read, _ = pages([up("notes")])
    assert body(read.healthz({}, CALLER)) == (200, {"status": "ok", "servers": 1})


def test_healthz_of_a_profile_looks_only_at_its_servers() -> None:
    read, _ = pages([up("notes"), down("git")], scope=Scope("notes"))
    assert body(read.healthz({}, CALLER)) == (200, {"status": "ok", "servers": 1})


def test_status_and_metrics_are_of_the_scope_the_request_may_read() -> None:
    scope = Scope("notes")
    read, daemon = pages(scope=scope)
    assert body(read.status({}, CALLER)) == (200, {"servers": []})
    # The caller is not mcpd's own user: it reads as an agent does.
    assert daemon.asked == [(scope, False)]
    assert read.metrics({}, CALLER) == (200, METRICS_TYPE, b"mcpd_up 1 # True\n")
