"""A record's texts are cut where the record is made, before the writer masks mcpd's
secrets in them: a cut that falls inside a secret leaves none of it in the file, the
journal's entry or the latest records kept in memory (the page's list of calls), the
secret's beginning before the cut masked as the whole secret is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from mcpd.agents.calls.callrecords import outcome_of, reason_kept
from mcpd.audit.log import FILE_NAME, AuditLog
from mcpd.audit.record import NAME_KEPT, NAME_SHOWN, CallRecord, unknown
from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.tables.model import DaemonConfig
from mcpd.policy.agent import AgentInfo
from mcpd.policy.redaction.cutparts import CUT_PART
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets, marker
from protocol.jsonrpc import messages as rpc

SECRET = "held-secret-value-0123456789abcdef"
WHERE = "servers.vault.env.API_TOKEN"
AGENT = AgentInfo(uid=1000, pid=4242, exe="claude", profile="default")


def guarded(tmp_path: Path | None, **kw: Any) -> AuditLog:
    known = KnownSecrets()
    known.replace("config", [HeldSecret(WHERE, SECRET)])
    settings = DaemonConfig(**{"audit_journal": False, **kw})
    directory = None if tmp_path is None else str(tmp_path)
    return AuditLog(directory, settings, known, guard=SecretGuard(known))


def straddling(cut_at: int, length: int) -> str:
    """A text of ``length`` characters with the secret spanning character ``cut_at``."""
    before = "x" * (cut_at - len(SECRET) // 2)
    return before + SECRET + "y" * (length - len(before) - len(SECRET))


def straddled_records() -> list[CallRecord]:
    """A made-up name cut at ``NAME_SHOWN``, a server's error cut as a reason, and every
    text ``bound`` cuts past ``NAME_KEPT``, each cut inside the secret."""
    long = straddling(NAME_SHOWN, NAME_KEPT + 1)
    _, error = outcome_of(rpc.RPCError(-32000, straddling(200, 1000)))
    base: dict[str, Any] = {"ts": 1.0, "method": "tools/call", "outcome": "refused"}
    agent = msgspec.structs.replace(AGENT, exe=long, profile=long)
    return [
        CallRecord(agent=AGENT, name=unknown(straddling(NAME_SHOWN, 600)), **base),
        CallRecord(agent=AGENT, name="t", reason=error, **base),
        CallRecord(agent=AGENT, name="t", reason=reason_kept(straddling(200, 300)), **base),
        CallRecord(agent=agent, name=long, original=long, reason=long, decided_by=long, **base),
    ]


def shows_part(text: str) -> bool:
    return any(SECRET[:n] in text for n in range(CUT_PART, len(SECRET) + 1))


async def test_a_cut_inside_a_secret_leaves_none_of_it_in_the_file(tmp_path: Path) -> None:
    log = guarded(tmp_path)
    for record in straddled_records():
        log.record(record)
    await log.flush()
    lines = (tmp_path / FILE_NAME).read_text().splitlines()
    assert len(lines) == 4
    assert [line for line in lines if shows_part(line)] == []
    found = [json.loads(line) for line in lines]
    texts = [
        found[0]["name"],
        found[1]["reason"],
        found[2]["reason"],
        *(found[3][key] for key in ("name", "original", "reason", "decided_by")),
    ]
    assert all(text.count(marker(WHERE)) == 1 for text in texts), texts
    assert all("more characters)" in text for text in texts)


async def test_the_latest_records_kept_show_no_part_of_a_secret_written_or_not() -> None:
    """The page lists the latest records kept in memory: masked there too, as they are
    written; with no file or journal to write, they are never written at all."""
    log = guarded(None, audit=False)
    whole = CallRecord(ts=1.0, agent=AGENT, method="tools/call", outcome="refused", name=SECRET)
    for record in [*straddled_records(), whole]:
        log.record(record)
    await log.flush()
    shown = log.recent(lambda r: True, 10)
    assert len(shown) == 5
    texts = [msgspec.json.encode(r).decode() for r in shown]
    assert [text for text in texts if shows_part(text)] == []
    assert all(marker(WHERE) in text for text in texts)
