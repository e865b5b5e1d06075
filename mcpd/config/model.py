"""The config file: TOML decoded into frozen structs, every error naming its key.

``${VAR}`` and ``${VAR:-default}`` expand from the environment in any string value
(``$$`` is a literal ``$``). Unknown keys are errors, so a typo never silently turns
a setting off.
"""

from __future__ import annotations

import grp
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from .secrets import SecretError, read_secret

EX_CONFIG: Final = 78
ALIAS_RE: Final = re.compile(r"^[A-Za-z0-9_-]+\Z")  # not $: it matches before a final \n
_VAR_RE: Final = re.compile(r"\$\$|\$\{([^}]*)\}")
_VAR_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(Exception):
    """A bad config; ``path`` is the key path (``servers.notes.command``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


class DaemonConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    socket: str | None = None
    socket_mode: str = "0600"
    call_timeout: float = 60.0
    result_budget_chars: int = 8000
    page_size: int = 0
    startup_deadline: float = 10.0
    probe_timeout: float = 5.0
    list_timeout: float = 30.0
    # Progress notifications extend a call's time limit, but never past this.
    max_call_time: float = 600.0
    # How often an idle HTTP server is asked whether it is still there (0: never).
    health_interval: float = 30.0
    max_pages: int = 1000
    max_line_bytes: int = 16 * 1024 * 1024
    max_connections: int = 256
    max_inflight_per_connection: int = 128
    allow_uids: list[int] = msgspec.field(default_factory=list)
    allow_groups: list[str] = msgspec.field(default_factory=list)
    state_dir: str | None = None
    # Hosts commonly accept about this many tools in one list; more is logged as a warning.
    max_tools: int = 128
    # Supervision and circuit breaking (per server, overridable).
    backoff_base: float = 0.5
    backoff_cap: float = 60.0
    max_restarts: int = 5
    crash_window: float = 60.0
    stable_after: float = 30.0
    failure_threshold: int = 5
    cooldown_base: float = 5.0
    cooldown_cap: float = 300.0
    queue_timeout: float = 30.0
    queue_size: int = 256


class NamingConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    template: str = "mcp__{alias}__{tool}"
    max_length: int = 64


class ToolsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Which of a server's tools agents see, and under what name. Keys and patterns
    are the server's own tool names."""

    allow: list[str] = msgspec.field(default_factory=list)  # globs; empty: every tool
    deny: list[str] = msgspec.field(default_factory=list)  # globs, applied after allow
    rename: dict[str, str] = msgspec.field(default_factory=dict)
    description: dict[str, str] = msgspec.field(default_factory=dict)


class ServerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    command: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    inherit_env: bool = True
    url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    connect_timeout: float = 10.0
    ca_file: str | None = None
    tls_verify: bool = True
    call_timeout: float | None = None
    trusted: bool = False
    era: Literal["auto", "modern", "legacy"] = "auto"
    max_concurrency: int | None = None
    enabled: bool = True
    tool_timeouts: dict[str, float] = msgspec.field(default_factory=dict)
    tools: ToolsConfig = msgspec.field(default_factory=ToolsConfig)
    # "lazy": a stdio server runs only while it is used, stopped after idle_stop seconds.
    start: Literal["eager", "lazy"] = "eager"
    idle_stop: float = 300.0

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def concurrency(self) -> int:
        if self.max_concurrency is not None:
            return self.max_concurrency
        return 4 if self.transport == "stdio" else 16


class Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    daemon: DaemonConfig = msgspec.field(default_factory=DaemonConfig)
    naming: NamingConfig = msgspec.field(default_factory=NamingConfig)
    servers: dict[str, ServerConfig] = msgspec.field(default_factory=dict)
    source: str = ""

    def socket_path(self) -> str:
        return self.daemon.socket or default_socket_path()

    def socket_mode(self) -> int:
        return int(self.daemon.socket_mode, 8)

    def call_timeout(self, alias: str, tool: str | None = None) -> float:
        """``tool`` is the server's own name for it: a per-tool limit wins."""
        server = self.servers[alias]
        if tool is not None and tool in server.tool_timeouts:
            return server.tool_timeouts[tool]
        t = server.call_timeout
        return self.daemon.call_timeout if t is None else t


def default_socket_path(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if os.geteuid() == 0:
        return "/run/mcpd/mcpd.sock"
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "mcpd", "mcpd.sock")
    return f"/tmp/mcpd-{os.getuid()}/mcpd.sock"


