"""The config entry each MCP host needs to reach mcpd, and a careful merge into its file.

``mcpd connect HOST`` prints or writes one entry: the bridge (``mcpd bridge --profile P``
as a stdio server) or mcpd's HTTP endpoint with an ``Authorization: Bearer`` header.
Per host (``HOSTS`` has each one's documentation page), the user-wide file on Linux
(macOS where it differs), its servers key, and what the model sees of a tool through
an entry named "mcpd":

- claude-code: ``~/.claude.json``, ``mcpServers``; ``mcp__mcpd__<tool>``
- claude-desktop: ``$XDG_CONFIG_HOME/Claude/claude_desktop_config.json`` (no Linux
  build is documented; macOS ``~/Library/Application Support/Claude/...``),
  ``mcpServers``, stdio only; the tool's own name
- cursor: ``~/.cursor/mcp.json``, ``mcpServers``; ``mcp_mcpd_<tool>``
- vscode: ``$XDG_CONFIG_HOME/Code/User/mcp.json`` (macOS ``~/Library/Application
  Support/Code/User/mcp.json``), ``servers`` with a ``type``; ``mcp_mcpd_<tool>``
- gemini-cli: ``~/.gemini/settings.json``, ``mcpServers``; ``mcp_mcpd_<tool>``
- codex: ``${CODEX_HOME:-~/.codex}/config.toml``, ``[mcp_servers.mcpd]``;
  ``mcp__mcpd__<tool>``

JSON files are parsed, updated and written with a 2-space indent, every number, string
and line ending as the file had it (``hostconfig_json``). Codex's TOML is edited as
text: the ``[mcp_servers.NAME]`` table and its sub-tables are replaced in place or
appended, so every comment and byte elsewhere stays, and the result is parsed again to
prove nothing else changed. A file that does not parse is refused, never rewritten;
one with comments or trailing commas (JSONC, as VS Code's) too, as they would be lost.
``hostfile`` finds the file, keeps a backup and replaces it.

The hosts themselves (their files, prefixes and limits) are in ``mcpd.config.tables.hosts``,
which the daemon reads too.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from ...config.importing.jsonc_text import is_jsonc
from ...config.tables.hosts import HOSTS, Host
from .hostconfig_json import NotJSON, Unreadable, dumps, line_ending, loads
from .hostconfig_toml import merge_toml
from .hostfile import HostConfigError, Written, replace_file

_NAME: Final = re.compile(r"^[A-Za-z0-9_-]+$")


class WouldDropComments(HostConfigError):
    """A host's file with comments or trailing commas (JSONC), which a host reads and
    mcpd's writer would drop: it is left as it is, for the entry to be added by hand."""


def host(key: str) -> Host:
    try:
        return HOSTS[key]
    except KeyError:
        raise HostConfigError(f"unknown host {key!r}; one of: {', '.join(HOSTS)}") from None


def config_path(
    key: str, *, home: str | None = None, env: Mapping[str, str] | None = None,
    system: str | None = None,
) -> Path:  # fmt: skip
    """Where the host reads its user-wide MCP servers on this system ("linux"/"darwin")."""
    h = host(key)
    env = os.environ if env is None else env
    home = home or env.get("HOME") or str(Path.home())
    pattern = h.macos if (system or sys.platform) == "darwin" else h.linux
    xdg = env.get("XDG_CONFIG_HOME") or f"{home}/.config"
    codex = env.get("CODEX_HOME") or f"{home}/.codex"
    text = pattern.replace("$XDG", xdg).replace("$CODEX_HOME", codex)
    return Path(f"{home}{text[1:]}" if text.startswith("~") else text)


# -- entries --


class HostEntry(msgspec.Struct, frozen=True):
    """One server entry: its name in the file and its body there."""

    name: str
    body: dict[str, Any]


