"""A legacy agent's call whose 2026-07-28 server answers ``input_required`` asking
nothing, only to be called again with its ``requestState``, through a running daemon:
mcpd calls again for the agent, and each call again is looked at first by the rules
and the tool as they are then, as every round after the first is. So it is whether
the call began without a task (its agent declared nothing a server may ask: it goes
on in a task from that answer) or in one (its agent declared elicitation)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.answering import connect_answering
from tests.support.daemons.policy import text
from tests.support.daemons.rounds import LIMIT, rounds_daemon

SHEDDING = str(Path(__file__).parents[3] / "support" / "asking" / "shedding_server.py")
BUSY = "mcp__s__busy"
DENY = [{"tools": ["s/busy"], "action": "deny", "reason": "no more load"}]
# What a reload changes, and the words the call ends with, unsent; and its record's
# (decision, decided_by).
CHANGES = [
    (DENY, (), f"policy changed while the call to '{BUSY}' waited", ("deny", "policy[0]")),
    # Its name stands for nothing now: as if its tool were gone.
    (
        [],
        ("[naming]", 'template = "tools__{alias}__{tool}"'),
        "it is no longer listed",
        ("allow", "default"),
    ),
]


@pytest.mark.parametrize(("rules", "more", "said", "decided"), CHANGES)
@pytest.mark.parametrize("capabilities", [{}, {"elicitation": {}}])
async def test_a_reload_while_a_shed_call_is_at_its_server_is_met_before_it_is_sent_again(
    tmp_path: Path,
    capabilities: dict[str, Any],
    rules: list[dict[str, Any]],
    more: tuple[str, ...],
    said: str,
    decided: tuple[str, str],
) -> None:
    (tmp_path / "gate").mkdir()  # apart from the config, which a sandbox hides
    gate = tmp_path / "gate" / "pipe"
    os.mkfifo(gate)
    server = (sys.executable, SHEDDING, "--busy", "1", "--gate", str(gate))
    with trio.fail_after(LIMIT):
        async with (
            rounds_daemon(tmp_path, [], server=server) as setup,
            connect_answering(setup.daemon.socket_path, False) as agent,
        ):
            await agent.initialize_with(capabilities)
            got: list[dict[str, Any]] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    got.append(await agent.rpc("tools/call", {"name": BUSY, "arguments": {}}))

                nursery.start_soon(call)
                # Open once the first round is at the server, which answers it once closed.
                held = await trio.to_thread.run_sync(open, gate, "w", abandon_on_cancel=True)
                await setup.reload(rules, *more)
                held.close()
            [reply] = got
            result = reply["result"]
            assert result.get("isError") is True, text(result)
            assert said in text(result)
            [record] = await setup.records(BUSY)
            assert (record.decision, record.decided_by, record.outcome) == (*decided, "refused")
