"""The MCP hosts mcpd connects to: where each keeps its servers, what it puts before a
tool's name, how long a name it passes on whole, how many tools it takes, and the
profile named after each, which every daemon has unless its config defines one of that
name (``builtin_profiles``). So the entry ``mcpd connect HOST`` prints works
against any daemon, the demo included, without writing anything into mcpd's config.

A host's profile offers what the default profile offers (its servers, patterns and
pinned tools), named ``{alias}__{tool}`` within the room the host's prefix leaves for
an entry named "mcpd" (``mcp__mcpd__git__git_status`` through Claude Code), and for a
host with a tool cap, tool search above it. It is derived from the default profile, so
a config that narrows the default narrows what every host sees too.

Hosts cut or drop tool names that are too long: 64 characters with the prefix (Gemini
CLI 63; Cursor wants the entry name plus the tool name under 60). ``max_tool_name`` is
the room left for mcpd's local names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal

import msgspec

from .profiles import DEFAULT_PROFILE, EVERYTHING, ProfileConfig

# Names under a host's profile: the host's prefix already says they come through mcpd.
TEMPLATE: Final = "{alias}__{tool}"
ENTRY_NAME: Final = "mcpd"  # what mcpd connect names its entry unless told otherwise


class Host(msgspec.Struct, frozen=True):
    key: str
    title: str
    docs: str  # the page the format and paths come from
    fmt: Literal["json", "toml"]
    servers_key: str
    linux: str  # "~" is the home; "$XDG" the XDG config dir; "$CODEX_HOME" Codex's
    macos: str
    urls: bool  # whether the file takes an HTTP server
    prefix: str  # "{name}" is the entry's name, as the host cleans it
    max_name: int  # the longest tool name the host passes on whole
    # The most tools the host is known to take; above it its profile searches.
    tool_cap: int | None = None


HOSTS: Final[dict[str, Host]] = {
    h.key: h
    for h in (
        Host(
            "claude-code", "Claude Code", "https://code.claude.com/docs/en/mcp",
            "json", "mcpServers", "~/.claude.json", "~/.claude.json",
            True, "mcp__{name}__", 64,
        ),
        Host(
            "claude-desktop", "Claude Desktop",
            "https://modelcontextprotocol.io/docs/develop/connect-local-servers",
            "json", "mcpServers", "$XDG/Claude/claude_desktop_config.json",
            "~/Library/Application Support/Claude/claude_desktop_config.json",
            False, "", 64,
        ),
        Host(
            "cursor", "Cursor", "https://cursor.com/docs/context/mcp",
            "json", "mcpServers", "~/.cursor/mcp.json", "~/.cursor/mcp.json",
            True, "mcp_{name}_", 64, 40,
        ),
        Host(
            "vscode", "VS Code", "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration",
            "json", "servers", "$XDG/Code/User/mcp.json",
            "~/Library/Application Support/Code/User/mcp.json",
            True, "mcp_{name}_", 64, 128,
        ),
        Host(
            "gemini-cli", "Gemini CLI", "https://geminicli.com/docs/tools/mcp-server/",
            "json", "mcpServers", "~/.gemini/settings.json", "~/.gemini/settings.json",
            True, "mcp_{name}_", 63,
        ),
        Host(
            "codex", "Codex", "https://developers.openai.com/codex/mcp/",
            "toml", "mcp_servers", "$CODEX_HOME/config.toml", "$CODEX_HOME/config.toml",
            True, "mcp__{name}__", 64,
        ),
    )
}  # fmt: skip


def host_prefix(key: str, name: str = ENTRY_NAME) -> str:
    """What the host puts before a tool's name when it shows it to the model."""
    h = HOSTS[key]
    if key == "vscode":
        # Lower case, other runs to "_", the whole prefix at most 18 characters. Since
        # mid-2026 VS Code starts from the server's announced title ("mcpd" for mcpd)
        # rather than the entry's key: the same for an entry named "mcpd".
        clean = re.sub(r"[^a-z0-9_.-]+", "_", name.lower())[: 18 - len("mcp_") - 1]
    elif key == "gemini-cli":
        clean = re.sub(r"[^A-Za-z0-9_.:-]", "_", name)
    else:
        clean = re.sub(r"[^A-Za-z0-9_-]", "_", name)
    return h.prefix.replace("{name}", clean)


def max_tool_name(key: str, name: str = ENTRY_NAME) -> int:
    """The longest local tool name that reaches the model whole through this host."""
    return HOSTS[key].max_name - len(host_prefix(key, name))


def host_profile(key: str, default: ProfileConfig, name: str = ENTRY_NAME) -> ProfileConfig:
    """The profile for ``key``'s entry named ``name``: ``default``'s choice of servers
    and tools under names that fit beside the host's prefix."""
    h = HOSTS[key]
    template, max_length = default.template, default.max_length
    if host_prefix(key, name):
        room = max_tool_name(key, name)
        template, max_length = TEMPLATE, min(room, default.max_length or room)
    max_tools, discovery = default.max_tools, default.discovery
    if h.tool_cap is not None:
        max_tools = min(h.tool_cap, default.max_tools or h.tool_cap)
        discovery = "auto" if default.discovery == "all" else default.discovery
    return msgspec.structs.replace(
        default,
        template=template,
        max_length=max_length,
        max_tools=max_tools,
        discovery=discovery,
    )


def builtin_profiles(configured: Mapping[str, ProfileConfig]) -> dict[str, ProfileConfig]:
    """The hosts' profiles that ``configured`` (a config's profiles) does not define."""
    default = configured.get(DEFAULT_PROFILE, EVERYTHING)
    return {key: host_profile(key, default) for key in HOSTS if key not in configured}
