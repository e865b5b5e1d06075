"""The shared-instance win: N host sessions against M real stdio servers, two ways.

(a) own servers: each session starts its own copy of every server, as hosts do. A session
    is ``bench/launcher.py``: it spawns the M servers, does initialize + tools/list with
    each, then idles.
(b) one mcpd: mcpd runs the M servers once; each session is the same launcher with one
    server, ``mcpd bridge``, and lists every tool through it. "sockets" is (b) without the
    bridge processes: agents that connect to the socket themselves.

Counted: every process below the sessions, and for (b) mcpd's whole tree (node and
python children included); RSS is the sum of VmRSS over them. The session processes
themselves (the same in (a) and (b)) are not counted, and are shown apart.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from bench import procstat
from bench.hosts import Sessions, server_spec
from bench.targets import PYTHON, ROOT, Env, TargetUnavailable, running_mcpd

NPM_BIN = ROOT / "tests" / "peers" / "node_modules" / ".bin"


def real_servers(env: Env) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """alias -> {"argv", "env"} for the servers that are installed here, and notes."""
    venv_bin = Path(PYTHON).parent
    servers: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    time_server = venv_bin / "mcp-server-time"
    if time_server.exists():
        servers["time"] = {"argv": [str(time_server), "--local-timezone", "UTC"]}
    else:
        notes.append("mcp-server-time is not installed (the test extra): left out")
    git_server = venv_bin / "mcp-server-git"
    if git_server.exists():
        servers["git"] = {"argv": [str(git_server), "-r", str(_git_repo(env.workdir / "repo"))]}
    else:
        notes.append("mcp-server-git is not installed (the bench extra; `make bench`): left out")
    memory, filesystem = NPM_BIN / "mcp-server-memory", NPM_BIN / "mcp-server-filesystem"
    if memory.exists() and filesystem.exists():
        servers["memory"] = {
            "argv": [str(memory)],
            "env": {"MEMORY_FILE_PATH": str(env.workdir / "memory.jsonl")},
        }
        root = env.workdir / "files"
        root.mkdir(exist_ok=True)
        (root / "hello.txt").write_text("hello\n")
        servers["filesystem"] = {"argv": [str(filesystem), str(root)]}
    else:
        notes.append(
            "the npm peers are missing (run `make peers`): ran with the Python servers only"
        )
    return servers, notes


def _git_repo(path: Path) -> Path:
    path.mkdir(exist_ok=True)
    git = ["git", "-C", str(path), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "README").write_text("a repository for mcp-server-git\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    return path


def run_shared(env: Env, sessions: list[int]) -> dict[str, Any]:
    servers, notes = real_servers(env)
    out: dict[str, Any] = {"servers": list(servers), "notes": notes, "rows": []}
    if not servers:
        out["skipped"] = "no real stdio server is installed"
        return out
    spec = [server_spec(s["argv"], s.get("env")) for s in servers.values()]
    tables = {alias: _mcpd_table(s) for alias, s in servers.items()}
    for n in sessions:
        row: dict[str, Any] = {"sessions": n}
        with Sessions(env.workdir, env.logdir, f"shared-own-{n}", spec, count=n, timeout=120) as a:
            row["own"] = {
                "ready_s": a.ready_s,
                **a.servers_memory(),
                "tools": sum(a.tools()) // n,
                "session_rss_kb": a.launchers_memory()["rss_kb"] // n,
            }
            row["own"]["pss_kb"] = procstat.sum_pss_kb(a.below())
            if n == sessions[0]:
                out["per_server"] = a.per_server_memory()
        try:
            row["mcpd"] = _through_mcpd(env, tables, n)
        except TargetUnavailable as exc:
            row["mcpd"] = {"skipped": str(exc)}
        out["rows"].append(row)
    return out


def _mcpd_table(server: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, Any] = {"command": server["argv"][0], "args": server["argv"][1:]}
    if server.get("env"):
        table["env"] = server["env"]
    return table


def _through_mcpd(env: Env, tables: dict[str, dict[str, Any]], n: int) -> dict[str, Any]:
    if env.mcpd is None:
        raise TargetUnavailable("mcpd is not runnable")
    with running_mcpd(env, "mcpd-shared", tables, None, timeout=120) as daemon:
        bridge = server_spec([*env.mcpd, "bridge", "--socket", str(daemon.socket)])
        name = f"shared-mcpd-{n}"
        with Sessions(env.workdir, env.logdir, name, [bridge], count=n, timeout=120) as b:
            daemon_tree = procstat.descendants([daemon.proc.pid])
            tree = procstat.sum_memory_kb(daemon_tree)
            bridges = b.servers_memory()
            pss = procstat.sum_pss_kb(daemon_tree | b.below())
            return {
                "daemon": procstat.memory_kb(daemon.proc.pid),
                "daemon_ready_s": daemon.ready_s,
                "ready_s": b.ready_s,
                "daemon_tree": tree,
                "bridges": bridges,
                "processes": tree["processes"] + bridges["processes"],
                "rss_kb": tree["rss_kb"] + bridges["rss_kb"],
                "pss_kb": pss,
                "tools": min(b.tools()),
            }


def shared_lines(shared: dict[str, Any] | None) -> list[str]:
    if not shared:
        return []
    lines = [f"  servers (M = {len(shared['servers'])}): {', '.join(shared['servers'])}"]
    lines += [f"  note: {note}" for note in shared["notes"]]
    if "skipped" in shared:
        return [*lines, f"  skipped: {shared['skipped']}"]
    lines.append(
        f"{'':10}  {'(a) own servers':<21}   {'(b) one mcpd + bridges':<21}"
        f"   {'(b) / (a)':<11}   {'(b) sockets only':<19}".rstrip()
    )
    lines.append(
        f"  {'sessions':>8}  {'procs':>5} {'RSS MB':>7} {'ready s':>7}"
        f"   {'procs':>5} {'RSS MB':>7} {'ready s':>7}   {'procs':>5} {'RSS':>5}"
        f"   {'procs':>5} {'RSS MB':>7} {'/(a)':>5}"
    )
    for row in shared["rows"]:
        a, b = row["own"], row["mcpd"]
        head = (
            f"  {row['sessions']:>8}  {a['processes']:>5} {a['rss_kb'] / 1024:>7.1f}"
            f" {a['ready_s']:>7.2f}"
        )
        if "skipped" in b:
            lines.append(f"{head}   skipped: {b['skipped'].splitlines()[0]}")
            continue
        tree = b["daemon_tree"]
        lines.append(
            f"{head}   {b['processes']:>5} {b['rss_kb'] / 1024:>7.1f} {b['ready_s']:>7.2f}"
            f"   {b['processes'] / a['processes']:>5.2f} {b['rss_kb'] / a['rss_kb']:>5.2f}"
            f"   {tree['processes']:>5} {tree['rss_kb'] / 1024:>7.1f}"
            f" {tree['rss_kb'] / a['rss_kb']:>5.2f}"
        )
    lines += [f"  {x}" for x in _footnotes(shared)]
    return lines


def _footnotes(shared: dict[str, Any]) -> list[str]:
    rows = shared["rows"]
    out = []
    copies = ", ".join(
        f"{s['name']} {s['rss_kb'] / 1024:.1f}" for s in shared.get("per_server", [])
    )
    if copies:
        out.append(f"one copy of each server, RSS MB: {copies}")
    through = [r for r in rows if "skipped" not in r["mcpd"]]
    if through:
        b = through[-1]["mcpd"]
        out.append(
            f"mcpd daemon {b['daemon']['rss_kb'] / 1024:.1f} MB with"
            f" {through[-1]['sessions']} sessions; a bridge"
            f" {b['bridges']['rss_kb'] / 1024 / max(1, b['bridges']['processes']):.1f} MB;"
            f" mcpd started its servers in {through[0]['mcpd']['daemon_ready_s']:.2f} s"
        )
    pss = [
        f"N={r['sessions']} {r['own']['pss_kb'] / 1024:.0f} vs {r['mcpd']['pss_kb'] / 1024:.0f}"
        for r in through
    ]
    if pss:
        out.append(
            f"PSS (shared pages split between their users), MB, (a) vs (b): {'; '.join(pss)}"
        )
    for row in rows:
        own, via = row["own"]["tools"], row["mcpd"].get("tools", row["own"]["tools"])
        if own != via:
            out.append(
                f"N={row['sessions']}: {own} tools per session on their own, {via} through mcpd"
            )
    if rows and all(r["own"]["tools"] == r["mcpd"].get("tools", -1) for r in rows):
        out.append(f"{rows[0]['own']['tools']} tools per session both ways")
    out.append(
        f"each session process (bench/launcher.py, not counted)"
        f" {rows[0]['own']['session_rss_kb'] / 1024:.1f} MB; (b) ready s = the sessions'"
        " start with mcpd already running"
    )
    return out
