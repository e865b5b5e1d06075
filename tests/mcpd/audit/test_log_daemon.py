"""The audit log of a running daemon: 1,000 calls from 8 agents (processes of their own,
two profiles, both eras, mixed outcomes) give exactly 1,000 records, each with the
right agent, outcome and decision; ``mcpd calls`` narrows them; the file rotates at
its cap and keeps every record; a restarted daemon adds to the records before it;
``/metrics`` counts them; prompts/get, resources/read and completion/complete leave
records too (an error where the agent got one; a reply holding a number no decoder
reads, as the server's malformed reply);
the daemon's stop writes the records of calls it cut short; and an agent flooding
unknown names while the writer is behind takes no record of another's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.audit.log import FILE_NAME
from mcpd.audit.reader import AuditRecords
from mcpd.audit.record import STOPPED
from mcpd.config.loading.load import load
from mcpd.daemon import Daemon
from tests.support.clients.agent import META, connect, running
from tests.support.clients.daemon_http import curl
from tests.support.system.procs import scripted

LIMIT = 120
NAP = {"name": "mcp__slow__nap", "arguments": {}, "_meta": META}
ROOT = Path(__file__).resolve().parents[3]
BURST = str(ROOT / "tests" / "support" / "clients" / "call_burst.py")
AGENTS = 8
CALLS = 125  # each
TOOLS = "read,fail,rpc_error,delete_it"
# What each kind of call comes to, and the policy's decision: (tool, outcome, decision)
KINDS = [
    ("read", "ok", "allow"),
    ("fail", "tool_error", "allow"),
    ("rpc_error", "error", "allow"),
    ("delete_it", "refused", "deny"),
    ("nope", "refused", "none"),  # no such tool: refused before any rule
    ("poke", "outage", "allow"),  # the killed server's
]


def server(*flags: str) -> str:
    command, args = scripted(*flags)
    return f"command = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"


def write_config(tmp_path: Path, max_bytes: int = 64 * 1024, files: int = 20) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        "[daemon]\n"
        f"socket = {json.dumps(str(tmp_path / 'mcpd.sock'))}\n"
        f"state_dir = {json.dumps(str(tmp_path / 'state'))}\n"
        "audit_journal = false\n"
        f"audit_max_bytes = {max_bytes}\naudit_files = {files}\n"
        "backoff_base = 600.0\nbackoff_cap = 600.0\nstartup_deadline = 20.0\n"
        f"[servers.gh]\n{server('--names', TOOLS)}"
        f"[servers.notes]\n{server('--names', TOOLS, '--prompts', '1', '--templates', '1')}"
        f"[servers.victim]\n{server('--names', 'poke')}"
        '[profiles.ci]\nservers = ["notes", "victim"]\n'
        '[[policy]]\ntools = ["*/delete_*"]\naction = "deny"\nreason = "no deleting"\n'
    )
    return path


def plan(alias: str) -> list[tuple[str, dict[str, Any]]]:
    """One agent's calls: every kind in turn."""
    calls = []
    for i in range(CALLS):
        tool = KINDS[i % len(KINDS)][0]
        owner = "victim" if tool == "poke" else alias
        calls.append((f"mcp__{owner}__{tool}", {"text": f"{alias}-{i}"}))
    return calls


async def kill_victim(daemon: Daemon) -> None:
    """The victim server down (its tools still listed, calls to it an outage), and
    kept down past the test's limit by its backoff, however slow the machine."""
    changed = trio.Event()
    daemon.all_servers.subscribe(changed.set)
    [row] = [s for s in daemon.supervisor.status() if s.alias == "victim"]
    assert isinstance(row.pid, int)
    os.kill(row.pid, signal.SIGKILL)
    while daemon.supervisor.servers["victim"].available:
        await changed.wait()
        changed = trio.Event()
        daemon.all_servers.subscribe(changed.set)


