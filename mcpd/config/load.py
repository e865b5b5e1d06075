"""Loading the config file: TOML (or another host's JSON) decoded into the model's
frozen structs, every error naming its key.

``${VAR}`` and ``${VAR:-default}`` expand from the environment in any string value
(``$$`` is a literal ``$``), and ``${file:PATH}`` reads a secret file. Unknown keys
are errors, so a typo never silently turns a setting off.
"""

from __future__ import annotations

import grp
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from .endpoints import validate_http, validate_profiles
from .model import (
    ALIAS_RE,
    AuthConfig,
    Config,
    ConfigError,
    ServerConfig,
    ToolsConfig,
)
from .profiles import ProfileConfig
from .secrets import SecretError, read_secret

_VAR_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VAR_RE: Final = re.compile(r"\$\$|\$\{([^}]*)\}")


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
    profiles = expanded.get("profiles")
    if isinstance(profiles, dict):  # each on its own, so an error names the profile
        for name, body in profiles.items():
            _convert_at(body, ProfileConfig, f"profiles.{name}")
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
        for kind in ("tools", "prompts"):
            rules = body.get(kind) if isinstance(body, dict) else None
            for table in ("rename", "description"):
                items = rules.get(table) if isinstance(rules, dict) else None
                if isinstance(items, dict):
                    for key, value in items.items():
                        _convert_at(value, str, f"{where}.{kind}.{table}.{key}")
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
        "ask_timeout",
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
    validate_http(d)
    validate_profiles(config)


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
    if s.command is not None and s.transport != "stdio":
        raise ConfigError(f"{where}.transport", f'"{s.transport}" needs a `url`, not a `command`')
    if s.url is not None and s.transport == "stdio":
        raise ConfigError(f"{where}.transport", '"stdio" needs a `command`, not a `url`')
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
    _validate_tools(f"{where}.prompts", s.prompts)
    if len(set(s.relay)) != len(s.relay):
        raise ConfigError(f"{where}.relay", "names a request kind twice")
    if s.auth is not None:
        _validate_auth(where, s, s.auth)


def _validate_auth(where: str, s: ServerConfig, a: AuthConfig) -> None:
    at = f"{where}.auth"
    if s.url is None:
        raise ConfigError(at, "only applies to HTTP servers (with `url`)")
    for name in s.headers:
        if name.lower() == "authorization":
            raise ConfigError(
                f"{where}.headers.{name}", f"cannot be combined with [{at}]: mcpd sends the token"
            )
    if a.type == "client_credentials":
        if a.client_id is None:
            raise ConfigError(f"{at}.client_id", "is needed for client_credentials")
        if a.client_secret is None and a.private_key is None:
            raise ConfigError(at, "client_credentials needs client_secret or private_key")
    if (a.client_secret is not None or a.private_key is not None) and a.client_id is None:
        key = "client_secret" if a.client_secret is not None else "private_key"
        raise ConfigError(f"{at}.{key}", "needs client_id (the client it belongs to)")
    for key in ("client_id", "client_secret"):
        value = getattr(a, key)
        if value is not None and not value.strip():
            raise ConfigError(f"{at}.{key}", "is empty")
    if a.client_metadata_url is not None and not re.match(
        r"^https://[^/\s#]+/[^\s#]+$", a.client_metadata_url
    ):
        raise ConfigError(
            f"{at}.client_metadata_url", "must be an https:// URL with a path and no fragment"
        )
    if a.issuer is not None and not re.match(r"^https?://[^/\s#?]+[^\s#?]*$", a.issuer):
        raise ConfigError(f"{at}.issuer", "must be an http(s) URL without query or fragment")
    for i, scope in enumerate(a.scopes or []):
        if not scope or any(c.isspace() or c in '"\\' for c in scope):
            raise ConfigError(f"{at}.scopes[{i}]", "must be one scope token (no spaces)")
    if not 0 <= a.redirect_port <= 65535:
        raise ConfigError(f"{at}.redirect_port", "must be a port number (0: any free port)")
    if a.private_key is not None:
        from protocol.oauth import OAuthConfigError, load_signing_key

        try:
            load_signing_key(a.private_key)
        except OAuthConfigError as exc:
            raise ConfigError(f"{at}.private_key", str(exc)) from None
    method = a.token_endpoint_auth_method
    if method == "private_key_jwt" and a.private_key is None:
        raise ConfigError(f"{at}.token_endpoint_auth_method", "private_key_jwt needs private_key")
    if method in ("client_secret_basic", "client_secret_post") and a.client_secret is None:
        raise ConfigError(f"{at}.token_endpoint_auth_method", f"{method} needs client_secret")


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
        # Another host's mcpServers file, used as it is. The importer (and json) only
        # then: a daemon started on TOML does without them.
        from .importer import config_from_json

        return parse(config_from_json(text, str(p)), env, source=str(p))
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("", f"{p}: not valid TOML: {exc}") from None
    return parse(data, env, source=str(p))
