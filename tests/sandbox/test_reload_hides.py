"""A reload that hides more from every server (a secret file the new config reads)
restarts the sandboxed servers already running: a process keeps the sandbox it was
started with, and one started before the file was named would read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    SECRET,
    agent_of,
    hostile,
    serving,
    steady,
    text,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)


async def test_a_secret_file_a_reload_names_is_hidden_from_servers_already_running(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "vault-token"
    secret.write_text("vault-s3cret\n")
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            read = {"path": str(secret)}
            # Named by nothing yet: the default sandbox shares the user's files.
            seen = text(await agent.call("mcp__hostile__read_file", read))
            assert "vault-s3cret" in seen
            config = tmp_path / "mcpd.toml"
            vault = '[servers.vault]\nurl = "http://127.0.0.1:9/mcp"\n'
            vault += f'headers = {{ X-Api-Key = "${{file:{secret}}}" }}\n'
            config.write_text(config.read_text() + vault)
            report = await agent.result("mcpd/reload")
            assert report["added"] == ["vault"]
            assert "hostile" in report["changed"]
            await wait_ready(agent, "hostile")
            got = text(await agent.call("mcp__hostile__read_file", read))
            assert "vault-s3cret" not in got and got.startswith("refused:"), got


async def test_a_reload_that_makes_an_inherited_variable_another_servers_secret_restarts(
    tmp_path: Path,
) -> None:
    inheriting = hostile(inherit_env=["TICKETS_*"])
    with serving(tmp_path, {"hostile": inheriting, "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            token = {"name": "TICKETS_TOKEN"}
            # The tickets server's secret: withheld from the pattern it matches.
            assert text(await agent.call("mcp__hostile__getenv", token)).startswith("refused:")
            with_tickets = d.config.read_text()
            without, _, _ = with_tickets.partition("[servers.tickets]")
            d.config.write_text(without)
            report = await agent.result("mcpd/reload")
            assert report["removed"] == ["tickets"]
            assert report["changed"] == ["hostile"], report
            assert report["why"] == {"hostile": "the environment it gets changed"}
            await wait_ready(agent, "hostile")
            assert text(await agent.call("mcp__hostile__getenv", token)) == f"ok: {SECRET}"
            d.config.write_text(with_tickets)
            report = await agent.result("mcpd/reload")
            assert report["added"] == ["tickets"]
            assert report["changed"] == ["hostile"], report
            await wait_ready(agent, "hostile")
            got = text(await agent.call("mcp__hostile__getenv", token))
            assert SECRET not in got and got.startswith("refused:"), got
