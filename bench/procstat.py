"""CPU time and memory of a process tree, read from /proc (Linux only)."""

from __future__ import annotations

import os
from collections.abc import Iterable

TICK = 1.0 / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces or parentheses itself.
    return raw[raw.rindex(b")") + 2 :].decode().split()


def descendants(roots: Iterable[int]) -> set[int]:
    """The roots and every live process below them."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    todo = [p for p in roots if os.path.exists(f"/proc/{p}")]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def cpu_seconds(roots: Iterable[int]) -> float:
    """user+system time of the tree, including children it has already reaped.

    A child that exits and is reaped inside the tree moves from its own counters into its
    parent's cutime/cstime, so the sum stays consistent between two snapshots.
    """
    ticks = 0
    for pid in descendants(roots):
        fields = _stat_fields(pid)
        if fields is not None:
            ticks += sum(int(x) for x in fields[11:15])
    return ticks * TICK


def process_cpu_seconds(pid: int) -> float:
    """user+system time of one process alone."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) * TICK if fields else 0.0


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of one process, in KiB (zeros if it is gone)."""
    out = {"rss_kb": 0, "hwm_kb": 0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out["rss_kb"] = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    out["hwm_kb"] = int(line.split()[1])
    except OSError:
        pass
    return out


def tree_memory_kb(roots: Iterable[int]) -> dict[str, int]:
    """Sums over the tree (the processes share little, so the sum is a fair upper bound)."""
    total = {"rss_kb": 0, "hwm_kb": 0, "processes": 0}
    for pid in descendants(roots):
        m = memory_kb(pid)
        total["rss_kb"] += m["rss_kb"]
        total["hwm_kb"] += m["hwm_kb"]
        total["processes"] += 1
    return total


def sum_memory_kb(pids: Iterable[int]) -> dict[str, int]:
    """VmRSS and VmHWM summed over exactly these processes, and how many were alive."""
    total = {"rss_kb": 0, "hwm_kb": 0, "processes": 0}
    for pid in pids:
        m = memory_kb(pid)
        if m["rss_kb"]:
            total["rss_kb"] += m["rss_kb"]
            total["hwm_kb"] += m["hwm_kb"]
            total["processes"] += 1
    return total


def children(pid: int) -> list[int]:
    """The live direct children of a process, oldest first."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and int(fields[1]) == pid:
                found.append((int(fields[19]), int(entry)))  # start time, pid
    return [child for _, child in sorted(found)]


def command_name(pid: int) -> str:
    """What a process runs: the first word of its command line that names an MCP server
    (``python .../mcp-server-time``, ``node .../mcp-server-memory``), else its program."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [os.path.basename(a.decode(errors="replace")) for a in f.read().split(b"\0")]
    except OSError:
        return "?"
    for word in argv:
        if "mcp" in word:
            return word
    return argv[0] if argv else "?"


def sum_pss_kb(pids: Iterable[int]) -> int:
    """Proportional set size summed over these processes: a page shared by k processes
    counts 1/k in each, so unlike summed RSS the shared interpreter is not counted N times."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total
