"""Calls waiting for approval and the latest calls as the page reads them, from the
daemon's approvals and audit log: approvals are the owner's only, as ``mcpd approvals``
is, the first of them shown and the rest counted, and each decision says what became
of it or why not (one whose arguments' keys did not all fit is approved where they are
shown whole); the latest calls are filtered
by server and outcome (in the page's words), newest first, and a profile's reader sees
its own profile's calls of its own servers only."""

from __future__ import annotations

import json
from typing import cast

import msgspec
import pytest
import trio
import trio.testing

from mcpd.agents.daemon_seam import DaemonForAgents
from mcpd.agents.page.opener import Opener
from mcpd.agents.page.policysource import OWNER_ONLY, policy_sources
from mcpd.agents.page.sources import (
    APPROVALS_SHOWN,
    CallFilter,
    PendingApproval,
    Sources,
    Waiting,
)
from mcpd.audit.log import AuditLog
from mcpd.audit.record import CallRecord as Record
from mcpd.config.tables.model import DaemonConfig
from mcpd.policy.agent import AgentInfo
from mcpd.policy.deciders.kin import AgentKin
from mcpd.policy.shown.showing import shown_arguments
from mcpd.policy.waiting.approvals import ApprovalRequest, Approvals
from mcpd.registry.profiles.views import ProfileView
from protocol.jsonrpc import messages as rpc

T = 1_800_000_000.0
AGENT = AgentInfo(pid=4242, exe="claude", profile="default")
WORK_AGENT = AgentInfo(pid=5151, exe="cursor", profile="work")


class View:
    """A reader of one profile: its name and the servers it has."""

    def __init__(self, name: str, servers: set[str]) -> None:
        self.name = name
        self._servers = servers

    def has_server(self, alias: str) -> bool:
        return alias in self._servers


WORK = cast(ProfileView, View("work", {"files"}))


class Daemon:
    def __init__(self) -> None:
        self.approvals = Approvals(wall=lambda: T)
        self.audit = AuditLog(None, DaemonConfig(audit_journal=False))


async def no_agents() -> list[AgentKin]:
    return []


def sources(daemon: Daemon) -> Sources:
    return policy_sources(cast(DaemonForAgents, daemon), no_agents)


def call(n: int, server: str | None, outcome: str, agent: AgentInfo = AGENT) -> Record:
    return Record(
        ts=T + n,
        agent=agent,
        method="tools/call",
        name=None if server is None else f"{server}__t{n}",
        server=server,
        outcome=outcome,  # type: ignore[arg-type]
        duration_ms=float(n),
    )


def asked(tool: str = "mail__send") -> ApprovalRequest:
    return ApprovalRequest(
        agent=AGENT,
        kin=AgentKin(),
        tool=tool,
        server="mail",
        original="send",
        arguments='{"to": "x"}',
    )


def first_waiting(src: Sources) -> list[PendingApproval]:
    """The approvals the owner's page shows."""
    assert src.approvals is not None
    waiting = src.approvals(None)
    assert waiting is not None
    return waiting.first


async def test_a_waiting_call_is_shown_to_the_owner_and_decided() -> None:
    daemon = Daemon()
    src = sources(daemon)
    assert src.approvals is not None and src.decide is not None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(daemon.approvals.ask, asked(), 60.0)
        await trio.testing.wait_all_tasks_blocked()
        (waiting,) = first_waiting(src)
        assert (waiting.server, waiting.tool, waiting.arguments) == (
            "mail",
            "mail__send",
            '{"to": "x"}',
        )
        assert waiting.agent.startswith("pid 4242 (claude)")
        assert waiting.since == T
        said = await src.decide(waiting.id, "deny", None, Opener())
        assert said.startswith("denied mail/send for pid 4242 (claude)")
    assert src.approvals(None) == Waiting([])


