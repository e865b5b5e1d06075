"""``mcpd import -o`` writes a config that works as it is: the guide's sample Claude
Desktop config, with a token in a server's env and an API key in a remote server's
header, imported, checked and served with no extra step; the secrets are in files of
their own (0600), not in the TOML, and the header reaches the server."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import META, connect
from tests.support.daemons.sandboxed import HOSTILE
from tests.support.http_servers.serving import Responder, SeenRequest, serve_http

ROOT = Path(__file__).resolve().parents[4]
MCPD = [sys.executable, "-m", "mcpd"]


def readme_sample() -> dict[str, Any]:
    """The JSON config the guide shows under "Bringing in another host's servers"."""
    text = (ROOT / "docs" / "guide.md").read_text()
    section = text[text.index("## Bringing in another host's servers") :]
    block = re.search(r"```json\n(.*?)\n```", section, re.S)
    assert block is not None
    sample: dict[str, Any] = json.loads(block.group(1))
    return sample


class Tickets:
    """A modern MCP server over HTTP that notes the API key each request carried."""

    def __init__(self) -> None:
        self.keys: list[str | None] = []

    async def __call__(self, req: SeenRequest, respond: Responder) -> None:
        self.keys.append(req.header("x-api-key"))
        msg = req.message
        if "id" not in msg:
            await respond.reply(202)
            return
        value: dict[str, Any]
        if msg["method"] == "server/discover":
            value = {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "ttlMs": 0,
                "cacheScope": "private",
            }
        elif msg["method"] == "tools/list":
            schema = {"type": "object", "properties": {"query": {"type": "string"}}}
            value = {"tools": [{"name": "search", "inputSchema": schema}]}
        else:
            value = {"content": [{"type": "text", "text": "3 open tickets"}]}
        body = {"jsonrpc": "2.0", "id": msg["id"], "result": {"resultType": "complete", **value}}
        await respond.json(body)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCPD, *args], capture_output=True, text=True, timeout=60)


async def test_the_readme_sample_imports_checks_and_serves(tmp_path: Path) -> None:
    sample = readme_sample()
    key = sample["mcpServers"]["tickets"]["headers"]["X-API-Key"]
    token = sample["mcpServers"]["github"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"]
    tickets = Tickets()
    async with serve_http(tickets) as http:
        # Offline stand-ins where the sample names things from the internet.
        sample["mcpServers"]["tickets"]["url"] = http.url()
        # A server that says what it sees: its environment, the files around it.
        sample["mcpServers"]["github"].update(command=sys.executable, args=[HOSTILE])
        source = tmp_path / "claude_desktop_config.json"
        source.write_text(json.dumps(sample))
        config = tmp_path / "mcpd" / "config.toml"
        config.parent.mkdir()

        made = await trio.to_thread.run_sync(run, "import", str(source), "-o", str(config))
        assert made.returncode == 0, made.stderr
        text = config.read_text()
        assert key not in text and token not in text
        secrets = tmp_path / "mcpd" / "config.secrets"
        assert f"${{file:{secrets}/tickets.headers.X-API-Key}}" in text
        assert stat.S_IMODE(os.stat(secrets).st_mode) == 0o700
        files = sorted(secrets.iterdir())
        assert [f.name for f in files] == [
            "github.env.GITHUB_PERSONAL_ACCESS_TOKEN",
            "tickets.headers.X-API-Key",
        ]
        assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
        assert "2 secret(s) moved to" in made.stderr
        assert f"servers.tickets.headers.X-API-Key -> {secrets}" in made.stderr
        assert key not in made.stderr and token not in made.stderr

        checked = await trio.to_thread.run_sync(run, "check-config", "--config", str(config))
        assert checked.returncode == 0, checked.stderr
        assert "OK, 3 server(s)" in checked.stdout

        sock = tmp_path / "mcpd.sock"
        with trio.fail_after(60):
            proc = await trio.lowlevel.open_process(
                [*MCPD, "serve", "--config", str(config), "--socket", str(sock)],
                stderr=subprocess.DEVNULL,
            )
            try:
                while not sock.exists():
                    await trio.sleep(0.05)
                async with connect(str(sock)) as agent:
                    reply = await agent.rpc(
                        "tools/call",
                        {"name": "mcp__tickets__search", "arguments": {}, "_meta": META},
                    )
                    assert reply["result"]["content"][0]["text"] == "3 open tickets"
                    # The stdio server got its token through its sandbox (what it
                    # sends back of it is masked, whose it is named), and cannot read
                    # the file mcpd read it from.
                    seen = await agent.call(
                        "mcp__github__getenv", {"name": "GITHUB_PERSONAL_ACCESS_TOKEN"}
                    )
                    marker = "[secret of servers.github.env.GITHUB_PERSONAL_ACCESS_TOKEN]"
                    assert seen["content"][0]["text"] == f"ok: {marker}"
                    assert token not in str(seen)
                    file = secrets / "github.env.GITHUB_PERSONAL_ACCESS_TOKEN"
                    seen = await agent.call("mcp__github__read_file", {"path": str(file)})
                    assert seen["content"][0]["text"].startswith("refused:")
            finally:
                proc.terminate()
                await proc.wait()
    # Every request the server saw carried the key, as the original config had it.
    assert tickets.keys and set(tickets.keys) == {key}
