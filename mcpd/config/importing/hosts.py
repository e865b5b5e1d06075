"""The hosts whose server entries differ from the common ``command``/``url`` shape.

``normalize`` rewrites one entry into that shape and returns, apart, what it says
that mcpd keeps in settings of its own (which tools are seen, a call's time limit,
trust). The common keys are then converted like any other host's.

- Windsurf (``~/.codeium/windsurf/mcp_config.json``): a remote server is
  ``serverUrl``; ``disabledTools`` names tools the user turned off.
- Gemini CLI (``.gemini/settings.json``): ``httpUrl`` is Streamable HTTP, while a
  ``url`` without a ``type`` is the old HTTP+SSE transport; ``timeout`` is in
  milliseconds; ``trust`` marks a server the user trusts; ``includeTools`` and
  ``excludeTools`` choose tools; ``$VAR`` is expanded like ``${VAR}``. A file is read
  with these meanings when it is in a ``.gemini`` folder.
- Zed (``settings.json``, ``context_servers``): ``command`` is a string with
  ``args``/``env`` beside it, or, in older files, an object with ``path``, ``args``
  and ``env``; ``enabled: false`` turns a server off. A server an extension provides
  has only ``settings`` and cannot be started without that extension.

Every host's file may also hold the entry ``mcpd connect`` wrote there (``mcpd bridge``):
the host's way to mcpd, which as a server of mcpd would only lead back to mcpd.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from pathlib import Path, PurePath
from typing import Final, Literal

import msgspec

from protocol.jsonrpc import messages as rpc

from .jsonc import kind_in_words, quoted_or_sized

Dialect = Literal["common", "gemini", "zed"]

_GLOB: Final = re.compile(r"([*?\[])")


class HostSettings(msgspec.Struct, kw_only=True):
    """What an entry sets that maps to mcpd's own server keys."""

    allow: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)
    call_timeout: float | None = None
    trusted: bool = False
    transport: Literal["http", "sse"] | None = None

    def apply(self, table: rpc.JsonObject) -> None:
        """Put these settings into a server's mcpd table."""
        tools: rpc.JsonObject = {
            k: list[rpc.Json](v) for k, v in (("allow", self.allow), ("deny", self.deny)) if v
        }
        if tools:
            table["tools"] = tools
        if self.call_timeout is not None:
            table["call_timeout"] = self.call_timeout
        if self.trusted:
            table["trusted"] = True
        if self.transport is not None and "url" in table:
            table["transport"] = self.transport


def dialect_of(source: str, where: str) -> Dialect:
    """Which host's meanings apply to an entry found at ``where`` in ``source``."""
    if where.startswith("context_servers."):
        return "zed"
    # The folder as the user sees it: a settings.json linked from a dotfiles repository
    # is still Gemini's.
    if Path(os.path.abspath(source)).parent.name == ".gemini":
        return "gemini"
    return "common"


def workspace_of(source: str) -> str | None:
    """The project folder a workspace file belongs to, for ${workspaceFolder}."""
    p = Path(os.path.abspath(source))  # as given: a link's target is in another folder
    if p.parent.name in (".vscode", ".cursor"):
        return str(p.parent.parent)
    if p.name == ".mcp.json":
        return str(p.parent)
    return None


def normalize(
    body: rpc.JsonObject, where: str, dialect: Dialect, notes: list[str]
) -> tuple[rpc.JsonObject, HostSettings] | None:
    """``body`` in the common shape and the settings taken out of it; None (with a
    note) for an entry mcpd cannot run."""
    out = dict(body)
    extra = HostSettings()
    if dialect == "zed" and _zed(out, where, notes) is None:
        return None
    remote = out.pop("serverUrl", None)
    if remote is not None:  # Windsurf
        if out.get("url") is not None:
            notes.append(f'{where}: both "serverUrl" and "url"; "serverUrl" is used')
        out["url"] = remote
    http_url = out.pop("httpUrl", None)
    if http_url is not None:  # Gemini CLI: Streamable HTTP
        if out.get("url") is not None:
            notes.append(f'{where}: both "httpUrl" and "url"; "httpUrl" is used')
        out["url"] = http_url
        extra.transport = "http"
    elif dialect == "gemini" and out.get("url") is not None and out.get("type") is None:
        extra.transport = "sse"  # Gemini CLI's plain "url" is the old HTTP+SSE transport
    extra.deny = _names(out.pop("disabledTools", None), f"{where}.disabledTools", notes)
    extra.allow = _names(out.pop("includeTools", None), f"{where}.includeTools", notes)
    extra.deny += _names(out.pop("excludeTools", None), f"{where}.excludeTools", notes)
    if dialect == "gemini":
        _gemini(out, where, extra, notes)
    if _runs_bridge(out):
        notes.append(
            f"{where}: mcpd's own entry (`mcpd bridge`, as `mcpd connect` writes it); "
            "skipped: as a server of mcpd it would only lead back to mcpd"
        )
        return None
    misshapen = _misshapen(out, where)
    if misshapen is not None:
        notes.append(misshapen)
        return None
    return out, extra


