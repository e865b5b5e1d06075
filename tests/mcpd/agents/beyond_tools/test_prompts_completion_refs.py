"""What a completion's ``ref/resource`` names, in a running daemon: a resource template
only, as the agent was listed it or as its server wrote it when only one server has
it; never a URI, which another server's catch-all template would take (with what the
user typed). ``good`` has ``secret://vault/{name}``, ``evil`` a template that matches
anything, and both ``notes://{id}``. A completion offers a hundred values at most, and
a prompt's arguments are strings, or it is refused before its server is asked."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from mcpd.config.loading.load import load
from tests.support.clients.agent import Agent, connect, running

LIMIT = 60
SERVER = str(Path(__file__).resolve().parents[3] / "support" / "uris" / "shared_uri_server.py")
SECRET = "secret://vault/{name}"


def server(name: str, templates: str) -> str:
    args = [SERVER, name, "", templates, "hello"]
    return f"[servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\n"


async def completing(agent: Agent, uri: str, typed: str = "typed by the user") -> dict[str, Any]:
    ref = {"type": "ref/resource", "uri": uri}
    params = {"ref": ref, "argument": {"name": "name", "value": typed}}
    return await agent.rpc("completion/complete", params)


async def test_a_template_is_completed_by_its_own_server_and_a_uri_by_none(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcpd.toml"
    path.write_text(
        f'[daemon]\nsocket = "{tmp_path / "mcpd.sock"}"\nstartup_deadline = 20\n'
        + server("good", f"{SECRET},notes://{{id}}")
        + server("evil", "{+path},notes://{id}")
    )
    with trio.fail_after(LIMIT):
        async with running(load(path), str(path)) as daemon, connect(daemon.socket_path) as agent:
            listed = await agent.result("resources/templates/list")
            handed = sorted(t["uriTemplate"] for t in listed["resourceTemplates"])
            assert f"mcpd://good/{SECRET}" in handed and SECRET not in handed
            for named in (SECRET, f"mcpd://good/{SECRET}"):
                reply = await completing(agent, named)
                assert reply["result"]["completion"]["values"] == ["good"], named
            for named in ("secret://vault/x", "mcpd://good/secret://vault/{other}", "{+path}x"):
                reply = await completing(agent, named)
                assert reply["error"]["code"] == -32602, named
                assert reply["error"]["message"].startswith("Unknown resource template"), named
            # Past what a completion may offer: cut, and said to have more.
            offered = (await completing(agent, SECRET, "all"))["result"]["completion"]
            assert offered["values"] == [f"good-{i}" for i in range(100)]
            assert offered["hasMore"] is True and offered["total"] == 100_000
            for arguments in ([1], {"day": 3}, {"day": {"nested": "x"}}):
                params = {"name": "mcp__good__hello", "arguments": arguments}
                refused = (await agent.rpc("prompts/get", params))["error"]
                assert refused["code"] == -32602, arguments
                assert "day" in refused["message"] or "array" in refused["message"]
            reply = await completing(agent, "notes://{id}")
            assert reply["error"]["code"] == -32602
            assert reply["error"]["data"]["candidates"] == [
                "mcpd://evil/notes://{id}",
                "mcpd://good/notes://{id}",
            ]
