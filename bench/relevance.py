"""Would a model find the right tool? Tool search over a real daemon's tool list.

    .venv/bin/python -m bench.relevance            # relevance and speed figures
    .venv/bin/python -m bench.relevance --json     # the same as one JSON object

Starts ``mcpd serve`` with real third-party servers (server-everything, -filesystem and
-memory from ``tests/peers``; mcp-server-time and mcp-server-git from PyPI) and the two
demo servers, reads the aggregated tool list from the socket (``GET /tools``), indexes it
with ``mcpd.registry.profiles.search`` and asks the questions below, each written the way a person
asks, with the tools that person would expect. A server that cannot start here is left
out with a note (its queries are skipped), so the run never fails for a missing peer.

The queries were written before the ranker was tuned, and the ranker is never changed
for one query: a change after seeing results must help the general case.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.relevance_queries import QUERIES
from bench.wire import readable

if TYPE_CHECKING:
    from mcpd.registry.profiles.search import ToolDoc

ROOT = Path(__file__).resolve().parent.parent
PEERS_BIN = ROOT / "tests" / "peers" / "node_modules" / ".bin"
VENV_BIN = Path(sys.executable).parent
TOP_K = 3
NPM = "make peers"
GIT_EXTRA = ".venv/bin/pip install -e '.[test,bench]'"


class Skip(Exception):
    """A server that cannot run here: left out, with this note."""


def _which(path: Path, install: str) -> str:
    if not path.exists():
        raise Skip(f"{path} is missing ({install})")
    return str(path)


def _servers(work: Path, tickets_port: int | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The mcpd server tables for every peer that can run here, and notes on the rest."""
    files = work / "files"
    files.mkdir()
    (files / "readme.txt").write_text("a file for the filesystem server\n")
    builders: dict[str, Any] = {
        "everything": lambda: {"command": _which(PEERS_BIN / "mcp-server-everything", NPM),
                               "args": ["stdio"]},
        "filesystem": lambda: {"command": _which(PEERS_BIN / "mcp-server-filesystem", NPM),
                               "args": [str(files)]},
        "memory": lambda: {"command": _which(PEERS_BIN / "mcp-server-memory", NPM),
                           "env": {"MEMORY_FILE_PATH": str(work / "memory.jsonl")}},
        "time": lambda: {"command": _which(VENV_BIN / "mcp-server-time", "make setup"),
                         "args": ["--local-timezone", "UTC"]},
        "git": lambda: {"command": _which(VENV_BIN / "mcp-server-git", GIT_EXTRA),
                        "args": ["-r", _git_repo(work / "repo")]},
        "notes": lambda: {"command": sys.executable, "args": ["-m", "mcpd.demo.notes"]},
    }  # fmt: skip
    servers: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for alias, build in builders.items():
        try:
            servers[alias] = build()
        except Skip as exc:
            notes.append(f"{alias}: left out: {exc}")
    if tickets_port is not None:
        servers["tickets"] = {"url": f"http://127.0.0.1:{tickets_port}/mcp"}
    else:
        notes.append("tickets: left out: the demo server did not start")
    return servers, notes