def default_config_path(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("MCPD_CONFIG"):
        return env["MCPD_CONFIG"]
    if os.geteuid() == 0:
        return "/etc/mcpd/config.toml"
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME", "/"), ".config")
    return os.path.join(base, "mcpd", "config.toml")


def expand(value: str, path: str, env: Mapping[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        body = m.group(1)
        if body.startswith("file:"):
            try:
                return read_secret(body[len("file:") :], env)
            except SecretError as exc:
                raise ConfigError(path, str(exc)) from None
        name, sep, default = body.partition(":-")
        if not _VAR_NAME_RE.match(name):
            raise ConfigError(path, f"bad variable reference ${{{body}}}")
        value = env.get(name)
        if value is not None and (value or not sep):
            return value
        if sep:  # as in the shell, ":-" also replaces a variable set to ""
            return default
        raise ConfigError(
            path, f"environment variable {name} is not set (use ${{{name}:-default}})"
        )

    return _VAR_RE.sub(sub, value)


def _expand_tree(node: Any, path: str, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return expand(node, path, env)
    if isinstance(node, dict):
        return {k: _expand_tree(v, f"{path}.{k}" if path else k, env) for k, v in node.items()}
    if isinstance(node, list):
        return [_expand_tree(v, f"{path}[{i}]", env) for i, v in enumerate(node)]
    return node


_AT_RE: Final = re.compile(r"^(.*?)(?: - at `\$(.*)`)?$", re.S)


def _validation_error(exc: msgspec.ValidationError, prefix: str = "") -> ConfigError:
    m = _AT_RE.match(str(exc))
    assert m is not None
    message, where = m.group(1), (prefix + (m.group(2) or "")).lstrip(".")
    unknown = re.match(r"Object contains unknown field `(.+)`", message)
    if unknown:
        key = unknown.group(1)
        return ConfigError(f"{where}.{key}" if where else key, "unknown key")
    return ConfigError(where or "(top level)", message)


def parse(
    data: Mapping[str, Any], env: Mapping[str, str] | None = None, source: str = ""
) -> Config:
    env = os.environ if env is None else env
    expanded = _expand_tree(dict(data), "", env)
    if "source" in expanded:  # set by mcpd, not a config key
        raise ConfigError("source", "unknown key")
    expanded["source"] = source
    _check_servers(expanded.get("servers"))
    try:
        config = msgspec.convert(expanded, Config)
    except msgspec.ValidationError as exc:
        raise _validation_error(exc) from None
    validate(config)
    return config


def _check_servers(servers: Any) -> None:
    """msgspec names a table key only as ``[...]``: check each server (and each of its
    env/headers values) on its own, so an error names the alias and the key."""
    if not isinstance(servers, dict):
        return
    for alias, body in servers.items():
        where = f"servers.{alias}"
        for table, type_ in (("env", str), ("headers", str), ("tool_timeouts", float)):
            items = body.get(table) if isinstance(body, dict) else None
            if isinstance(items, dict):
                for key, value in items.items():
                    _convert_at(value, type_, f"{where}.{table}.{key}")
        tools = body.get("tools") if isinstance(body, dict) else None
        for table in ("rename", "description"):
            items = tools.get(table) if isinstance(tools, dict) else None
            if isinstance(items, dict):
                for key, value in items.items():
                    _convert_at(value, str, f"{where}.tools.{table}.{key}")
        _convert_at(body, ServerConfig, where)


def _convert_at(value: Any, type_: Any, where: str) -> None:
    try:
        msgspec.convert(value, type_)
    except msgspec.ValidationError as exc:
        raise _validation_error(exc, where) from None


def validate(config: Config) -> None:
    d = config.daemon
    try:
        mode = config.socket_mode()
    except ValueError:
        raise ConfigError("daemon.socket_mode", 'must be an octal string such as "0600"') from None
    if not 0 <= mode <= 0o777:
        raise ConfigError("daemon.socket_mode", "must be between 0000 and 0777")
    for key in (
        "call_timeout",
        "startup_deadline",
        "probe_timeout",
        "list_timeout",
        "queue_timeout",
        "backoff_base",
        "backoff_cap",
        "crash_window",
        "stable_after",
        "cooldown_base",
        "cooldown_cap",
    ):
        if not getattr(d, key) > 0:  # also refuses nan, which TOML allows
            raise ConfigError(f"daemon.{key}", "must be positive")
    if not d.health_interval >= 0:
        raise ConfigError("daemon.health_interval", "must be 0 (off) or positive")
    if d.backoff_cap < d.backoff_base:
        raise ConfigError("daemon.backoff_cap", "must be at least backoff_base")
    if d.cooldown_cap < d.cooldown_base:
        raise ConfigError("daemon.cooldown_cap", "must be at least cooldown_base")
    for key in (
        "max_restarts",
        "failure_threshold",
        "queue_size",
        "max_connections",
        "max_inflight_per_connection",
    ):
        if getattr(d, key) < 1:
            raise ConfigError(f"daemon.{key}", "must be at least 1")
    for i, group in enumerate(d.allow_groups):
        if not group.isdigit():
            try:
                grp.getgrnam(group)
            except KeyError:
                raise ConfigError(
                    f"daemon.allow_groups[{i}]", f"no group named {group!r}"
                ) from None
    if d.max_line_bytes < 4096:
        raise ConfigError("daemon.max_line_bytes", "must be at least 4096")
    if d.result_budget_chars < 100:
        raise ConfigError("daemon.result_budget_chars", "must be at least 100")
    if d.page_size < 0:
        raise ConfigError("daemon.page_size", "must be >= 0 (0 = everything in one page)")
    if d.max_pages < 1:
        raise ConfigError("daemon.max_pages", "must be at least 1")
    if "{tool}" not in config.naming.template:
        raise ConfigError("naming.template", "must contain {tool}")
    unknown = set(re.findall(r"\{([^}]*)\}", config.naming.template)) - {"alias", "tool"}
    if unknown:
        raise ConfigError("naming.template", f"unknown placeholder {{{sorted(unknown)[0]}}}")
    if not 16 <= config.naming.max_length <= 1024:
        raise ConfigError("naming.max_length", "must be between 16 and 1024")
    if d.max_tools < 1:
        raise ConfigError("daemon.max_tools", "must be at least 1")
    for alias, server in config.servers.items():
        _validate_server(alias, server)


def _validate_server(alias: str, s: ServerConfig) -> None:
    where = f"servers.{alias}"
    for name, value in s.headers.items():
        if any(c in value for c in "\r\n\0") or any(c in name for c in "\r\n\0 :"):
            raise ConfigError(f"{where}.headers.{name}", "a header cannot contain CR, LF or NUL")
    if not ALIAS_RE.match(alias):
        raise ConfigError(where, "an alias must be non-empty and made of A-Z a-z 0-9 _ -")
    if (s.command is None) == (s.url is None):
        raise ConfigError(where, "give exactly one of `command` (stdio) or `url` (HTTP)")
    if s.command is not None and not s.command.strip():
        raise ConfigError(f"{where}.command", "is empty")
    if s.url is not None and not re.match(r"^https?://[^/\s]+", s.url):
        raise ConfigError(f"{where}.url", "must be an http:// or https:// URL")
    if s.command is not None:
        for key in ("url", "headers", "ca_file"):
            if getattr(s, key):
                raise ConfigError(f"{where}.{key}", "only applies to HTTP servers (with `url`)")
    if s.url is not None:
        for key in ("args", "env", "cwd"):
            if getattr(s, key):
                raise ConfigError(
                    f"{where}.{key}", "only applies to stdio servers (with `command`)"
                )
    if s.call_timeout is not None and not s.call_timeout > 0:
        raise ConfigError(f"{where}.call_timeout", "must be positive")
    if s.max_concurrency is not None and s.max_concurrency < 1:
        raise ConfigError(f"{where}.max_concurrency", "must be at least 1")
    if s.ca_file is not None and not os.path.isfile(s.ca_file):
        raise ConfigError(f"{where}.ca_file", f"{s.ca_file!r} does not exist")
    for tool, seconds in s.tool_timeouts.items():
        if not seconds > 0:
            raise ConfigError(f"{where}.tool_timeouts.{tool}", "must be positive")
    if s.start == "lazy" and s.command is None:
        raise ConfigError(f"{where}.start", '"lazy" only applies to stdio servers (with `command`)')
    if not s.idle_stop > 0:
        raise ConfigError(f"{where}.idle_stop", "must be positive")
    _validate_tools(f"{where}.tools", s.tools)


def _validate_tools(where: str, t: ToolsConfig) -> None:
    for key in ("allow", "deny"):
        for i, pattern in enumerate(getattr(t, key)):
            if not pattern:
                raise ConfigError(f"{where}.{key}[{i}]", "is empty")
    targets: dict[str, str] = {}
    for tool, new in t.rename.items():
        if not new.strip():
            raise ConfigError(f"{where}.rename.{tool}", "is empty")
        if new in targets:
            raise ConfigError(
                f"{where}.rename.{tool}", f"{targets[new]!r} is already renamed to {new!r}"
            )
        targets[new] = tool


def load(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Config:
    p = Path(path)
    try:
        text = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError("", f"config file {str(p)!r} not found") from None
    except OSError as exc:
        raise ConfigError("", f"cannot read {str(p)!r}: {exc.strerror}") from None
    if p.suffix == ".json" or text.lstrip()[:1] == b"{":
        # Another host's mcpServers file, used as it is.
        from .importer import config_from_json

        return parse(config_from_json(text, str(p)), env, source=str(p))
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("", f"{p}: not valid TOML: {exc}") from None
    return parse(data, env, source=str(p))


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Header values carry secrets; status pages and errors show only the names."""
    return {k: "***" for k in headers}
