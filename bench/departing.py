"""What an agent leaving costs on the loop, and what the next decision costs, as the
machine runs more processes: each agent gone is kept while a process of it runs
(``policy.deciders.departed``), and only a decision reads every process on the machine.

    .venv/bin/python -m bench.departing [--processes N,N] [--agents N]

For each count, as many processes more are started (``sleep``, each in a session of
its own) and ``--agents`` agents leave, each a process of its own in a session of its
own, still running as it leaves (the kept list's bound is reached and passed); then
one decision reads who of them runs. Prints microseconds per agent leaving and
milliseconds for that decision, with the number of processes on the machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcpd.policy.deciders.departed import Departed
from mcpd.policy.deciders.kin import AgentKin, decider_of


@contextmanager
def _sleepers(count: int) -> Iterator[list[int]]:
    """``count`` processes, each in a session of its own, until the block ends."""
    with ExitStack() as stack:
        pids = []
        for _ in range(count):
            child = subprocess.Popen(["sleep", "3600"], start_new_session=True)
            stack.callback(child.wait)
            stack.callback(child.kill)
            pids.append(child.pid)
        yield pids


def _on_machine() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def _agents(pids: list[int]) -> list[AgentKin]:
    return [
        AgentKin(agents=decider_of(pid, limit=1).lineage, sessions=frozenset({pid}), uid=1000)
        for pid in pids
    ]


def _measure(more: int, agents: int) -> tuple[int, float, float]:
    with _sleepers(agents) as leaving, _sleepers(more):
        kin = _agents(leaving)
        departed = Departed()
        began = time.perf_counter()
        for one in kin:
            departed.left(one)
        left = time.perf_counter() - began
        began = time.perf_counter()
        departed.living()
        decided = time.perf_counter() - began
        return _on_machine(), left / agents * 1e6, decided * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--processes", default="0,1000", help="processes started more, each run")
    p.add_argument("--agents", type=int, default=300)
    args = p.parse_args()
    for more in (int(n) for n in args.processes.split(",")):
        running, leaving_us, deciding_ms = _measure(more, args.agents)
        print(
            f"{running} processes on the machine: {leaving_us:.1f} us per agent leaving "
            f"({args.agents} agents), {deciding_ms:.1f} ms for the next decision"
        )


if __name__ == "__main__":
    main()