def _git_repo(path: Path) -> str:
    git = shutil.which("git")
    if git is None:
        raise Skip("git is not installed")
    path.mkdir()
    (path / "hello.txt").write_text("hello\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}  # fmt: skip
    for cmd in (["init", "-q"], ["add", "hello.txt"], ["commit", "-q", "-m", "first"]):
        subprocess.run([git, *cmd], cwd=path, env=env, check=True, capture_output=True)
    return str(path)


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def _get(sock_path: str, path: str, timeout: float = 10.0) -> Any:
    """GET over the daemon's socket: plain HTTP/1.1, one request, read to the close."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: mcpd\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1]
    if status != b"200":
        raise RuntimeError(f"GET {path}: HTTP {status.decode()}")
    if b"transfer-encoding: chunked" in head.lower():
        body = _unchunk(body)
    return json.loads(body)


def _unchunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return out


@contextmanager
def _process(cmd: list[str], **kw: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A child in its own process group, stopped with everything below it on exit."""
    proc = subprocess.Popen(cmd, start_new_session=True, **kw)
    try:
        yield proc
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(5.0)
                break
            except subprocess.TimeoutExpired:
                continue


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not readable(fd, left):
            raise TimeoutError("no line in time")
        chunk = os.read(fd, 256)
        if not chunk:
            raise EOFError("the process exited")
        buf += chunk
    return buf.split(b"\n", 1)[0]


def fetch_tools(
    mcpd: list[str] | None = None, timeout: float = 60.0
) -> tuple[list[Any], list[str]]:
    """Start the peers and mcpd, wait until every server is ready (or the timeout), and
    return the daemon's aggregated tool list and notes on what was left out."""
    mcpd = mcpd or [str(VENV_BIN / "mcpd")]
    with tempfile.TemporaryDirectory(prefix="mcpd-rel-", dir="/tmp") as tmp:
        work = Path(tmp)
        tickets_cmd = [sys.executable, "-m", "mcpd.demo.tickets", "--http", "127.0.0.1:0",
                       "--ready-file", "/dev/stdout"]  # fmt: skip
        with _process(tickets_cmd, cwd=ROOT, stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL) as tickets:  # fmt: skip
            try:
                port: int | None = int(_read_line(tickets, 20.0))
            except (TimeoutError, EOFError, ValueError):
                port = None
            servers, notes = _servers(work, port)
            sock = str(work / "mcpd.sock")
            lines = ["[daemon]", f"socket = {json.dumps(sock)}",
                     f"state_dir = {json.dumps(str(work / 'state'))}"]  # fmt: skip
            for alias, table in servers.items():
                lines.append(f"\n[servers.{alias}]")
                lines += [f"{k} = {_toml(v)}" for k, v in table.items()]
            config = work / "mcpd.toml"
            config.write_text("\n".join(lines) + "\n")
            log = (work / "mcpd.log").open("wb")
            serve = [*mcpd, "serve", "--config", str(config), "--log", "stderr"]
            with _process(serve, cwd=ROOT, stdout=log, stderr=log) as daemon:
                status = _wait_ready(sock, daemon, timeout)
                for server in status.get("servers", []):
                    if server.get("state") != "ready":
                        notes.append(
                            f"{server.get('alias')}: {server.get('state')} "
                            f"({server.get('last_error')}); its tools may be missing"
                        )
                tools = _get(sock, "/tools")["tools"]
    return tools, notes


def _wait_ready(sock: str, daemon: subprocess.Popen[bytes], timeout: float) -> Any:
    """Poll the status until every server is ready; bounded by ``timeout``."""
    deadline = time.monotonic() + timeout
    status: Any = {}
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise RuntimeError(f"mcpd exited with status {daemon.returncode}")
        try:
            status = _get(sock, "/status", timeout=5.0)
        except OSError:
            status = {}
        servers = status.get("servers") or []
        if servers and all(s.get("state") == "ready" for s in servers):
            return status
        time.sleep(0.1)
    if not status:
        raise RuntimeError(f"mcpd did not answer on {sock} within {timeout:.0f} s")
    return status


# -- figures --


def listed_doc(tool: Mapping[str, Any]) -> ToolDoc:
    """The index's document of a tool as mcpd lists it to agents (``GET /tools``): the
    server and original name from ``_meta``, the ``[marker] [alias]`` notes cut off
    the description (and the ``[alias]`` off the title), so an outage does not change
    how the tool ranks."""
    from mcpd.registry.profiles.search import ToolDoc

    meta = tool.get("_meta")
    if not isinstance(meta, dict):
        meta = {}
    server = str(meta.get("mcpd/server") or "")
    description = str(tool.get("description") or "")
    note = f"[{server}]"
    at = description.find(note) if server else -1
    if at == 0 or (at > 0 and description.startswith("[")):
        description = description[at + len(note) :].lstrip()
    schema = tool.get("inputSchema")
    title = str(tool.get("title") or "")
    if server and title.startswith(note):
        title = title[len(note) :].lstrip()
    return ToolDoc(
        name=str(tool.get("name") or ""),
        server=server,
        original=str(meta.get("mcpd/originalName") or ""),
        title=title,
        description=description,
        input_schema=schema if isinstance(schema, dict) else {},
    )


def evaluate(
    tools: list[Any], queries: list[tuple[str, tuple[str, ...]]] = QUERIES
) -> dict[str, Any]:
    from mcpd.registry.profiles.search import ToolIndex

    docs = [listed_doc(t) for t in tools]
    index = ToolIndex(docs)
    prefix = _prefix(docs)
    names = {d.name for d in docs}
    asked = found = 0
    reciprocal = 0.0
    misses: list[dict[str, Any]] = []
    skipped: list[str] = []
    for question, expected in queries:
        wanted = {prefix + e for e in expected}
        if not wanted & names:
            skipped.append(question)
            continue
        asked += 1
        ranked = [h.name for h in index.search(question, k=len(docs))]
        rank = next((r for r, name in enumerate(ranked, 1) if name in wanted), None)
        reciprocal += 1.0 / rank if rank else 0.0
        if rank is not None and rank <= TOP_K:
            found += 1
        else:
            misses.append({"query": question, "expected": sorted(wanted), "rank": rank,
                           "above": ranked[: min(rank - 1 if rank else TOP_K, 5)]})  # fmt: skip
    return {
        "tools": len(docs),
        "queries": asked,
        "skipped_queries": skipped,
        "precision_at_3": found / asked if asked else 0.0,
        "mrr": reciprocal / asked if asked else 0.0,
        "misses": misses,
    }


def _prefix(docs: list[ToolDoc]) -> str:
    """The part of local names before ``alias__tool`` (``mcp__`` by default)."""
    for d in docs:
        tail = f"{d.server}__{d.original}"
        if d.original and d.name.endswith(tail):
            return d.name[: -len(tail)]
    return "mcp__"


# -- speed --


def synthetic(real: list[ToolDoc], count: int, seed: int = 7) -> list[ToolDoc]:
    """``count`` tools modelled on the real ones: 50 per server, each description with a
    few made-up words, so the vocabulary grows with the count as a real one would."""
    from mcpd.registry.profiles.search import ToolDoc

    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choices(letters, k=rng.randint(4, 9))) for _ in range(count * 2)]
    out = []
    for i in range(count):
        base = real[i % len(real)]
        server = f"srv{i // 50:04d}"
        extra = " ".join(rng.choices(vocabulary, k=6))
        out.append(
            ToolDoc(
                name=f"mcp__{server}__{base.original}_{i}",
                server=server,
                original=f"{base.original}_{i}",
                title=base.title,
                description=f"{base.description} {extra}",
                input_schema=base.input_schema,
            )
        )
    return out


