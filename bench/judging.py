"""What judging the status page's sessions against the agents connected costs on the
loop: each time a session draws the page or opens its event stream, every code and
session kept is judged again against every agent connected (``page.passes``).

    .venv/bin/python -m bench.judging [--agents N] [--rounds N]

The worst an agent can arrange: the page's whole bound of sessions, each opened from
a process 64 processes deep, and agents that are each a bridge with a host behind
eight launchers, none kin to any opener (so every one is judged again each time).
Prints milliseconds per judging, the median of the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import trio

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcpd.agents.page.opener import Opener
from mcpd.agents.page.passes import MAX_SESSIONS, Passes
from mcpd.policy.deciders.kin import AgentKin, Decider, Process

LINEAGE = 64
HOSTS = 8


def _opener(first_pid: int) -> Opener:
    lineage = tuple(Process(first_pid + i, 1000 + i) for i in range(LINEAGE))
    return Opener((Decider(lineage, session=first_pid), Decider(lineage, session=first_pid)))


def _agent(n: int) -> AgentKin:
    return AgentKin(
        agents=(Process(900_000 + n, 5),),
        hosts=tuple(Process(910_000 + n * HOSTS + h, 6) for h in range(HOSTS)),
        sessions=frozenset({800_000 + n}),
    )


async def _judging_ms(agents: int, rounds: int) -> float:
    passes = Passes(lambda: "token")
    for n in range(MAX_SESSIONS):
        code = passes.issue(_opener(10_000 + n * 100))
        passes.redeem(code, 0)
    connected = [_agent(n) for n in range(agents)]
    took = []
    for _ in range(rounds):
        began = time.perf_counter()
        passes.judge(connected)
        took.append((time.perf_counter() - began) * 1000)
    return statistics.median(took)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=20)
    p.add_argument("--rounds", type=int, default=50)
    args = p.parse_args()
    ms = trio.run(_judging_ms, args.agents, args.rounds)
    print(
        f"judging {MAX_SESSIONS} sessions (openers {LINEAGE} processes deep) against "
        f"{args.agents} agents (each a bridge with {HOSTS} hosts): {ms:.2f} ms"
    )


if __name__ == "__main__":
    main()
