"""Who may call what and the record of every call, as the daemon holds them together
(``mcpd.oversight``): the secrets guarded before, during and after a reload, the rules
in force as a reload accepts its config and the credential formats of the servers that
run until it settles, the counts of servers gone, a rule an agent can step out of warned
of, what a reader of some servers is shown of the approvals and the audit, and the log
mask in place only while it runs."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from msgspec import Raw

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.oversight import Oversight
from mcpd.policy.agent import AgentInfo
from mcpd.policy.deciders.kin import AgentKin
from mcpd.policy.decision.rules import CallFacts
from mcpd.policy.redaction.masking import marker
from mcpd.policy.waiting.approvals import ApprovalRequest
from mcpd.status_document import AuditStatus

OLD = "tok-old-0123456789abcdef"
NEW = "tok-new-fedcba9876543210"
AWS = "AKIAIOSFODNN7EXAMPLE"
AGENT = AgentInfo(uid=1000, pid=4242, connection="c1")


def config(token: str, *, extra: dict[str, Any] | None = None, **top: Any) -> Config:
    servers: dict[str, Any] = {
        "gh": {"command": "x", "env": {"GITHUB_TOKEN": token}},
        "notes": {"command": "x"},
        **(extra or {}),
    }
    daemon = {"audit": False, "audit_journal": False, **top.pop("daemon", {})}
    return parse_config({"daemon": daemon, "servers": servers, **top}, env={})


def said(o: Oversight, alias: str, text: str) -> Any:
    """What the agents get of ``text`` in a result ``alias`` sent."""
    raw = Raw(msgspec.json.encode({"text": text}))
    return msgspec.json.decode(o.guard.raw(alias, raw, "a result"))["text"]


def facts(server: str) -> CallFacts:
    return CallFacts(name=f"{server}_t", server=server, original="t", profile="default")


async def test_the_configs_secrets_are_masked_in_what_servers_send(tmp_path: Path) -> None:
    o = Oversight(config(OLD), str(tmp_path))
    assert said(o, "notes", f"leaked {OLD}") == f"leaked {marker('servers.gh.env.GITHUB_TOKEN')}"
    assert o.guard.masked("notes") == {"servers.gh.env.GITHUB_TOKEN": 1}
    # ... and in what a person is shown of a call's arguments.
    shown = await o.call_gate.shown(msgspec.json.encode({"t": OLD}))
    assert OLD not in shown.glance.text and OLD not in shown.whole()


def test_a_reloads_secrets_are_guarded_from_when_it_is_expected(tmp_path: Path) -> None:
    o = Oversight(config(OLD), str(tmp_path))
    new = config(NEW)
    assert said(o, "gh", NEW) == NEW  # nobody told it yet
    # The new config's servers may start and speak before it is in force: both the
    # old token (its servers still run) and the new one are masked meanwhile.
    o.expect(new)
    assert said(o, "gh", NEW) != NEW and said(o, "gh", OLD) != OLD
    # Its rules are in force before the old servers stop: they still hold the old one.
    o.configure(new)
    assert said(o, "gh", NEW) != NEW and said(o, "gh", OLD) != OLD
    o.settle(new)
    assert said(o, "gh", NEW) != NEW
    assert said(o, "gh", OLD) == OLD  # no longer held, no longer masked


def test_secrets_watched_are_masked_as_they_change(tmp_path: Path) -> None:
    o = Oversight(config(OLD), str(tmp_path))
    tokens: list[HeldSecret] = []
    o.watch_secrets("daemon", lambda: tokens)
    tokens.append(HeldSecret("servers.gh (OAuth)", NEW))
    o.guard.refresh()
    assert said(o, "notes", NEW) == marker("servers.gh (OAuth)")
    # A reload keeps watching them.
    o.configure(config(OLD))
    assert said(o, "notes", NEW) == marker("servers.gh (OAuth)")


def test_credential_formats_are_masked_for_the_servers_a_reload_names(tmp_path: Path) -> None:
    o = Oversight(config(OLD), str(tmp_path))
    assert said(o, "notes", AWS) == AWS
    redacting = config(OLD, daemon={"redact_patterns": True})
    o.configure(redacting)
    assert said(o, "notes", AWS) == "[secret: AWS access key id]"
    o.settle(redacting)
    quiet = config(OLD, extra={"notes": {"command": "x", "redact_patterns": False}})
    o.configure(quiet)
    # The server started under the config that said to still runs until the reload
    # settles.
    assert said(o, "notes", AWS) == "[secret: AWS access key id]"
    o.settle(quiet)
    assert said(o, "notes", AWS) == AWS


def test_a_reload_drops_the_counts_of_servers_no_longer_configured(tmp_path: Path) -> None:
    extra = {"gone": {"command": "x"}}
    o = Oversight(config(OLD, extra=extra), str(tmp_path))
    said(o, "gone", OLD)
    said(o, "notes", OLD)
    o.configure(config(OLD))
    o.settle(config(OLD))
    assert o.guard.masked("gone") == {}
    assert o.guard.masked("notes") == {"servers.gh.env.GITHUB_TOKEN": 1}


def test_a_reload_puts_its_rules_in_force(tmp_path: Path) -> None:
    o = Oversight(config(OLD), str(tmp_path))
    assert o.call_gate.empty
    assert o.call_gate.decide(facts("gh"), AGENT).action == "allow"
    o.configure(config(OLD, policy=[{"action": "deny", "servers": ["gh"]}]))
    assert o.call_gate.decide(facts("gh"), AGENT).action == "deny"
    assert o.call_gate.decide(facts("notes"), AGENT).action == "allow"
    o.configure(config(OLD))
    assert o.call_gate.empty


def request(server: str) -> ApprovalRequest:
    return ApprovalRequest(
        agent=AGENT, kin=AgentKin(), tool="t", server=server, original="t", arguments="{}"
    )


def test_rules_an_agent_can_step_out_of_are_warned_of_at_start_and_reload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    scoped = {
        "profiles": {"ci": {"servers": ["gh"]}},
        "policy": [{"action": "deny", "servers": ["gh"], "profiles": ["default"]}],
    }
    with caplog.at_level(logging.WARNING, logger="mcpd"):
        o = Oversight(config(OLD, **scoped), str(tmp_path))
        o.configure(config(OLD))
        o.configure(config(OLD, **scoped))
    warned = [r.getMessage() for r in caplog.records if "steps out of it" in r.getMessage()]
    assert len(warned) == 2
    assert warned[0].startswith("policy[0] (deny) holds only for agents in default")
    assert "picking the profile ci" in warned[0]


async def test_a_reader_of_some_servers_sees_their_approvals(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    o = Oversight(config(OLD, daemon={"audit": True}), str(tmp_path))
    async with trio.open_nursery() as nursery:
        for server in ("gh", "notes"):
            nursery.start_soon(o.approvals.ask, request(server), 60)
        while len(o.approvals.list()) < 2:
            await o.approvals.wait_change(o.approvals.version)
        whole, audit = o.approvals_waiting(), o.audit_status()
        mine = o.approvals_waiting(lambda alias: alias == "notes")
        metrics, my_metrics = o.metrics(), o.metrics(lambda alias: alias == "notes")
        nursery.cancel_scope.cancel()
    assert sorted(a.server for a in whole) == ["gh", "notes"]
    assert audit.file == str(tmp_path / "calls.jsonl")
    assert (audit.written, audit.dropped) == (0, 0)
    assert [a.server for a in mine] == ["notes"]
    assert "mcpd_approvals_pending 2" in metrics.splitlines()
    assert "mcpd_approvals_pending 1" in my_metrics.splitlines()
    assert "mcpd_audit_dropped_total" in metrics and "mcpd_audit_" not in my_metrics
    assert metrics.endswith("\n")


def test_without_a_file_the_status_names_none(tmp_path: Path) -> None:
    o = Oversight(config(OLD), str(tmp_path))
    assert o.audit_status() == AuditStatus(
        file=None, journal=False, written=0, dropped=0, write_errors=0
    )


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_log_records_are_masked_while_it_runs_and_the_mask_goes_with_it(
    tmp_path: Path,
) -> None:
    o = Oversight(config(OLD), str(tmp_path))
    root, handler = logging.getLogger(), Lines()
    root.addHandler(handler)
    log = logging.getLogger("mcpd.test.oversight")
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(o.run)
                log.warning("stderr: %s", OLD)
                nursery.cancel_scope.cancel()
        log.warning("after: %s", OLD)
    finally:
        root.removeHandler(handler)
    assert handler.lines == [f"stderr: {marker('servers.gh.env.GITHUB_TOKEN')}", f"after: {OLD}"]
