"""What putting tool lists through the gate costs (cleaning, rules, pins), in-process.

Two shapes of 10,000 tools on 50 servers: the scale run's (200 echo tools each, as
``bench/scale.py`` starts them) and the real peers' (the tools the servers of
``tests/peers`` list, ``tests/support/data/peer_listings.json``, taken in turn until
there are 200, each name made one of its own). Each tool is decoded from its own bytes
as ``tools/list`` decodes it. For each shape:

  first sight    CPU per tool to install every list in a fresh registry, and settle
  restart        CPU to read ``pins.json`` back, and per tool to install the same
                 lists again (decoded anew) against those pins: a start with saved lists
  one changed    CPU per tool to take every server's list again, decoded anew, with one
                 tool's description changed in each (held)
  heap           the Python heap the registry and the gate keep per tool, pins written
  written        CPU to write ``pins.json`` after the first sight, and the Python heap's
                 peak over its start while it is written; the file's size
  rewritten      the same for writing it again after the restart, one server having
                 listed one tool more

CPU is the process's own (``time.process_time``), the median of a few runs; the heap is
measured apart (``tracemalloc``).

    python -m bench.pins                # both shapes, 10,000 tools
    python -m bench.pins --json         # one JSON object (what bench.run reads)
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import trio

from bench.echo_server import make_tools
from mcpd.config.tables.model import NamingConfig
from mcpd.local.pins.pinfile import PinKeeper
from mcpd.registry.gating.gate import ListGate
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.lists import toolshape
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "tests" / "support" / "data" / "peer_listings.json"
Lists = dict[str, list[bytes]]  # alias -> each tool's bytes, as a server lists them


def echo_lists(tools: int, servers: int = 50) -> Lists:
    each = [msgspec.json.encode(t) for t in make_tools(tools // servers)]
    return {f"e{i:02d}": each for i in range(servers)}


def peer_lists(tools: int, servers: int = 50) -> Lists:
    listings = json.loads(PEERS.read_text())
    real = [
        msgspec.json.decode(msgspec.json.encode(tool))
        for _, listing in sorted(listings.items())
        for tool in listing.get("tools") or []
    ]
    each = tools // servers
    items = []
    for i in range(each):
        tool = dict(real[i % len(real)])
        tool["name"] = f"{tool['name']}_{i}"  # no name twice in a list
        items.append(msgspec.json.encode(tool))
    return {f"p{i:02d}": items for i in range(servers)}


def decoded(lists: Lists) -> dict[str, list[mcp.Tool]]:
    """As ``tools/list`` makes them: decoded, shaped, raw parts copied out."""
    out = {}
    for alias, items in lists.items():
        tools = []
        for item in items:
            tool, _, _ = toolshape.checked_tool(rpc.decode_as(msgspec.Raw(item), mcp.Tool))
            assert tool is not None
            tool.inputSchema = tool.inputSchema.copy()
            if isinstance(tool.outputSchema, msgspec.Raw):
                tool.outputSchema = tool.outputSchema.copy()
            tools.append(tool)
        out[alias] = tools
    return out


def with_one_more(lists: Lists) -> Lists:
    alias, items = next(iter(lists.items()))
    more = msgspec.json.decode(items[0])
    more["name"] = "one_more"
    return {alias: [*items, msgspec.json.encode(more)]}


def with_one_changed(lists: Lists) -> Lists:
    out = {}
    for alias, items in lists.items():
        first = msgspec.json.decode(items[0])
        first["description"] = f"{first.get('description') or ''} Changed."
        out[alias] = [msgspec.json.encode(first), *items[1:]]
    return out


class Run:
    """A registry with its gate and pin file, as the daemon wires them."""

    def __init__(self, path: Path) -> None:
        self.catalog = Catalog(NamingConfig(), ListGate())
        self.pins = PinKeeper(str(path), self.catalog.gate.review, lambda a: None, lambda a: True)

    def install(self, lists: dict[str, list[mcp.Tool]]) -> None:
        for alias, tools in lists.items():
            self.catalog.update(alias, tools)
            self.catalog.gate.settle(alias)


def cpu(work: Callable[[], object]) -> float:
    gc.collect()
    start = time.process_time()
    work()
    return time.process_time() - start


def measure(lists: Lists, repeats: int) -> dict[str, Any]:
    count = sum(len(items) for items in lists.values())
    cpus: dict[str, list[float]] = {}

    def timed(name: str, work: Callable[[], object]) -> None:
        cpus.setdefault(name, []).append(cpu(work))

    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            steps(Path(tmp) / "pins.json", lists, timed)
    heap: dict[str, float] = {}

    def traced(name: str, work: Callable[[], object]) -> None:
        gc.collect()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        work()
        gc.collect()
        now, peak = tracemalloc.get_traced_memory()
        heap[name] = now - before
        heap[name + "_peak"] = peak - before

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pins.json"
        tracemalloc.start()
        try:
            steps(path, lists, traced)
        finally:
            tracemalloc.stop()
        size = path.stat().st_size

    def per_tool(name: str) -> float:
        return statistics.median(cpus[name]) / count * 1e6

    def ms(name: str) -> float:
        return statistics.median(cpus[name]) * 1e3

    return {
        "tools": count,
        "servers": len(lists),
        "first_us": per_tool("first"),
        "load_ms": ms("load"),
        "restart_us": per_tool("restart"),
        "one_changed_us": per_tool("changed"),
        "heap_per_tool": (heap["first"] + heap["write"]) / count,
        "write_ms": ms("write"),
        "write_peak_kib": heap["write_peak"] / 1024,
        "rewrite_ms": ms("rewrite"),
        "rewrite_peak_kib": heap["rewrite_peak"] / 1024,
        "file_kib": size / 1024,
    }


def steps(path: Path, lists: Lists, step: Callable[[str, Callable[[], object]], None]) -> None:
    """Each step measured by ``step(name, work)``."""
    first_sight(path, lists, step)
    again = Run(path)
    step("load", lambda: trio.run(again.pins.load))
    tools = decoded(lists)
    step("restart", lambda: again.install(tools))
    tools = decoded(with_one_changed(lists))
    step("changed", lambda: again.install(tools))
    tools = decoded(with_one_more(lists))
    again.install(tools)
    step("rewrite", lambda: trio.run(again.pins.flush))


def first_sight(
    path: Path, lists: Lists, step: Callable[[str, Callable[[], object]], None]
) -> None:
    run = Run(path)
    tools = decoded(lists)
    step("first", lambda: run.install(tools))
    step("write", lambda: trio.run(run.pins.flush))


SHAPES: dict[str, Callable[[int], Lists]] = {"echo": echo_lists, "peers": peer_lists}


def run(python: str) -> dict[str, Any]:
    """The figures from a process of their own (``python -m bench.pins --json``)."""
    done = subprocess.run(
        [python, "-m", "bench.pins", "--json"], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        return {"skipped": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    out: dict[str, Any] = json.loads(done.stdout)
    return out


HEAD = (
    "  shape    tools   first sight    restart (load)   one changed    heap"
    "   written (peak)     rewritten (peak)    file"
)


def lines(result: dict[str, Any]) -> list[str]:
    if "skipped" in result:
        return [f"  skipped: {result['skipped']}"]
    out = [HEAD]
    for shape, r in result.items():
        out.append(
            f"  {shape:<6} {r['tools']:>7,} {r['first_us']:>9.1f} µs"
            f" {r['restart_us']:>7.1f} µs ({r['load_ms']:>3.0f} ms)"
            f" {r['one_changed_us']:>9.1f} µs {r['heap_per_tool']:>5,.0f} B"
            f" {r['write_ms']:>5.0f} ms ({r['write_peak_kib']:>5,.0f} KiB)"
            f" {r['rewrite_ms']:>5.0f} ms ({r['rewrite_peak_kib']:>5,.0f} KiB)"
            f" {r['file_kib']:>5,.0f} KiB"
        )
    out.append("  (CPU per tool, or in all for the pin file; heap kept per tool)")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.pins", description=__doc__.split("\n\n")[0])
    p.add_argument("--tools", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    logging.disable(logging.CRITICAL)  # the changed lists' journal records
    result = {
        shape: measure(SHAPES[shape](args.tools), args.repeats) for shape in args.shapes.split(",")
    }
    if args.json:
        print(json.dumps(result))
    else:
        print("\n".join(lines(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
