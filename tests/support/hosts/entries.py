"""Each host's documented config entry, and the Gemini CLI reading what mcpd wrote."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[3]


STRINGS = {"type": "array", "items": {"type": "string"}}


STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}


def obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON Schema object with exactly these fields."""
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": list(required),
        "additionalProperties": False,
    }


# Each host's documented server entry. Optional fields mcpd never writes (cwd, timeout,
# envFile, trust, ...) are left out, so anything unexpected fails.
STDIO_OPTIONAL = {"args": STRINGS, "env": STRING_MAP}


DOCUMENTED: dict[str, dict[str, Any]] = {
    # https://code.claude.com/docs/en/mcp ("type", "command", "args", "env"; "type":
    # "http" with "url" and "headers"); `claude mcp add` 2.1.332 writes the same keys.
    "claude-code": {
        "key": "mcpServers",
        "stdio": obj({"type": {"const": "stdio"}, "command": {"type": "string"}}, STDIO_OPTIONAL),
        "url": obj({"type": {"const": "http"}, "url": {"type": "string"}}, {"headers": STRING_MAP}),
    },
    # https://modelcontextprotocol.io/docs/develop/connect-local-servers: command, args,
    # env; remote servers are added in the app (Settings > Connectors), not in this file.
    "claude-desktop": {
        "key": "mcpServers",
        "stdio": obj({"command": {"type": "string"}}, STDIO_OPTIONAL),
        "url": None,
    },
    # https://cursor.com/docs/context/mcp: command/args/env for stdio; url and headers
    # for a remote server.
    "cursor": {
        "key": "mcpServers",
        "stdio": obj({"command": {"type": "string"}}, STDIO_OPTIONAL),
        "url": obj({"url": {"type": "string"}}, {"headers": STRING_MAP}),
    },
    # https://code.visualstudio.com/docs/copilot/reference/mcp-configuration: "servers";
    # "type" is required: "stdio" with "command", or "http" with "url" (+ "headers").
    "vscode": {
        "key": "servers",
        "stdio": obj({"type": {"const": "stdio"}, "command": {"type": "string"}}, STDIO_OPTIONAL),
        "url": obj({"type": {"const": "http"}, "url": {"type": "string"}}, {"headers": STRING_MAP}),
    },
    # https://geminicli.com/docs/tools/mcp-server/: command/args/env; for Streamable
    # HTTP `gemini mcp add --transport http` 0.61.0 writes "url" + "type": "http" (the
    # older "httpUrl" is reported as deprecated when both are given).
    "gemini-cli": {
        "key": "mcpServers",
        "stdio": obj({"command": {"type": "string"}}, STDIO_OPTIONAL),
        "url": obj({"url": {"type": "string"}, "type": {"const": "http"}}, {"headers": STRING_MAP}),
    },
    # https://developers.openai.com/codex/mcp/: [mcp_servers.NAME] with command (args,
    # env), or url with http_headers; an inline bearer_token is refused by Codex.
    "codex": {
        "key": "mcp_servers",
        "stdio": obj({"command": {"type": "string"}}, STDIO_OPTIONAL),
        "url": obj({"url": {"type": "string"}}, {"http_headers": STRING_MAP}),
    },
}


def parsed(key: str, text: str) -> dict[str, Any]:
    out: dict[str, Any] = tomllib.loads(text) if key == "codex" else json.loads(text)
    return out


GEMINI = ROOT / "tests" / "host_programs" / "node_modules" / ".bin" / "gemini"


def gemini_env(home: Path) -> dict[str, str]:
    node22 = ROOT / "tests" / "peers" / "node_modules" / ".bin"
    return {"HOME": str(home), "PATH": f"{node22}:{os.environ.get('PATH', '')}"}


async def gemini_list(home: Path, cwd: Path) -> str:
    out = await trio.run_process(
        [str(GEMINI), "mcp", "list"],
        env=gemini_env(home),
        cwd=cwd,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return out.stdout.decode() + out.stderr.decode()
