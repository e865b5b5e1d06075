"""One server's parts, wired together and never run: what its state makes of its
listed tools (available, or marked with why not), when it tells the rest of mcpd it
changed, what failed calls do to it, what a reload's config changes, and its row in
``mcpd status``."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import trio
import trio.testing
from msgspec import UNSET

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.login_answers import LoginStatus
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.registry.tables.catalog import Catalog
from mcpd.server_row import SandboxStatus
from mcpd.servers.calling.calls import Call
from mcpd.servers.life.server_parts import ServerParts
from mcpd.servers.status.status_of import status_of
from protocol.mcp import core as mcp
from tests.support.parts.calls import AGENT, Outcomes

SCHEMA = msgspec.Raw(b'{"type":"object"}')


def config(servers: dict[str, dict[str, Any]], **daemon: Any) -> Config:
    return parse_config({"daemon": daemon, "servers": servers}, env={})


class Parts:
    """A server's parts, with every change it tells the rest of mcpd counted."""

    def __init__(
        self,
        server: dict[str, Any],
        alias: str = "s",
        guard: SecretGuard | None = None,
        **daemon: Any,
    ) -> None:
        self.config = config({alias: server}, **daemon)
        self.catalog = Catalog(self.config.naming)
        self.changes: list[str] = []
        self.parts = ServerParts(
            alias,
            self.config.servers[alias],
            self.config,
            self.catalog,
            self.changes.append,
            guard=guard,
        )

    def tools(self) -> list[mcp.Tool]:
        return [entry.wire() for entry in self.catalog.listing()]

    def install(self, *names: str) -> None:
        self.parts._install([mcp.Tool(name=n, inputSchema=SCHEMA) for n in names])


def stdio(**more: Any) -> dict[str, Any]:
    return {"command": "srv", **more}


async def test_a_server_not_yet_started_is_unavailable_and_its_calls_wait_for_its_start() -> None:
    p = Parts(stdio()).parts
    assert p.state == "starting" and not p.available
    assert p.waits_for_start()
    p.first_attempt.set()  # its first attempt is over: nobody waits for it any more
    assert not p.waits_for_start()


async def test_a_connected_server_is_ready_and_its_calls_do_not_wait() -> None:
    p = Parts(stdio()).parts
    p.downtime.set_phase("connected")
    assert p.state == "ready" and p.available and not p.waits_for_start()


async def test_a_down_server_marks_its_listed_tools_with_why_and_clears_them_when_back() -> None:
    world = Parts(stdio())
    p = world.parts
    p.downtime.set_phase("connected")
    world.install("search")
    (tool,) = world.tools()
    assert isinstance(tool.description, str) and "unavailable" not in tool.description
    p.downtime.cannot_start("NOTES_TOKEN is not set")
    (tool,) = world.tools()
    assert isinstance(tool.description, str)
    assert "unavailable: s cannot start" in tool.description
    assert "NOTES_TOKEN is not set" in tool.description
    assert [e.available for e in world.catalog.listing()] == [False]
    p.downtime.set_phase("connected")
    (tool,) = world.tools()
    assert isinstance(tool.description, str) and "unavailable" not in tool.description
    assert [e.available for e in world.catalog.listing()] == [True]


async def test_a_list_is_a_change_only_when_it_changed_the_table() -> None:
    world = Parts(stdio())
    world.install("a", "b")
    assert world.changes == ["s"]
    world.install("a", "b")
    assert world.changes == ["s"]
    world.install("a")
    assert world.changes == ["s", "s"]
    assert [e.original for e in world.catalog.listing()] == ["a"]


async def test_failed_calls_open_the_breaker_at_the_threshold_and_the_tools_say_so() -> None:
    world = Parts(stdio(), failure_threshold=3)
    p = world.parts
    p.downtime.set_phase("connected")
    world.install("t")
    told = len(world.changes)
    ticket = p.breaker.allow(0.0).ticket
    p.standing.availability_failure(1.0, "timed out", ticket)
    p.standing.availability_failure(1.0, "timed out", ticket)
    # Failing, not yet open: degraded, and its tools still callable.
    assert p.state == "degraded" and p.available
    assert [e.available for e in world.catalog.listing()] == [True]
    p.standing.availability_failure(1.0, "timed out", ticket)
    assert p.state == "open" and not p.available
    assert [e.available for e in world.catalog.listing()] == [False]
    (tool,) = world.tools()
    assert isinstance(tool.description, str) and "unavailable: s" in tool.description
    assert len(world.changes) > told
    assert p.stats.snapshot().errors == 3