def _misshapen(body: rpc.JsonObject, where: str) -> str | None:
    """The note on an entry whose keys mcpd reads hold values of the wrong kind: an
    argument list spelt as one string would start the server with its letters, a
    command given as a list with none."""
    for key, shape in (("args", list), ("env", dict), ("headers", dict)):
        if body.get(key) and not isinstance(body[key], shape):
            return f"{where}.{key}: not {'a list' if shape is list else 'an object'}; skipped"
    for key in ("command", "url", "cwd"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            return f"{where}.{key}: {kind_in_words(value)}, not a string; skipped"
    return None


def neither_command_nor_url(where: str, body: rpc.JsonObject) -> str:
    """The note on a server with neither key, naming a key of it that looks like one
    of them misspelt (``comand``)."""
    said = f'{where}: neither "command" nor "url"'
    for key in sorted(body):
        near = difflib.get_close_matches(key, ("command", "url"), n=1, cutoff=0.6)
        if near:
            return f'{said} (is "{key}" meant to be "{near[0]}"?); skipped'
    return f"{said}; skipped"


HOST_TRANSPORTS: Final = ("stdio", "http", "streamable-http", "streamableHttp", "sse")


def unknown_transport(where: str, kind: object) -> str | None:
    """The note on a ``type`` no host transport is: quoted only where it is a slip of
    one, as any other text there may be a secret pasted into the wrong key."""
    if kind is None or kind in HOST_TRANSPORTS:
        return None
    near = difflib.get_close_matches(kind, HOST_TRANSPORTS, n=1) if isinstance(kind, str) else []
    if near:
        return f'{where}.type: {kind!r} is not a transport mcpd knows (is it "{near[0]}"?); ignored'
    return f"{where}.type: not a transport mcpd knows; ignored"


def _runs_bridge(body: rpc.JsonObject) -> bool:
    command, args = body.get("command"), body.get("args")
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    words = [PurePath(command).name, *(a if isinstance(a, str) else "" for a in args[:3])]
    if words[0].startswith("python") and words[1:3] == ["-m", "mcpd"]:
        words = ["mcpd", *words[3:]]
    return words[:2] == ["mcpd", "bridge"]


def _zed(out: rpc.JsonObject, where: str, notes: list[str]) -> rpc.JsonObject | None:
    command = out.get("command")
    if isinstance(command, dict):  # the older form: {"path", "args", "env"}
        out["command"] = command.get("path")
        for key in ("args", "env"):
            if key in command:
                out[key] = command[key]
    source = out.pop("source", None)
    settings = out.pop("settings", None)
    if out.get("command") is None and out.get("url") is None:
        if settings is not None or source == "extension":
            notes.append(
                f"{where}: provided by a Zed extension, which starts it; mcpd has no "
                f'command for it; skipped (add its "command" to import it)'
            )
        else:
            notes.append(neither_command_nor_url(where, out))
        return None
    if settings:
        notes.append(f"{where}.settings: read by a Zed extension; not imported")
    if out.pop("enabled", None) is False:
        out["disabled"] = True
    return out


def _gemini(out: rpc.JsonObject, where: str, extra: HostSettings, notes: list[str]) -> None:
    timeout = out.pop("timeout", None)
    if timeout is not None:
        # A whole number past the largest float is no time limit either.
        if (
            isinstance(timeout, int | float)
            and not isinstance(timeout, bool)
            and (0 < timeout <= sys.float_info.max)
        ):
            extra.call_timeout = timeout / 1000
        else:
            said = quoted_or_sized(timeout)
            notes.append(f"{where}.timeout: {said} is not a number of milliseconds; ignored")
    trust = out.pop("trust", None)
    if trust is True:
        extra.trusted = True
        notes.append(
            f"{where}.trust: imported as trusted = true: mcpd believes the server's "
            "tool annotations (readOnlyHint and the like)"
        )


def _names(value: rpc.Json, where: str, notes: list[str]) -> list[str]:
    """Tool names as mcpd patterns that match those names alone."""
    if value is None:
        return []
    names = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    if not isinstance(value, list) or len(names) != len(value):
        notes.append(f"{where}: not a list of tool names; ignored")
        return []
    # mcpd's lists are globs; a name with a glob character must match only itself.
    return [_GLOB.sub(r"[\1]", name) for name in names]
