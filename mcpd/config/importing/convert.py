"""Other hosts' MCP config files, read as mcpd servers.

Two shapes exist in the wild:

- ``{"mcpServers": {NAME: {...}}}``: Claude Desktop (``claude_desktop_config.json``),
  Claude Code (``.mcp.json``; ``~/.claude.json`` also keeps one per project under
  ``projects``), Cursor (``.cursor/mcp.json``).
- ``{"servers": {NAME: {...}}, "inputs": [...]}``: VS Code's ``mcp.json`` (or the
  ``"mcp"`` object of its ``settings.json``), which may hold comments and trailing commas.
- ``{"context_servers": {NAME: {...}}}``: Zed's ``settings.json`` (with comments).

Windsurf's and Gemini CLI's ``mcpServers`` and Zed's entries have keys of their own;
``hosts`` turns them into the common shape first.

A server is ``command``/``args``/``env``/``cwd`` (stdio) or ``url``/``headers`` (HTTP),
with an optional ``type``; an HTTP server's OAuth client settings become its ``[auth]``
table (``oauth_hints``). Variable references become mcpd's ``${VAR}``: ``${env:X}``
is ``${X}``, VS Code's ``${input:id}`` becomes a variable named after the input (mcpd
has nobody to prompt), ``${userHome}`` is ``${HOME}``. ``secret`` says which
values are secrets; ``to_toml`` never prints one literally: it replaces it with a
reference and says which variable to set.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from protocol.http.mcp_headers import TRANSPORT_HEADERS
from protocol.jsonrpc import messages as rpc

from ..checks.envcheck import relied_on
from ..credentials import exposure
from ..loading.validation import validation_error
from ..tables.model import ConfigError, alias_for
from ..tables.servertable import ServerConfig
from .hosts import (
    Dialect,
    dialect_of,
    neither_command_nor_url,
    normalize,
    unknown_transport,
    workspace_of,
)
from .inline import Inline, inline_secrets
from .jsonc import array, kind_in_words, object_of, objects, read_json
from .oauth_hints import oauth_table
from .read import read_host_file
from .secret import looks_secret
from .unknown_keys import READ, unknown_key
from .workdir import absolute_cwd, started_in

_VAR_BAD: Final = re.compile(r"[^A-Za-z0-9_]+")
_REF: Final = re.compile(r"\$\{([^}]*)\}|\$")
# Gemini CLI also expands a bare $NAME.
_REF_BARE: Final = re.compile(r"\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)|\$")
# Keys other hosts use for their own UI or policies; mcpd has no use for them.
_HOST_ONLY: Final = frozenset(
    {"alwaysAllow", "autoApprove", "description", "gallery", "icon", "timeout", "transportType"}
    | {"version", "dev", "sandbox", "sandboxEnabled", "trust"}
)


class Imported(msgspec.Struct):
    """mcpd server tables keyed by alias, with real values (``secrets`` and ``inline``
    say which values must not be printed), and notes for the person importing."""

    servers: dict[str, rpc.JsonObject]
    notes: list[str]
    secrets: dict[tuple[str, ...], str]  # key path -> the variable that replaces it
    source: str
    inline: list[Inline] = msgspec.field(default_factory=list)
    # Secrets other users or logs can read where they stand (see ``exposure``).
    exposed: list[str] = msgspec.field(default_factory=list)
    # Notes on keys that are slips of a key mcpd reads (``unknown_keys``).
    misspelt: list[str] = msgspec.field(default_factory=list)


def import_file(path: str | os.PathLike[str], *, named: bool = True) -> Imported:
    """The servers of the host file at ``path`` (see ``read_host_file``)."""
    source = os.fspath(path)
    return import_text(read_host_file(source, named=named), source)


def import_text(text: str, source: str) -> Imported:
    try:
        raw = read_json(text)
    except ValueError as exc:
        raise ConfigError("", f"{source}: not valid JSON: {exc}") from None
    notes: list[str] = []
    doc = objects(raw, "", notes)
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        # JSON can write one (\ud800); no TOML file, argument or header can hold it.
        half = exc.object[exc.start : exc.end]
        raise ConfigError("", f"{source}: a string holds {half!r}, half of a character") from None
    if not isinstance(doc, dict):
        top = kind_in_words(doc)
        raise ConfigError("", f"{source}: expected a JSON object at the top, not {top}")
    found: list[tuple[str, str, rpc.Json, str | None]] = []  # (where, name, body, project)
    inputs: dict[str, str] = {}
    misshapen: list[str] = []  # tables of servers that are not objects
    for where, table, project in _server_tables(doc):
        if not isinstance(table, dict):
            notes.append(f"{where}: not an object; skipped")
            misshapen.append(f'"{where}" is {kind_in_words(table)}, not an object')
            continue
        found.extend((f"{where}.{name}", name, body, project) for name, body in table.items())
    mcp = doc.get("mcp")
    listed = doc.get("inputs") or (mcp.get("inputs") if isinstance(mcp, dict) else None)
    for item in array(listed):
        ident = object_of(item).get("id")
        if isinstance(ident, str):
            inputs[ident] = str(object_of(item).get("description") or "")
    if not found and misshapen:
        raise ConfigError("", f"{source}: no MCP servers found: {'; '.join(misshapen)}")
    if not found:
        raise ConfigError(
            "",
            f'{source}: no MCP servers found (expected an "mcpServers", "servers" or '
            '"context_servers" object)',
        )
    workspace = workspace_of(source)
    state = _Converter(workspace, inputs, notes)
    state.started_in = started_in(source)
    servers: dict[str, rpc.JsonObject] = {}
    bodies: dict[str, tuple[rpc.Json, str | None]] = {}
    numbered: dict[str, int] = {}  # a name used again -> the number it had last
    for where, name, body, project in found:
        alias = alias_for(name)
        if alias != name:
            notes.append(f"{where}: the name {name!r} became the alias {alias!r}")
        # Claude Code runs a project's servers in the project's folder.
        state.workspace = workspace if project is None else project
        if alias in servers:
            if bodies[alias] == (body, project):
                notes.append(f"{where}: the same server as {alias!r} again; kept once")
                continue
            n = numbered.get(alias, 1) + 1
            while f"{alias}_{n}" in servers:
                n += 1
            numbered[alias] = n
            notes.append(f"{where}: another server named {alias!r}; imported as {alias}_{n}")
            alias = f"{alias}_{n}"
        table = state.server(alias, where, body, dialect_of(source, where))
        if table is not None:
            servers[alias] = table
            bodies[alias] = (body, project)
    return Imported(
        servers, notes, state.secrets, source, state.inline, state.exposed, state.misspelt
    )


def _server_tables(doc: rpc.JsonObject) -> list[tuple[str, rpc.Json, str | None]]:
    """Each table of servers, with the project folder its servers run in, if any."""
    tables: list[tuple[str, rpc.Json, str | None]] = []
    for key in ("mcpServers", "servers", "context_servers"):  # the last: Zed
        if key in doc:
            tables.append((key, doc[key], None))
    mcp = doc.get("mcp")
    if isinstance(mcp, dict) and "servers" in mcp:
        tables.append(("mcp.servers", mcp["servers"], None))
    projects = doc.get("projects")
    if isinstance(projects, dict):  # ~/.claude.json: servers per project directory
        for project, body in projects.items():
            if isinstance(body, dict) and body.get("mcpServers"):
                tables.append((f"projects.{project}.mcpServers", body["mcpServers"], project))
    return tables


class _Converter:
    started_in: str | None = None  # the folder a relative cwd is taken from, if no project

    def __init__(self, workspace: str | None, inputs: dict[str, str], notes: list[str]) -> None:
        self.workspace = workspace
        self.inputs = inputs
        self.notes = notes
        self.secrets: dict[tuple[str, ...], str] = {}
        self.inline: list[Inline] = []
        self.exposed: list[str] = []
        self.misspelt: list[str] = []
        self._taken: dict[str, str] = {}  # secret variable -> its value
        self._refs = _REF

    def server(
        self, alias: str, where: str, body: rpc.Json, dialect: Dialect = "common"
    ) -> rpc.JsonObject | None:
        """A host's entry as an mcpd server table (None: skipped, and a note says why)."""
        if not isinstance(body, dict):
            self.notes.append(f"{where}: not an object; skipped")
            return None
        shaped = normalize(body, where, dialect, self.notes)
        if shaped is None:
            return None
        body, extra = shaped
        self._refs = _REF_BARE if dialect == "gemini" else _REF
        kind = body.get("type")
        val: Callable[[rpc.Json, str], str] = lambda v, key: self.value(v, f"{where}.{key}")  # noqa: E731
        out: rpc.JsonObject | None
        if body.get("command") is not None:
            out = self._process(alias, where, body, val)
        elif body.get("url") is not None:
            out = self._endpoint(alias, where, body, val)
            if out is None:
                return None
            if kind == "sse":
                out["transport"] = "sse"  # the old HTTP+SSE transport (2024-11-05)
        else:
            self.notes.append(neither_command_nor_url(where, body))
            return None
        self._auth(alias, where, body, out)
        if (unknown := unknown_transport(where, kind)) is not None:
            self.notes.append(unknown)
        disabled = body.get("disabled")
        if disabled is True:
            out["enabled"] = False
        elif disabled is not None and not isinstance(disabled, bool):
            said = kind_in_words(disabled)
            self.notes.append(f"{where}.disabled: {said}, not true or false; ignored")
        for key in sorted(body):
            if key in _HOST_ONLY:
                self.notes.append(f"{where}.{key}: a setting of the other host; not imported")
            elif key not in READ:
                self.notes.append(unknown_key(where, key, self.misspelt))
        extra.apply(out)
        table = {k: v for k, v in out.items() if v not in ({}, [])}
        try:
            msgspec.convert(table, ServerConfig)
        except msgspec.ValidationError as exc:
            self.notes.append(f"{validation_error(exc, table, where, ServerConfig)}; skipped")
            return None
        inline, warnings = inline_secrets(
            alias, table, lambda name, secret: self._secret_var(alias, name, secret, own_name=False)
        )
        self.inline += inline
        self.exposed += warnings
        self._inherited(alias, where, table)
        return table

    def _process(
        self, alias: str, where: str, body: rpc.JsonObject, val: Callable[[rpc.Json, str], str]
    ) -> rpc.JsonObject:
        """A server the host started as a process: its command, arguments, environment
        (a secret in it kept apart) and folder."""
        out: rpc.JsonObject = {"command": val(body["command"], "command")}
        out["args"] = [val(a, f"args[{i}]") for i, a in enumerate(array(body.get("args")))]
        env = {k: val(v, f"env.{k}") for k, v in object_of(body.get("env")).items()}
        for key, value in env.items():
            if looks_secret(key, value):
                self.secrets[("servers", alias, "env", key)] = self._secret_var(alias, key, value)
        out["env"] = {**env}
        if body.get("cwd"):
            folder = self.workspace or self.started_in
            out |= absolute_cwd(val(body["cwd"], "cwd"), folder, where, self.notes)
        elif self.workspace is not None:
            # The host ran a project's servers in its folder; mcpd would run them
            # in their own homes.
            out["cwd"] = self.workspace.replace("$", "$$")
        if body.get("envFile"):
            self.notes.append(
                f"{where}.envFile: not read; put its variables in [servers.{alias}.env] "
                "(or mcpd's own environment)"
            )
        return out

    def _endpoint(
        self, alias: str, where: str, body: rpc.JsonObject, val: Callable[[rpc.Json, str], str]
    ) -> rpc.JsonObject | None:
        """A server the host reached over HTTP: its URL and headers (a secret in them
        kept apart); None for one mcpd will not reach as written."""
        url = val(body["url"], "url")
        out: rpc.JsonObject = {"url": url}
        if any(f.what == "the password in the URL" for f in exposure.in_url(url)):
            self.notes.append(
                f"{where}.url: holds a user name and password, which mcpd refuses to "
                "send in a URL; skipped (give them in an Authorization header instead)"
            )
            return None
        headers = {k: val(v, f"headers.{k}") for k, v in object_of(body.get("headers")).items()}
        for key in [k for k in headers if k.lower() in TRANSPORT_HEADERS]:
            del headers[key]
            self.notes.append(f"{where}.headers.{key}: a header mcpd writes itself; not imported")
        for key, value in headers.items():
            if looks_secret(key, value):
                self.secrets[("servers", alias, "headers", key)] = self._secret_var(
                    alias, key, value, own_name=False
                )
        out["headers"] = {**headers}
        return out

    def _inherited(self, alias: str, where: str, table: rpc.JsonObject) -> None:
        """What the server seems to have taken from the host's environment, which mcpd
        no longer passes on by itself (``envcheck``), named in its ``inherit_env``."""
        names = relied_on(alias, msgspec.convert(table, ServerConfig), os.environ)
        if names:
            table["inherit_env"] = [*names]
            self.notes.append(
                f"{where}: inherits {', '.join(names)} from mcpd's environment "
                f"(servers.{alias}.inherit_env), as it seems to rely on them"
            )

    def _auth(self, alias: str, where: str, body: rpc.JsonObject, out: rpc.JsonObject) -> None:
        key = "oauth" if "oauth" in body else "auth"
        if key not in body:
            return
        if "url" not in out:
            self.notes.append(f"{where}.{key}: OAuth is for HTTP servers; not imported")
            return
        auth = oauth_table(body[key], f"{where}.{key}", self.value, self.notes)
        if not auth:
            return
        secret = auth.get("client_secret")
        if isinstance(secret, str) and looks_secret("secret", secret):
            var = self._secret_var(alias, "client_secret", secret, own_name=False)
            self.secrets[("servers", alias, "auth", "client_secret")] = var
        out["auth"] = auth

    def _secret_var(self, alias: str, key: str, value: str, own_name: bool = True) -> str:
        """The variable that will carry a secret: an environment variable keeps its
        own name unless another secret already took it; a number tells apart the
        secrets of one server that share a name."""
        name = _var_name(key) if own_name else _var(alias, key)
        if self._taken.get(name, value) != value:
            name = base = _var(alias, key)
            n = 2
            while self._taken.get(name, value) != value:
                name, n = f"{base}_{n}", n + 1
        self._taken[name] = value
        return name

    def value(self, value: rpc.Json, where: str) -> str:
        """A string in mcpd's syntax: references translated, literal ``$`` escaped."""
        if not isinstance(value, str):
            if isinstance(value, bool | int | float):
                return json.dumps(value)
            self.notes.append(f"{where}: {type(value).__name__} where a string belongs; emptied")
            return ""

        def sub(m: re.Match[str]) -> str:
            if m.group(0) == "$":
                return "$$"  # these hosts pass "$" through as it is; mcpd would expand it
            if m.group(1) is None:
                return f"${{{m.group(2)}}}"
            return self._reference(m.group(1), where)

        return self._refs.sub(sub, value)

    def _reference(self, body: str, where: str) -> str:
        kind, _, rest = body.partition(":")
        if kind == "env" and rest:
            return f"${{{rest}}}"
        if kind == "input" and rest:
            name = _var_name(rest)
            what = self.inputs.get(rest)
            self.notes.append(
                f"{where}: the input {rest!r}{f' ({what})' if what else ''} is read from "
                f"${name}; set it in mcpd's environment or use ${{file:PATH}}"
            )
            return f"${{{name}}}"
        if body == "userHome":
            return "${HOME}"
        if body in ("pathSeparator", "/"):
            return "/"
        if body in ("workspaceFolder", "workspaceFolderBasename"):
            if self.workspace is None:
                self.notes.append(f"{where}: ${{{body}}} is read from $WORKSPACE_FOLDER")
                return "${WORKSPACE_FOLDER}"
            folder = self.workspace if body == "workspaceFolder" else Path(self.workspace).name
            return folder.replace("$", "$$")
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(:-.*)?", body, re.S) or body.startswith("file:"):
            return f"${{{body}}}"  # already mcpd's syntax (Claude Code uses the same)
        name = _var_name(body)
        self.notes.append(f"{where}: ${{{body}}} has no meaning here; read from ${name} instead")
        return f"${{{name}}}"


def _var(alias: str, key: str) -> str:
    return _var_name(f"{alias}_{key}")


def _var_name(text: str) -> str:
    name = _VAR_BAD.sub("_", text).upper().strip("_") or "VALUE"
    return f"_{name}" if name[0].isdigit() else name