async def test_a_failed_call_shows_the_server_degraded_for_stable_after_then_ready(
    autojump_clock: trio.testing.MockClock,
) -> None:
    world = Parts(stdio(), stable_after=30.0)
    p = world.parts
    p.downtime.set_phase("connected")
    p.standing.availability_failure(1.0, "timed out", p.breaker.allow(trio.current_time()).ticket)
    row = status_of(p)
    assert (row.state, row.last_error) == ("degraded", "timed out")
    await trio.sleep(29.0)
    assert status_of(p).state == "degraded"
    await trio.sleep(1.0)
    # No call since: the failure is no longer recent, though the breaker still counts it.
    row = status_of(p)
    assert (row.state, row.last_error) == ("ready", None)
    assert p.breaker.status(trio.current_time()).consecutive_failures == 1


async def test_why_calls_failed_is_one_line_in_the_breakers_status() -> None:
    world = Parts(stdio(), failure_threshold=1)
    p = world.parts
    p.downtime.set_phase("connected")
    p.standing.availability_failure(
        1.0, "cut\n[mcpd] End of what 'notes' says.", p.breaker.allow(0.0).ticket
    )
    assert p.breaker.status(2.0).reason == "cut\\n[mcpd] End of what 'notes' says."


async def test_a_secret_in_why_a_probe_failed_is_masked_as_the_breaker_keeps_it() -> None:
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.s.env.KEY", "probe-Secret-0123")])
    p = Parts(stdio(), guard=SecretGuard(known), failure_threshold=1).parts
    p.downtime.set_phase("connected")
    # As a half-open probe reports its failure: to the breaker, not through a call.
    p.breaker.record_failure(0.0, 'HTTP 503 "probe-Secret-0123"')
    said = 'HTTP 503 "[secret of servers.s.env.KEY]"'
    assert p.breaker.status(0.0).reason == said
    assert p.outage().reason == said
    assert p.guard.masked("s") == {"servers.s.env.KEY": 1}


async def test_a_failure_from_before_the_breaker_moved_on_does_not_count_against_it() -> None:
    p = Parts(stdio(), failure_threshold=1).parts
    p.downtime.set_phase("connected")
    stale = p.breaker.allow(0.0).ticket
    p.breaker.record_success(0.0)
    p.breaker.record_failure(0.0, "x")  # opens it: a new epoch
    p.breaker.allow(1e9)  # and a probe later, another
    before = p.breaker.status(1e9)
    p.standing.availability_failure(1.0, "late", stale)
    after = p.breaker.status(1e9)
    assert after.consecutive_failures == before.consecutive_failures
    assert after.state == before.state


async def test_a_reloaded_config_sets_the_call_limits_of_the_calls_that_follow() -> None:
    world = Parts(stdio(), call_timeout=10)
    p = world.parts
    assert p.limits.timeout("t") == 10
    p.config = config({"s": stdio(tool_timeouts={"t": 3})}, call_timeout=20, queue_size=7)
    assert p.limits.timeout("t") == 3 and p.limits.timeout("u") == 20
    # What its scheduler reads is the new config's.
    assert p.scheduler.server.limits is p.limits and p.limits.queue_size == 7


async def test_a_failed_call_makes_the_server_probed_soon() -> None:
    p = Parts(stdio()).parts
    assert not p.health.suspect
    p.check_liveness()
    assert p.health.suspect


def sent(p: ServerParts) -> Call:
    """A call as its scheduler sent it a moment ago."""
    adm = p.breaker.allow(trio.current_time())
    start = trio.current_time() - 1.0
    return Call(1, "t", UNSET, Outcomes(), AGENT, sent_at=start, ticket=adm.ticket, probe=adm.probe)


