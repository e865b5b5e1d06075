"""A profile's own socket is a boundary for the daemon's own user too, in a running
daemon: an agent given only that socket reaches nothing outside its profile through
mcpd's own methods (those that act on or show the whole daemon are refused there,
saying where to ask instead; the rest answer for the profile)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.agents.own_methods.approval_methods import HANDLERS as APPROVALS
from mcpd.agents.own_methods.auth_methods import HANDLERS as AUTH
from mcpd.agents.own_methods.daemon_methods import HANDLERS as DAEMON
from mcpd.agents.own_methods.pins_methods import HANDLERS as PINS
from mcpd.agents.own_methods.profile_bound import ON_A_PROFILE
from mcpd.agents.own_methods.profile_methods import PROFILE_METHODS
from tests.support.clients.agent import connect
from tests.support.clients.daemon_http import CURL, modern, modern_headers, post
from tests.support.daemons.policy import LIMIT, policy_daemon

OWN_METHODS = sorted({*DAEMON, *AUTH, *PINS, *APPROVALS, *PROFILE_METHODS})
# The profile shows one tool of the server; the call that waits for the operator is
# to another, which the profile hides.
NARROW = {"servers": ["gh"], "tools": {"allow": ["read_repo"]}}
SECRET = "PRIVATE-ARGUMENT-4242"
WHOLE_DAEMON = "acts on the whole daemon, and this connection is held to the profile 'narrow'"
# What each method is asked with, where it needs something.
PARAMS: dict[str, dict[str, Any]] = {
    "mcpd/reset": {"server": "gh"},
    "mcpd/useProfile": {"profile": "narrow"},
    "mcpd/approvals/show": {"id": "?"},
    "mcpd/approvals/decide": {"id": "?", "approve": True},
    "mcpd/approvals/watch": {"wait": 0},
    "mcpd/auth/login": {"server": "gh"},
    "mcpd/auth/logout": {"server": "gh"},
    "mcpd/auth/complete": {"server": "gh", "login": "x", "redirect": "http://x/"},
    "mcpd/auth/dashboard_spent": {"code": "x"},
    "mcpd/pins/approve": {"server": "gh"},
    "mcpd/pins/import": {"pins": {}},
}


def test_every_own_method_is_either_kept_to_the_profile_or_refused_on_its_socket() -> None:
    # Those answered for the profile are all mcpd's own methods; a new one is refused
    # on a profile's socket until it is named among them.
    assert ON_A_PROFILE.issubset(OWN_METHODS)


async def test_an_agent_on_a_profile_socket_reaches_nothing_outside_it(tmp_path: Path) -> None:
    narrow_sock = tmp_path / "narrow.sock"
    narrow = {**NARROW, "socket": str(narrow_sock)}
    with trio.fail_after(LIMIT):
        async with (
            policy_daemon(tmp_path, narrow=narrow) as setup,
            connect(setup.daemon.socket_path) as asking,
            trio.open_nursery() as nursery,
        ):
            # An agent of the default profile makes a call that waits for the operator.
            nursery.start_soon(asking.call, "mcp__gh__create_issue", {"text": SECRET})
            [waiting] = await setup.pending()
            replies: dict[str, dict[str, Any]] = {}
            async with connect(str(narrow_sock)) as agent:
                for method in OWN_METHODS:
                    params = dict(PARAMS.get(method, {}))
                    if method == "mcpd/approvals/show":
                        params["id"] = waiting.id
                    replies[method] = await agent.rpc(method, params)
            refused = sorted(m for m, r in replies.items() if WHOLE_DAEMON in json.dumps(r))
            assert refused == sorted(set(OWN_METHODS) - ON_A_PROFILE), replies
            for method in refused:
                message = replies[method]["error"]["message"]
                assert message.startswith(f"{method} acts on the whole daemon"), message
                assert "ask on mcpd's own socket" in message
            for method, reply in replies.items():
                shown = json.dumps(reply)
                assert SECRET not in shown, f"{method} shows the waiting call: {shown}"
                assert "create_issue" not in shown, f"{method} shows a hidden tool: {shown}"
            assert [s["alias"] for s in replies["mcpd/status"]["result"]["servers"]] == ["gh"]
            assert replies["mcpd/useProfile"]["result"]["profile"] == "narrow"
            assert "result" in replies["mcpd/lineLimit"]
            # On the daemon's own socket, its user sees and decides the call as ever.
            async with connect(setup.daemon.socket_path) as operator:
                listed = await operator.result("mcpd/approvals/list")
                assert [a["id"] for a in listed["approvals"]] == [waiting.id]
            setup.daemon.approvals.decide(waiting.id, False, "uid 0 (root)")


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
async def test_mcp_over_http_on_a_profile_socket_is_held_to_it_too(tmp_path: Path) -> None:
    narrow_sock = tmp_path / "narrow.sock"
    narrow = {**NARROW, "socket": str(narrow_sock)}
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, narrow=narrow):
            for method in ("mcpd/approvals/list", "mcpd/pins/export", "mcpd/auth/dashboard"):
                reply = await post(str(narrow_sock), modern(1, method), *modern_headers(method))
                error = reply.json()["error"]["message"]
                assert error.startswith(f"{method} {WHOLE_DAEMON}"), error
