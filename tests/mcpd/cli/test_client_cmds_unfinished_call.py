"""``mcpd call`` on a 2026-07-28 server that answers ``input_required`` asking for
nothing but to be called again: the command says the call did not finish and exits 1,
with ``--json`` too, instead of printing nothing as if it had."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from tests.support.clients.agent import make_config, running
from tests.support.daemons.pins import cli

CANNED = Path(__file__).resolve().parents[2] / "support" / "servers" / "canned.py"
UNFINISHED = {"resultType": "input_required", "requestState": "again-later"}


async def test_a_call_answered_input_required_asking_nothing_is_said_not_to_have_finished(
    tmp_path: Path,
) -> None:
    answers = tmp_path / "answers.json"
    done = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
    answers.write_text(json.dumps({"tools": {"again": UNFINISHED, "fine": done}}))
    server = {"command": sys.executable, "args": [str(CANNED), str(answers)]}
    cfg = make_config(tmp_path, {"busy": server}, state_dir=str(tmp_path / "state"))
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            code, out, err = await cli(sock, "call", "mcp__busy__again", "{}")
            assert code == 1, (out, err)
            assert out == ""
            assert (
                "mcpd: the call of mcp__busy__again did not finish: its server asked to be "
                "called again with the state it returned (it may be busy); nothing was returned"
            ) in err
            code, out, err = await cli(sock, "call", "mcp__busy__again", "{}", "--json")
            assert code == 1 and "did not finish" in err
            assert json.loads(out)["resultType"] == "input_required"
            code, out, err = await cli(sock, "call", "mcp__busy__fine", "{}")
            assert (code, out) == (0, "done\n"), err