async def test_a_call_whose_keys_the_page_cannot_show_is_approved_elsewhere() -> None:
    daemon = Daemon()
    src = sources(daemon)
    assert src.decide is not None
    shown = shown_arguments(json.dumps({f"key_{n}": n for n in range(1000)}).encode())
    many = msgspec.structs.replace(
        asked(),
        arguments=shown.glance.text,
        shortened=True,
        keys_left_out=shown.glance.keys_left_out,
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(daemon.approvals.ask, many, 60.0)
        await trio.testing.wait_all_tasks_blocked()
        (waiting,) = first_waiting(src)
        assert waiting.keys_left_out == many.keys_left_out > 0
        with pytest.raises(rpc.RPCError) as refused:
            await src.decide(waiting.id, "approve", None, Opener())
        assert f"mcpd approvals show {waiting.id}" in refused.value.message
        assert len(daemon.approvals.list()) == 1
        said = await src.decide(waiting.id, "deny", None, Opener())
        assert said.startswith("denied mail/send")


async def test_of_many_waiting_calls_the_first_are_shown_and_the_rest_counted() -> None:
    daemon = Daemon()
    src = sources(daemon)
    assert src.approvals is not None
    async with trio.open_nursery() as nursery:
        for n in range(APPROVALS_SHOWN + 5):
            nursery.start_soon(daemon.approvals.ask, asked(f"mail__t{n}"), 60.0)
            await trio.testing.wait_all_tasks_blocked()
        waiting = src.approvals(None)
        assert waiting is not None
        assert [a.tool for a in waiting.first] == [f"mail__t{n}" for n in range(APPROVALS_SHOWN)]
        assert waiting.more == 5
        nursery.cancel_scope.cancel()


async def test_a_reader_of_one_profile_sees_and_decides_no_approval() -> None:
    daemon = Daemon()
    src = sources(daemon)
    assert src.approvals is not None and src.decide is not None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(daemon.approvals.ask, asked(), 60.0)
        await trio.testing.wait_all_tasks_blocked()
        assert src.approvals(WORK) is None
        (waiting,) = first_waiting(src)
        with pytest.raises(rpc.RPCError) as info:
            await src.decide(waiting.id, "approve", WORK, Opener())
        assert info.value.message == OWNER_ONLY
        assert len(first_waiting(src)) == 1  # still waiting
        nursery.cancel_scope.cancel()


async def test_a_decision_on_nothing_waiting_says_so() -> None:
    src = sources(Daemon())
    assert src.decide is not None
    with pytest.raises(rpc.RPCError) as info:
        await src.decide("<nope>", "approve", None, Opener())
    assert "no call waits for approval under '<nope>'" in info.value.message


def test_the_latest_calls_newest_first_in_the_pages_words() -> None:
    daemon = Daemon()
    for n, (server, outcome) in enumerate(
        [("files", "ok"), ("mail", "tool_error"), (None, "refused")]
    ):
        daemon.audit.record(call(n, server, outcome))
    src = sources(daemon)
    assert src.calls is not None
    rows = src.calls(None, CallFilter()) or []
    assert [(r.server, r.tool, r.outcome) for r in rows] == [
        ("-", "-", "refused"),  # a call of no server (a name that was not found)
        ("mail", "mail__t1", "tool error"),
        ("files", "files__t0", "ok"),
    ]
    assert rows[2].duration_ms == 0.0 and rows[1].at == T + 1
    assert rows[0].agent.startswith("pid 4242 (claude)")


def test_the_latest_calls_are_filtered_by_server_and_outcome() -> None:
    daemon = Daemon()
    for n, (server, outcome) in enumerate(
        [("files", "ok"), ("mail", "tool_error"), ("files", "tool_error"), ("mail", "ok")]
    ):
        daemon.audit.record(call(n, server, outcome))
    src = sources(daemon)
    assert src.calls is not None

    def shown(f: CallFilter) -> list[str]:
        return [r.tool for r in src.calls(None, f) or []]  # type: ignore[misc]

    assert shown(CallFilter(server="files")) == ["files__t2", "files__t0"]
    assert shown(CallFilter(outcome="tool error")) == ["files__t2", "mail__t1"]
    assert shown(CallFilter(outcome="tool_error")) == []  # the log's word is not the page's
    assert shown(CallFilter("mail", "ok")) == ["mail__t3"]
    assert shown(CallFilter(limit=1)) == ["mail__t3"]


def test_a_profiles_reader_sees_its_own_agents_calls_of_its_own_servers() -> None:
    daemon = Daemon()
    daemon.audit.record(call(0, "files", "ok", WORK_AGENT))
    daemon.audit.record(call(1, "mail", "ok", WORK_AGENT))  # not a server of its profile
    daemon.audit.record(call(2, "files", "ok", AGENT))  # another profile's agent
    daemon.audit.record(call(3, None, "refused", WORK_AGENT))  # a name nothing had
    src = sources(daemon)
    assert src.calls is not None
    rows = src.calls(WORK, CallFilter()) or []
    assert [(r.server, r.tool) for r in rows] == [("-", "-"), ("files", "files__t0")]
    assert len(src.calls(None, CallFilter()) or []) == 4
