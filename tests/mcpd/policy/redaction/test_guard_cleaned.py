"""A secret a server splits with a character mcpd's cleaning takes out (a zero-width
space, a BEL, a right-to-left override) is whole in none of its bytes, but whole in
what cleaning makes of them: every listed text (instructions, a tool's title,
description and schema, a prompt's and a resource's description) is masked after it
is cleaned, and counted, for an agent of either era and in ``mcpd tools``. A tool or
a prompt whose local name would be the secret (``ghp.x`` made ``ghp_x``) is left out,
saying why, and counted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.registry.gating.gate import ListGate
from tests.support.clients.agent import connect, make_config, running
from tests.support.hostile.splitting_server import LEAK_ENV, SPLIT_ENV
from tests.support.parts.gate_lists import approved_server, tool, tools
from tests.support.parts.status_rows import status_text

SPLITTING = str(Path(__file__).parents[3] / "support" / "hostile" / "splitting_server.py")
LIMIT = 60
# Another server's secret, as if the splitting server had stolen it; with a ``_``, as
# many tokens have, for a name to be made of.
SECRET = "ghp_Split7kQ2mW9xT4vL8nB3"
WHOSE = "servers.other.env.API_TOKEN"
MARKER = f"[secret of {WHOSE}]"
SPLITS = {"zero-width space": "\u200b", "BEL": "\u0007", "right-to-left override": "\u202e"}


def texts_of(value: Any) -> list[str]:
    return [json.dumps(value, ensure_ascii=False), json.dumps(value)]


@pytest.mark.parametrize("split", SPLITS.values(), ids=SPLITS.keys())
async def test_a_secret_split_by_what_cleaning_takes_out_reaches_no_agent(
    tmp_path: Path, split: str
) -> None:
    servers: dict[str, Any] = {
        "split": {
            "command": sys.executable,
            "args": [SPLITTING],
            "env": {LEAK_ENV: SECRET, SPLIT_ENV: split},
        },
        "other": {"command": "true", "env": {"API_TOKEN": SECRET}, "enabled": False},
    }
    cfg = make_config(tmp_path, servers)
    seen: list[str] = []
    with trio.fail_after(LIMIT):
        async with (
            running(cfg) as daemon,
            connect(daemon.socket_path) as modern,
            connect(daemon.socket_path, modern=False) as legacy,
        ):
            greeting = await legacy.initialize()
            discovered = await modern.result("server/discover")
            for agent, said in ((modern, discovered), (legacy, greeting)):
                assert f"use {MARKER}" in said["instructions"]
                listed = {t["name"]: t for t in await agent.tools()}
                assert list(listed) == ["mcp__split__search"]
                search = listed["mcp__split__search"]
                assert MARKER in search["title"] and MARKER in search["description"]
                assert search["inputSchema"]["properties"]["q"]["description"] == f"q {MARKER}"
                prompts = (await agent.result("prompts/list"))["prompts"]
                assert [p["name"] for p in prompts] == ["mcp__split__greet"]
                assert MARKER in prompts[0]["description"]
                (resource,) = (await agent.result("resources/list"))["resources"]
                assert MARKER in resource["description"]
                seen += texts_of([said, listed, prompts, resource])
            argv = [sys.executable, "-m", "mcpd", "tools", "--socket", daemon.socket_path]
            printed = (await trio.run_process(argv, capture_stdout=True)).stdout.decode()
            status = await modern.result("mcpd/status")
    # Its description cut to the width of the table, after the marker begins.
    assert "mcp__split__search" in printed and "finds [secret of servers.other" in printed
    shown = status_text(status)
    seen += [printed, shown, *texts_of(status)]
    assert [text for text in seen if SECRET in text] == []
    (row,) = [r for r in status["servers"] if r["alias"] == "split"]
    # Six texts, and the names of a tool and a prompt.
    assert row["secrets_masked"] == {WHOSE: 8}
    assert shown.count("(named after a secret): the name agents would know it by") == 2


def test_an_approved_definition_shown_while_its_change_waits_is_masked_once_cleaned() -> None:
    known = KnownSecrets()
    known.replace("config", [HeldSecret(WHOSE, SECRET)])
    guard = SecretGuard(known)
    gate = ListGate(masking=guard)
    approved_server(gate, "notes", tool("search", f"finds {SECRET[:5]}\u200b{SECRET[5:]}"))
    verdicts = gate.tools("notes", tools(tool("search", "finds more")))
    assert list(verdicts.held) == ["search"]
    assert verdicts.shown["search"].description == f"finds {MARKER}"
    assert guard.masked("notes") == {WHOSE: 2}  # as first listed, and as approved
