"""The policy as a running daemon holds it: ``mcpd tools --policy`` shows what the rules
decide for each tool (annotations believed from a trusted server only), a reload
replaces the rules, ``check-config`` lists them and warns of one no call reaches or
one an agent steps out of by picking another profile, and
``/metrics`` counts audited calls by server, outcome and decision."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import trio

from mcpd.audit.record import CallRecord
from mcpd.config.loading.load import load
from mcpd.policy.agent import AgentInfo
from tests.support.clients.agent import running
from tests.support.clients.daemon_http import curl
from tests.support.system.procs import scripted

LIMIT = 60
ROOT = Path(__file__).resolve().parents[4]
READ_ONLY = {"readOnlyHint": True, "destructiveHint": False}


def server(names: str, read_only: str, trusted: bool) -> str:
    """A server with tools ``names`` (no hints) and ``read_only`` (saying it only reads)."""
    extra = [{"name": n, "inputSchema": {"type": "object"}} for n in names.split(",")]
    extra.append({"name": read_only, "inputSchema": {"type": "object"}, "annotations": READ_ONLY})
    command, args = scripted("--tools", "0", "--extra-tools", json.dumps(extra))
    listed = ", ".join(json.dumps(a) for a in args)
    return f'command = "{command}"\nargs = [{listed}]\ntrusted = {str(trusted).lower()}\n'


RULES = """
[[policy]]
tools = ["*/delete_*"]
action = "deny"
reason = "no deletions"

[[policy]]
annotations = { readOnlyHint = true }
action = "allow"
rate = "30/min"

[[policy]]
servers = ["gh"]
action = "ask"
"""


def write_config(tmp_path: Path, rules: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[daemon]\nsocket = "{tmp_path / "mcpd.sock"}"\nstate_dir = "{tmp_path / "state"}"\n'
        f"[servers.gh]\n{server('delete_repo,merge', 'read_repo', trusted=False)}"
        f"[servers.notes]\n{server('write_note', 'read_note', trusted=True)}"
        '[profiles.ci]\nservers = ["notes"]\n' + rules
    )
    return path


def mcpd(*argv: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "mcpd", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=LIMIT,
    )
    return proc.returncode, proc.stdout, proc.stderr


async def run(*argv: str) -> tuple[int, str, str]:
    return await trio.to_thread.run_sync(lambda: mcpd(*argv))


def decisions(out: str) -> dict[str, str]:
    """NAME -> DECISION from the table of ``mcpd tools --policy``."""
    lines = out.splitlines()
    start = lines[0].index("DECISION")
    end = lines[0].index("DESCRIPTION")
    return {line.split()[0]: line[start:end].strip() for line in lines[1:-1]}


async def test_tools_policy_shows_each_tools_decision_and_follows_reloads(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, RULES)
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon:
            sock = daemon.socket_path
            code, out, err = await run("tools", "--policy", "--socket", sock)
            assert code == 0, err
            assert decisions(out) == {
                "mcp__gh__delete_repo": "deny policy[0]",
                "mcp__gh__merge": "ask policy[2]",
                # Its server says it only reads, but the server is not trusted.
                "mcp__gh__read_repo": "ask policy[2]",
                "mcp__notes__read_note": "allow (30 calls a minute) policy[1]",
                "mcp__notes__write_note": "allow",
            }
            code, out, err = await run("tools", "--policy", "--json", "--socket", sock)
            shown = json.loads(out)["decisions"]
            assert shown["mcp__gh__delete_repo"] == {
                "action": "deny",
                "rule": 0,
                "by": "policy[0]",
                "reason": "no deletions",
            }
            code, out, err = await run("tools", "--policy", "--profile", "ci", "--socket", sock)
            assert set(decisions(out)) == {"mcp__notes__read_note", "mcp__notes__write_note"}

            write_config(tmp_path, '[[policy]]\ntools = ["notes/*"]\naction = "deny"\n')
            assert (await run("reload", "--socket", sock))[0] == 0
            code, out, err = await run("tools", "--policy", "--socket", sock)
            assert decisions(out)["mcp__notes__read_note"] == "deny policy[0]"
            assert decisions(out)["mcp__gh__delete_repo"] == "allow"


async def test_metrics_count_calls_by_server_outcome_and_decision(tmp_path: Path) -> None:
    path = write_config(tmp_path, RULES)
    agent = AgentInfo(uid=1000, pid=42, profile="default", connection="c1")

    def call(server: str, outcome: str, decision: str) -> CallRecord:
        return CallRecord(
            ts=0.0, agent=agent, method="tools/call", server=server,
            outcome=outcome, decision=decision,  # type: ignore[arg-type]
        )  # fmt: skip

    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon:
            audit = daemon.oversight.audit
            for _ in range(3):
                audit.record(call("gh", "refused", "deny"))
            audit.record(call("notes", "ok", "allow"))
            text = (await curl(daemon.socket_path, "/metrics")).body.decode()
            assert (
                'mcpd_calls_total{server="gh",method="tools/call",outcome="refused",'
                'decision="deny"} 3' in text
            )
            assert (
                'mcpd_calls_total{server="notes",method="tools/call",outcome="ok",'
                'decision="allow"} 1' in text
            )
            assert "mcpd_approvals_pending 0" in text
            assert "mcpd_audit_dropped_total 0" in text
            # An agent of a profile reads the counts of its own servers only.
            scoped = (await curl(daemon.socket_path, "/metrics?profile=ci")).body.decode()
            assert 'server="notes"' in scoped and 'server="gh"' not in scoped
            await audit.flush()
            lines = (tmp_path / "state" / "calls.jsonl").read_text().splitlines()
            assert len(lines) == 4


def test_check_config_lists_the_rules_and_warns_of_unreachable_ones(tmp_path: Path) -> None:
    rules = RULES + '\n[[policy]]\naction = "deny"\n\n[[policy]]\naction = "allow"\n'
    path = write_config(tmp_path, rules)
    code, out, err = mcpd("check-config", "--config", str(path))
    assert code == 0, err
    assert "policy: 5 rule(s), the first that matches a call decides" in out
    assert "policy[0]  deny   tools */delete_*; reason: no deletions" in out
    assert (
        "policy[1]  allow  tools *; annotations readOnlyHint=true; "
        "at most 30 calls a minute per agent" in out
    )
    assert "policy[2]  ask    tools *; servers gh; decided within 120 s" in out
    assert "warning: policy[4] is never reached: policy[3] matches every call" in err


def test_check_config_warns_of_a_rule_an_agent_steps_out_of_by_picking_a_profile(
    tmp_path: Path,
) -> None:
    scoped = '[[policy]]\ntools = ["notes/write_*"]\nprofiles = ["default"]\naction = "deny"\n'
    code, _out, err = mcpd("check-config", "--config", str(write_config(tmp_path, scoped)))
    assert code == 0, err
    assert (
        "warning: policy[0] (deny) holds only for agents in default (and so in the hosts' "
        "built-in ones); an agent on the daemon's socket steps out of it by picking "
        "the profile ci, which shows tools of notes too (mcpd/useProfile, ?profile=)"
    ) in err
    both = scoped.replace('["default"]', '["default", "ci"]')
    code, _out, err = mcpd("check-config", "--config", str(write_config(tmp_path, both)))
    assert code == 0 and "steps out of it" not in err, err


def test_check_config_names_a_bad_rule(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[[policy]]\ntools = ["gihub/*"]\naction = "deny"\n')
    code, _out, err = mcpd("check-config", "--config", str(path))
    assert code == 78
    assert "policy[0].tools[0]: 'gihub' is not a configured server" in err
