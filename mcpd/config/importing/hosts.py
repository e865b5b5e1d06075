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
import math
import os
import re
from pathlib import Path, PurePath
from typing import Any, Final, Literal

import msgspec

Dialect = Literal["common", "gemini", "zed"]

_GLOB: Final = re.compile(r"([*?\[])")


class HostSettings(msgspec.Struct, kw_only=True):
    """What an entry sets that maps to mcpd's own server keys."""

    allow: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)
    call_timeout: float | None = None
    trusted: bool = False
    transport: Literal["http", "sse"] | None = None

    def apply(self, table: dict[str, Any]) -> None:
        """Put these settings into a server's mcpd table."""
        tools = {k: v for k, v in (("allow", self.allow), ("deny", self.deny)) if v}
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


def normalize(
    body: dict[str, Any], where: str, dialect: Dialect, notes: list[str]
) -> tuple[dict[str, Any], HostSettings] | None:
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
    return out, extra


def neither_command_nor_url(where: str, body: dict[str, Any]) -> str:
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


def _runs_bridge(body: dict[str, Any]) -> bool:
    command, args = body.get("command"), body.get("args")
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    words = [PurePath(command).name, *args[:3]]
    if words[0].startswith("python") and words[1:3] == ["-m", "mcpd"]:
        words = ["mcpd", *words[3:]]
    return words[:2] == ["mcpd", "bridge"]


def _zed(out: dict[str, Any], where: str, notes: list[str]) -> dict[str, Any] | None:
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


def _gemini(out: dict[str, Any], where: str, extra: HostSettings, notes: list[str]) -> None:
    timeout = out.pop("timeout", None)
    if timeout is not None:
        number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
        if number and 0 < timeout < math.inf:
            extra.call_timeout = timeout / 1000
        else:
            notes.append(f"{where}.timeout: {timeout!r} is not a number of milliseconds; ignored")
    trust = out.pop("trust", None)
    if trust is True:
        extra.trusted = True
        notes.append(
            f"{where}.trust: imported as trusted = true: mcpd believes the server's "
            "tool annotations (readOnlyHint and the like)"
        )


def _names(value: Any, where: str, notes: list[str]) -> list[str]:
    """Tool names as mcpd patterns that match those names alone."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        notes.append(f"{where}: not a list of tool names; ignored")
        return []
    # mcpd's lists are globs; a name with a glob character must match only itself.
    return [_GLOB.sub(r"[\1]", name) for name in value]