def entry(
    key: str,
    *,
    name: str = "mcpd",
    bridge_argv: Sequence[str] | None = None,
    url: str | None = None,
    token: str | None = None,
    env: Mapping[str, str] | None = None,
) -> HostEntry:
    """The entry for the bridge (``bridge_argv``, e.g. ``["mcpd", "bridge", "--profile",
    "dev"]``) or for mcpd's HTTP endpoint (``url``, with ``token`` sent as a bearer)."""
    h = host(key)
    if not _NAME.match(name):
        raise HostConfigError(f"entry name {name!r}: use letters, digits, '_' and '-'")
    if (bridge_argv is None) == (url is None):
        raise HostConfigError("give exactly one of a bridge command or a URL")
    body: dict[str, Any]
    if bridge_argv is not None:
        argv = list(bridge_argv)
        if not argv or not all(isinstance(a, str) and a for a in argv):
            raise HostConfigError("the bridge command must be a non-empty list of words")
        if token is not None:
            raise HostConfigError("a token goes with a URL; the bridge uses the socket")
        body = {"command": argv[0], "args": argv[1:]}
        if env:
            body["env"] = dict(env)
        if key in ("claude-code", "vscode"):
            body = {"type": "stdio", **body}
        return HostEntry(name, body)
    assert url is not None
    if not h.urls:
        raise HostConfigError(
            f"{h.title} reads only local (stdio) servers from its file; use the bridge"
        )
    if not re.match(r"^https?://[^\s/]+", url):
        raise HostConfigError(f"{url!r} is not an http:// or https:// URL")
    if env:
        raise HostConfigError("environment variables go with the bridge, not a URL")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if key == "codex":
        body = {"url": url}
        if headers:
            # Codex refuses an inline bearer_token; a static header is what it takes.
            body["http_headers"] = headers
    elif key == "gemini-cli":
        body = {"url": url, "type": "http"}  # as `gemini mcp add --transport http` writes
    elif key == "cursor":
        body = {"url": url}
    else:
        body = {"type": "http", "url": url}
    if headers and key != "codex":
        body["headers"] = headers
    return HostEntry(name, body)


# -- merging --


def merge(key: str, existing: str, new: HostEntry, *, where: str | None = None) -> str:
    """``existing`` with ``new`` added, or put in place of the entry of that name;
    every other entry and key is kept. Raises HostConfigError, naming ``where`` (the
    file) when given, if ``existing`` does not parse or has a shape the host would not
    read."""
    h = host(key)
    about = h.title if where is None else f"{h.title}'s {where}"
    if h.fmt == "toml":
        try:
            return merge_toml(existing, h.servers_key, new.name, new.body)
        except ValueError as exc:
            raise HostConfigError(f"{about}: {exc}") from None
    return _merge_json(h, about, existing, new)


def _merge_json(h: Host, about: str, existing: str, new: HostEntry) -> str:
    doc: object = {}
    if existing.strip():
        try:
            doc = loads(existing)
        except NotJSON as exc:
            if not is_jsonc(existing):
                raise HostConfigError(
                    f"{about}: not valid JSON: {exc}; fix it or add the entry by hand"
                ) from None
            raise WouldDropComments(
                f"{about}: holds comments or trailing commas, which {h.title} reads but "
                f"writing the file back would drop; nothing is written: add the entry "
                f"to its {h.servers_key!r} object by hand"
            ) from None
        except Unreadable as exc:
            raise HostConfigError(f"{about}: {exc}") from None
    if not isinstance(doc, dict):
        raise HostConfigError(f"{about}: the file holds {type(doc).__name__}, not an object")
    servers = doc.setdefault(h.servers_key, {})
    if not isinstance(servers, dict):
        raise HostConfigError(f"{about}: {h.servers_key!r} is not an object")
    servers[new.name] = new.body  # an existing entry keeps its place
    try:
        return dumps(doc, eol=line_ending(existing))
    except Unreadable as exc:
        raise HostConfigError(f"{about}: {exc}") from None


# -- writing --


def write_host_config(
    key: str, path: str | os.PathLike[str], new: HostEntry, *, secret: bool = False
) -> Written:
    """Merge ``new`` into the file at ``path``: the old file is kept as
    ``FILE.bak-YYYYmmddHHMMSS``, the new one replaces it atomically with the same mode
    (0600 for a new file: it may hold a token). With ``secret`` (the entry holds a
    token), neither keeps any access for group or others. Nothing is written if
    nothing changes."""
    where = os.fspath(path)
    return replace_file(path, lambda before: merge(key, before, new, where=where), private=secret)