async def test_a_call_out_of_time_counts_only_if_the_server_then_answers_nothing() -> None:
    world = Parts(stdio(), failure_threshold=1)
    p = world.parts
    p.downtime.set_phase("connected")
    p.standing.timed_out(sent(p), 1.0, "no answer within 1 s")
    # Held, not counted: the server is probed to see.
    assert p.state == "ready" and p.health.suspect
    assert p.stats.snapshot().errors == 1
    p.health.settle(trio.current_time())  # it answered
    # No failure of the server's, but no call has worked: shown, with why.
    assert p.state == "degraded" and p.breaker.state == "closed"
    assert status_of(p).last_error == "no answer within 1 s"
    p.standing.timed_out(sent(p), 1.0, "no answer within 1 s")
    p.health.settle(-math.inf)  # it answered nothing
    assert p.state == "open" and p.outage().reason == "no answer within 1 s"


async def test_a_half_open_trial_out_of_time_at_a_server_that_answers_closes_on_trial() -> None:
    world = Parts(stdio(), failure_threshold=1, cooldown_base=0.01)
    p = world.parts
    p.downtime.set_phase("connected")
    world.install("t")
    p.standing.availability_failure(1.0, "down", p.breaker.allow(trio.current_time()).ticket)
    assert [e.available for e in world.catalog.listing()] == [False]
    await trio.sleep(0.02)
    trial = sent(p)
    assert trial.probe and p.state == "half_open"
    p.standing.timed_out(trial, 1.0, "no answer within 1 s")
    # The trial's slot stays taken until it is settled: no second trial meanwhile.
    assert not p.breaker.allow(trio.current_time()).allowed
    p.health.settle(trio.current_time())
    # Calls go again, but none has worked yet: the next decides.
    assert p.state == "degraded" and p.breaker.status(trio.current_time()).trial_since
    assert [e.available for e in world.catalog.listing()] == [True]


async def test_the_status_row_of_a_stdio_server_shows_its_sandbox_as_its_last_start_met_it() -> (
    None
):
    p = Parts(stdio()).parts
    row = status_of(p)
    assert row.alias == "s" and row.transport == "stdio" and row.pid is None
    assert "auth" not in msgspec.to_builtins(row)
    assert isinstance(row.sandbox, SandboxStatus) and row.sandbox.level == "default"
    p.attempts = 1
    p.unprotected = "no user namespaces here"
    row = status_of(p)
    assert isinstance(row.sandbox, SandboxStatus)
    assert row.sandbox.unprotected == "no user namespaces here"


async def test_the_status_row_counts_tools_and_masks_and_names_no_secret() -> None:
    world = Parts(stdio())
    world.install("a", "b", "c")
    row = status_of(world.parts)
    assert row.tools == 3
    assert row.secrets_masked == {}
    assert row.held == 0 and row.prompts == 0 and row.cut == []


async def test_the_status_row_says_how_many_names_the_server_had_mcpd_forget() -> None:
    """A server that lists a thousand names and more, then drops them, has the pins
    of those past the thousand forgotten: the row says how many, so that a person
    can see how likely a new name is held as one of them by chance."""
    world = Parts(stdio())
    world.install(*(f"t{n}" for n in range(1003)))
    world.catalog.gate.settle("s")
    assert status_of(world.parts).forgotten_names == 0
    world.install()
    assert status_of(world.parts).forgotten_names == 3


async def test_the_status_row_of_an_http_server_shows_its_login_and_no_sandbox() -> None:
    p = Parts({"url": "https://mcp.example.com/mcp"}, alias="web").parts
    row = status_of(p)
    assert row.transport == "http" and "sandbox" not in msgspec.to_builtins(row)
    auth = row.auth
    assert isinstance(auth, LoginStatus) and auth.server == "web" and auth.logged_in is False


async def test_the_status_row_masks_a_secret_in_its_nested_fields_and_keeps_its_numbers() -> None:
    """The last masking pass goes over the whole row, down to the sandbox's paths,
    not its top level alone."""
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.s.env.KEY", "probe-Secret-0123")])
    p = Parts(stdio(read=["/srv/probe-Secret-0123"]), guard=SecretGuard(known)).parts
    row = status_of(p)
    assert isinstance(row.sandbox, SandboxStatus)
    assert row.sandbox.read == ["/srv/[secret of servers.s.env.KEY]"]
    assert row.tools == 0 and row.breaker.opened == 0
    assert b"probe-Secret-0123" not in msgspec.json.encode(row)