async def burst(sock: str, profile: str, era: str, calls: list[Any]) -> dict[str, Any]:
    proc = await trio.run_process(
        [sys.executable, BURST, sock, profile, era, json.dumps(calls)],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


async def mcpd_calls(config: Path, *argv: str) -> list[dict[str, Any]]:
    proc = await trio.run_process(
        [sys.executable, "-m", "mcpd", "calls", "--config", str(config), "--json", *argv],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


async def test_a_thousand_calls_of_eight_agents_give_a_thousand_records(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    state = tmp_path / "state"
    with trio.fail_after(LIMIT):
        async with running(load(config), str(config)) as daemon:
            await kill_victim(daemon)
            sock = daemon.socket_path
            agents = [
                ("default" if n < AGENTS // 2 else "ci", "modern" if n % 2 else "legacy")
                for n in range(AGENTS)
            ]
            seen: dict[int, tuple[str, str]] = {}

            async def one(profile: str, era: str) -> None:
                alias = "gh" if profile == "default" else "notes"
                out = await burst(sock, profile, era, plan(alias))
                seen[out["pid"]] = (profile, era)
                for i, result in enumerate(out["results"]):
                    outcome = KINDS[i % len(KINDS)][1]
                    assert result["error"] == (outcome == "error"), (i, result)
                    assert result["is_error"] == (outcome not in ("ok", "error")), (i, result)

            async with trio.open_nursery() as nursery:
                for profile, era in agents:
                    nursery.start_soon(one, profile, era)
            metrics = (await curl(sock, "/metrics")).body.decode()
            await daemon.audit.flush()
        records = list(AuditRecords(str(state)))
        assert len(records) == AGENTS * CALLS
        by_agent = Counter(r.agent.pid for r in records)
        assert by_agent == dict.fromkeys(seen, CALLS)
        assert len({r.agent.connection for r in records}) == AGENTS
        for r in records:
            profile, era = seen[r.agent.pid]  # type: ignore[index]
            assert (r.agent.profile, r.agent.era, r.agent.uid) == (profile, era, os.getuid())
            assert r.agent.exe == os.path.basename(os.path.realpath(sys.executable))
            tool = r.name.rsplit("__", 1)[1] if r.name else ""
            [(_, outcome, decision)] = [k for k in KINDS if k[0] == tool]
            assert (r.outcome, r.decision, r.method) == (outcome, decision, "tools/call"), r
            assert r.args_bytes == len(json.dumps({"text": f"{r.server}-0"})) or r.args_bytes > 0
            if outcome == "refused" and decision == "deny":
                assert (r.decided_by, r.reason) == ("policy[0]", "denied by policy[0]: no deleting")
            if outcome == "outage":
                assert r.server == "victim" and r.reason
        per_kind = Counter((r.outcome, r.decision) for r in records)
        assert sum(per_kind.values()) == 1000
        ok = 'mcpd_calls_total{server="gh",method="tools/call",outcome="ok",decision="allow"}'
        assert (
            f"{ok} {sum(1 for r in records if r.server == 'gh' and r.outcome == 'ok')}" in metrics
        )
        denied = 'mcpd_calls_total{server="notes",method="tools/call",outcome="refused",'
        assert denied + 'decision="deny"} ' in metrics

        # The file rotated at its cap, and every record is still there.
        files = sorted(p.name for p in state.iterdir() if p.name.startswith(FILE_NAME))
        assert len(files) > 3 and FILE_NAME in files
        assert all((state / name).stat().st_size <= 64 * 1024 for name in files)

        # mcpd calls narrows them, reading the files.
        assert len(await mcpd_calls(config, "--last", "0")) == 1000
        notes = await mcpd_calls(config, "--last", "0", "--server", "notes")
        assert notes and {r["server"] for r in notes} == {"notes"}
        assert len(notes) == sum(1 for r in records if r.server == "notes")
        failed = await mcpd_calls(config, "--last", "0", "--failed")
        assert len(failed) == sum(1 for r in records if r.outcome != "ok")
        pid = next(iter(seen))
        theirs = await mcpd_calls(config, "--last", "0", "--agent", str(pid))
        assert len(theirs) == CALLS and {r["agent"]["pid"] for r in theirs} == {pid}
        fails = await mcpd_calls(config, "--last", "0", "--tool", "gh/fail", "--since", "1h")
        assert {(r["server"], r["original"], r["outcome"]) for r in fails} == {
            ("gh", "fail", "tool_error")
        }

        # A restart adds to what is there.
        with trio.fail_after(LIMIT):
            async with (
                running(load(config), str(config)) as again,
                connect(again.socket_path) as agent,
            ):
                assert (await agent.call("mcp__gh__read", {"text": "again"}))["content"]
        after = list(AuditRecords(str(state)))
        assert len(after) == 1001
        assert [r.agent.connection for r in after[:1000]] == [r.agent.connection for r in records]
        assert after[-1].name == "mcp__gh__read"


async def test_gets_reads_and_completions_leave_records(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with trio.fail_after(LIMIT):
        async with running(load(config), str(config)) as daemon:
            async with connect(daemon.socket_path) as agent:
                prompts = (await agent.result("prompts/list"))["prompts"]
                got = await agent.result("prompts/get", {"name": prompts[0]["name"]})
                assert got["messages"]
                templates = (await agent.result("resources/templates/list"))["resourceTemplates"]
                uri = templates[0]["uriTemplate"].replace("{x}", "7")
                await agent.rpc("resources/read", {"uri": uri})
                ref = {"type": "ref/prompt", "name": prompts[0]["name"]}
                argument = {"name": "a", "value": "b"}
                await agent.rpc("completion/complete", {"ref": ref, "argument": argument})
                missing = await agent.rpc("prompts/get", {"name": "mcp__notes__nope"})
                assert "error" in missing
            await daemon.audit.flush()
    records = list(AuditRecords(str(tmp_path / "state")))
    assert [r.method for r in records] == [
        "prompts/get",
        "resources/read",
        "completion/complete",
        "prompts/get",
    ]
    got_record, read_record, complete_record, missing_record = records
    assert (got_record.server, got_record.outcome, got_record.name) == (
        "notes",
        "ok",
        prompts[0]["name"],
    )
    assert got_record.original is not None and got_record.result_bytes > 0
    assert (read_record.server, read_record.name) == ("notes", uri)
    assert complete_record.server == "notes" and complete_record.args_bytes > 0
    assert (missing_record.outcome, missing_record.server) == ("refused", None)
    assert "Unknown prompt" in (missing_record.reason or "")


async def test_a_get_and_a_read_whose_result_cannot_be_read_are_recorded_as_malformed_replies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[daemon]\n"
        f"socket = {json.dumps(str(tmp_path / 'mcpd.sock'))}\n"
        f"state_dir = {json.dumps(str(tmp_path / 'state'))}\n"
        "audit_journal = false\n"
        f"[servers.odd]\n{server('--prompts', '1', '--templates', '1', '--out-of-range')}"
    )
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon:
            async with connect(daemon.socket_path) as agent:
                prompts = (await agent.result("prompts/list"))["prompts"]
                got = await agent.rpc("prompts/get", {"name": prompts[0]["name"]})
                templates = (await agent.result("resources/templates/list"))["resourceTemplates"]
                uri = templates[0]["uriTemplate"].replace("{x}", "7")
                read = await agent.rpc("resources/read", {"uri": uri})
            await daemon.audit.flush()
    errors = [got["error"]["message"], read["error"]["message"]]
    # A number no decoder reads (1e400) makes the reply itself the server's malformed one.
    malformed = "The tool server 'odd' sent a malformed reply to this call: "
    assert all(m.startswith(malformed) for m in errors), errors
    records = list(AuditRecords(str(tmp_path / "state")))
    reason = (
        "odd: the reply was holding a number no JSON decoder reads (one past the largest "
        "double, about 1.8e308) and was dropped"
    )
    assert [(r.method, r.outcome, r.reason) for r in records] == [
        ("prompts/get", "outage", reason),
        ("resources/read", "outage", reason),
    ]


async def test_stopping_the_daemon_writes_the_records_of_the_calls_it_cut_short(
    tmp_path: Path,
) -> None:
    command, args = scripted("--names", "nap", "--hang-on-call")
    path = tmp_path / "config.toml"
    path.write_text(
        "[daemon]\n"
        f"socket = {json.dumps(str(tmp_path / 'mcpd.sock'))}\n"
        f"state_dir = {json.dumps(str(tmp_path / 'state'))}\n"
        f"[servers.slow]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpd", "serve", "--config", str(path), "--log", "stderr"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        with trio.fail_after(LIMIT):
            assert proc.stderr is not None
            while b"listening on" not in await trio.to_thread.run_sync(proc.stderr.readline):
                pass
            async with connect(str(tmp_path / "mcpd.sock")) as agent:
                for i in range(3):
                    call = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": NAP}
                    await agent.send_raw(json.dumps(call).encode() + b"\n")
                await agent.rpc("ping")  # read after the calls: they are at the server
                proc.send_signal(signal.SIGTERM)
                await trio.to_thread.run_sync(proc.wait)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = list(AuditRecords(str(tmp_path / "state")))
    assert len(records) == 3
    # Cut short by the stop: the agent was let go, or the server stopped first; either
    # way the record says why, as no agent stopped waiting.
    assert {r.outcome for r in records} <= {"cancelled", "outage"}
    assert all(r.reason for r in records), records
    assert all(r.reason == STOPPED for r in records if r.outcome == "cancelled"), records


FLOOD = 10_000  # more than the writer's buffer holds


async def test_an_agents_calls_are_all_recorded_while_another_floods_unknown_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer is held (as a disk or journald that fell behind would hold it) while
    one agent sends more calls of a name mcpd does not know than the buffer holds; then
    another agent, a process of its own, makes its calls. Every one of the second's
    calls is written, and every one of the flood is in the file too, most of them
    counted in a summary record."""
    config = write_config(tmp_path, max_bytes=16 * 1024 * 1024)
    release = threading.Event()
    with trio.fail_after(LIMIT):
        async with running(load(config), str(config)) as daemon:
            write = daemon.audit._write

            def held(*args: Any) -> None:
                release.wait(LIMIT)
                write(*args)

            monkeypatch.setattr(daemon.audit, "_write", held)
            try:
                async with connect(daemon.socket_path, modern=False) as flooder:
                    await flooder.initialize()
                    for start in range(0, FLOOD, 250):
                        await flooder.send_raw(
                            b"".join(
                                json.dumps(
                                    {
                                        "jsonrpc": "2.0",
                                        "id": f"f{n}",
                                        "method": "tools/call",
                                        "params": {"name": "mcp__nowhere__x", "arguments": {}},
                                    }
                                ).encode()
                                + b"\n"
                                for n in range(start, start + 250)
                            )
                        )
                        await flooder.wait_unmatched(start + 250)
                    assert all(r["result"]["isError"] for r in flooder.unmatched)
                calls = [("mcp__gh__read", {"text": f"honest-{i}"}) for i in range(40)]
                honest = await burst(daemon.socket_path, "default", "legacy", calls)
                assert not any(r["is_error"] or r["error"] for r in honest["results"])
            finally:
                release.set()
            await daemon.audit.flush()
    reading = AuditRecords(str(tmp_path / "state"))
    records = list(reading)
    assert [r.name for r in records if r.agent.pid == honest["pid"]] == ["mcp__gh__read"] * 40
    flood = [r for r in records if r.agent.pid == os.getpid()]
    assert {(r.name, r.outcome, r.decision) for r in flood} == {
        ("mcp__nowhere__x", "refused", "none")
    }
    assert sum(r.calls for r in flood) == FLOOD
    assert len(flood) < FLOOD // 10  # past the agent's budget, counted, not written each
    assert reading.dropped == 0


async def test_a_write_the_disk_holds_does_not_hold_the_daemons_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a hung mount would hold it: the daemon stops within its bounds, the write
    still waiting."""
    config = write_config(tmp_path)
    started, release, returned = threading.Event(), threading.Event(), threading.Event()

    def held(*args: Any) -> None:
        started.set()
        release.wait(LIMIT / 2)
        returned.set()

    try:
        with trio.fail_after(LIMIT):
            async with running(load(config), str(config)) as daemon:
                monkeypatch.setattr(daemon.audit, "_write", held)
                async with connect(daemon.socket_path) as agent:
                    await agent.call("mcp__gh__read", {"text": "x"})
                await trio.to_thread.run_sync(started.wait)
        assert not returned.is_set()
    finally:
        release.set()