def measure_speed(tools: list[Any], sizes: tuple[int, ...] = (1000, 10000)) -> dict[str, Any]:
    """Index build time (median of 3, from a cold word cache) and search time per query
    (median and worst over the benchmark's queries, 20 rounds each) for each size, in
    CPU time of this process: the machine may be shared, and wall time would measure
    the neighbours too."""
    from mcpd.registry.profiles import search as toolsearch

    real = [listed_doc(t) for t in tools]
    out: dict[str, Any] = {}
    for size in sizes:
        docs = synthetic(real, size)
        builds = []
        for _ in range(3):
            toolsearch._runs.clear()  # what a daemon's first build pays
            t0 = time.process_time()
            index = toolsearch.ToolIndex(docs)
            builds.append(time.process_time() - t0)
        per_query = []
        for question, _ in QUERIES:
            t0 = time.process_time()
            for _ in range(20):
                index.search(question, k=8)
            per_query.append((time.process_time() - t0) / 20)
        out[str(size)] = {
            "build_ms": round(statistics.median(builds) * 1000, 1),
            "search_ms_median": round(statistics.median(per_query) * 1000, 3),
            "search_ms_max": round(max(per_query) * 1000, 3),
        }
    return out


def run_relevance(mcpd: list[str] | None = None, speed: bool = True) -> dict[str, Any]:
    """Relevance (and speed) figures over a live daemon's tools; the main bench runner
    calls this. Raises RuntimeError if mcpd cannot be started at all."""
    tools, notes = fetch_tools(mcpd)
    result = evaluate(tools)
    result["notes"] = notes
    result["servers"] = sorted({(t.get("_meta") or {}).get("mcpd/server", "?") for t in tools})
    result["definition"] = (
        f"precision@{TOP_K}: the share of queries with an expected tool among the top "
        f"{TOP_K}; MRR: the mean of 1/rank of the first expected tool (0 if none ranks)"
    )
    if speed:
        result["speed"] = measure_speed(tools)
    return result


def render(result: dict[str, Any]) -> str:
    lines = [
        f"tool search relevance: {result['tools']} tools from {len(result['servers'])} "
        f"servers ({', '.join(result['servers'])}), {result['queries']} queries",
        f"  precision@{TOP_K} = {result['precision_at_3']:.3f}   MRR = {result['mrr']:.3f}"
        f"   (target: precision@{TOP_K} >= 0.8: "
        f"{'MET' if result['precision_at_3'] >= 0.8 else 'NOT MET'})",
        f"  {result['definition']}",
    ]
    for note in result["notes"]:
        lines.append(f"  note: {note}")
    if result["skipped_queries"]:
        lines.append(f"  skipped (their server is missing): {len(result['skipped_queries'])}")
    if result["misses"]:
        lines.append(f"  misses (expected tool not in the top {TOP_K}):")
    for miss in result["misses"]:
        rank = miss["rank"] if miss["rank"] is not None else "none"
        lines.append(f"    {miss['query']!r}: rank {rank} of {', '.join(miss['expected'])}")
        lines.append(f"      above it: {', '.join(miss['above'])}")
    for size, figures in (result.get("speed") or {}).items():
        lines.append(
            f"  {int(size):>6} tools: index build {figures['build_ms']} ms, search "
            f"{figures['search_ms_median']} ms median / {figures['search_ms_max']} ms max"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--no-speed", action="store_true", help="skip the speed figures")
    parser.add_argument("--mcpd", help="the mcpd command (default: this venv's mcpd)")
    args = parser.parse_args(argv)
    result = run_relevance(args.mcpd.split() if args.mcpd else None, speed=not args.no_speed)
    print(json.dumps(result, indent=2) if args.json else render(result))


if __name__ == "__main__":
    main()
