"""Checks of how agents reach mcpd: the profiles (servers, patterns, naming, sockets)
and the HTTP listener. Whether a profile matches any tool can only be known once the
servers have listed theirs; ``mcpd.registry.profiles.views`` checks that."""

from __future__ import annotations

import grp
import ipaddress
import os
import re
from fnmatch import fnmatchcase
from typing import Final

from protocol.shown.stand_ins import masked_repr

from ..sandboxing.keys import loopback_port
from ..tables.glob import is_glob
from ..tables.model import ALIAS_RE, Config, ConfigError, DaemonConfig
from ..tables.profiles import DEFAULT_PROFILE, Patterns, ProfileConfig, split_pattern

_PLACEHOLDER: Final = re.compile(r"\{([^}]*)\}")
_DEFAULT_PORTS: Final = {"http": "80", "https": "443"}


def parse_listen(text: str, where: str = "daemon.http_listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as a host and a port number. The text is
    not quoted when it is not one: a value written there may be a URL with a password."""
    host, sep, port = text.rpartition(":")
    if (
        not sep
        or not host
        or not (port.isascii() and port.isdigit())
        or not 0 <= int(port) <= 65535
    ):
        raise ConfigError(
            where, 'is not HOST:PORT; write a loopback address and a port, such as "127.0.0.1:8765"'
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def group_id(name: str) -> int | None:
    """The group id ``name`` is written as, if it is one: ASCII digits only, so that
    ``"²"`` or ``"٣"`` is a name (which must exist), never a number."""
    return int(name) if name.isascii() and name.isdigit() else None


def check_groups(groups: list[str], where: str) -> None:
    """Each of ``groups`` (an ``allow_groups`` list at ``where``) a group id, or the
    name of a group that exists."""
    for i, group in enumerate(groups):
        if group_id(group) is None:
            try:
                grp.getgrnam(group)
            except KeyError:
                raise ConfigError(f"{where}[{i}]", f"no group named {masked_repr(group)}") from None


# The largest user id: one more is (uid_t)-1, which stands for no user.
MAX_UID: Final = 2**32 - 2


def check_uids(uids: list[int], where: str) -> None:
    """Each of ``uids`` (an ``allow_uids`` list at ``where``) a user id some process
    can have: another would let no one in."""
    for i, uid in enumerate(uids):
        if not 0 <= uid <= MAX_UID:
            raise ConfigError(f"{where}[{i}]", f"must be a user id, 0 to {MAX_UID}")


def is_localhost(host: str) -> bool:
    """``localhost``, which mcpd serves on both loopback addresses
    (``mcpd.starting.listening.bind_plan``)."""
    return host.lower() == "localhost"


def is_literal(host: str) -> bool:
    """An IP address as written, not a name (an IPv6 one with its zone, if any)."""
    try:
        ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False
    return True


def url_host(ip: str) -> str:
    """An address as a URL's host: an IPv6 one in brackets."""
    return f"[{ip}]" if ":" in ip else ip


def is_loopback(host: str) -> bool:
    if is_localhost(host):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def validate_http(d: DaemonConfig) -> None:
    for i, origin in enumerate(d.http_origins):
        if not re.match(r"^https?://[^/\s]+\Z", origin):
            raise ConfigError(
                f"daemon.http_origins[{i}]", 'must be an origin such as "http://localhost:3000"'
            )
        scheme, _, host = origin.partition("://")
        default = _DEFAULT_PORTS[scheme]
        if not host.endswith("]") and host.rpartition(":")[2] == default:
            # A browser leaves the scheme's own port out of the Origin it sends.
            bare = f"{scheme}://{host.rpartition(':')[0]}"
            raise ConfigError(
                f"daemon.http_origins[{i}]",
                f"{masked_repr(origin)} names {scheme}'s default port {default}, which "
                f"browsers leave out of the origin they send, so it would never match; "
                f"write it as {masked_repr(bare)}",
            )
    if d.http_listen is None:
        for key, given in (
            ("http_allow_remote", d.http_allow_remote),
            ("http_origins", d.http_origins),
        ):
            if given:
                raise ConfigError(
                    f"daemon.{key}", "only applies with http_listen (the HTTP endpoint)"
                )
        return
    host, _ = parse_listen(d.http_listen)
    if not is_loopback(host) and not d.http_allow_remote:
        raise ConfigError(
            "daemon.http_listen",
            'the host is not a loopback address; write one, such as "127.0.0.1:8765", '
            "or set http_allow_remote = true to serve "
            "other machines (the bearer token is then all that protects mcpd)",
        )


def validate_grants(config: Config) -> None:
    """No server's host loopback grant reaches mcpd's own HTTP endpoint: through it, the
    connections a server makes there would be mcpd's relay's, not the server's."""
    if config.daemon.http_listen is None:
        return
    _, endpoint = parse_listen(config.daemon.http_listen)
    for alias, server in config.servers.items():
        for i, value in enumerate(server.host_loopback):
            if loopback_port(value) == endpoint:
                raise ConfigError(
                    f"servers.{alias}.host_loopback[{i}]",
                    f"port {endpoint} is mcpd's own HTTP endpoint (daemon.http_listen), "
                    f"which is never granted to a server: {alias} would reach it as mcpd",
                )


def check_template(where: str, template: str) -> None:
    if "{tool}" not in template:
        raise ConfigError(where, "must contain {tool}")
    unknown = set(_PLACEHOLDER.findall(template)) - {"alias", "tool"}
    if unknown:
        raise ConfigError(where, f"unknown placeholder {{{sorted(unknown)[0]}}}")


def validate_profiles(config: Config) -> None:
    main_socket = os.path.abspath(config.socket_path())
    sockets: dict[str, str] = {}
    for name, profile in config.profiles.items():
        where = f"profiles.{name}"
        if not ALIAS_RE.match(name):
            raise ConfigError(where, "a profile name must be made of A-Z a-z 0-9 _ -")
        servers = _resolve_servers(where, profile, config)
        for kind, patterns in (
            ("tools", profile.tools),
            ("prompts", profile.prompts),
            ("resources", profile.resources),
        ):
            _check_patterns(f"{where}.{kind}", patterns, servers)
        for i, pattern in enumerate(profile.pinned):
            _check_pattern(f"{where}.pinned[{i}]", pattern, servers)
        if profile.template is not None:
            check_template(f"{where}.template", profile.template)
        if profile.max_length is not None and not 16 <= profile.max_length <= 1024:
            raise ConfigError(f"{where}.max_length", "must be between 16 and 1024")
        if profile.max_tools is not None and profile.max_tools < 1:
            raise ConfigError(f"{where}.max_tools", "must be at least 1")
        for i, pattern in enumerate(profile.allow_servers):
            at = f"{where}.allow_servers[{i}]"
            if not pattern:
                raise ConfigError(at, "is empty")
            if not is_glob(pattern) and pattern not in config.servers:
                raise ConfigError(at, f"{masked_repr(pattern)} is not a configured server")
        _check_socket(where, name, profile, main_socket, sockets)


def _resolve_servers(where: str, profile: ProfileConfig, config: Config) -> set[str]:
    found: set[str] = set()
    if not profile.servers:
        raise ConfigError(f"{where}.servers", 'is empty; use ["*"] for every server')
    for i, pattern in enumerate(profile.servers):
        at = f"{where}.servers[{i}]"
        if not pattern:
            raise ConfigError(at, "is empty")
        matched = {a for a in config.servers if fnmatchcase(a, pattern)}
        if not matched:
            known = ", ".join(sorted(config.servers)) or "none configured"
            what = "matches no server" if is_glob(pattern) else "is not a configured server"
            raise ConfigError(at, f"{masked_repr(pattern)} {what} (servers: {known})")
        found |= matched
    return found


def _check_patterns(where: str, patterns: Patterns, servers: set[str]) -> None:
    for key, listed in (("allow", patterns.allow), ("deny", patterns.deny)):
        for i, pattern in enumerate(listed):
            _check_pattern(f"{where}.{key}[{i}]", pattern, servers)


def _check_pattern(where: str, pattern: str, servers: set[str]) -> None:
    alias, name = split_pattern(pattern)
    if not name:
        raise ConfigError(where, "is empty")
    if alias is not None and not any(fnmatchcase(a, alias) for a in servers):
        listed = ", ".join(sorted(servers))
        raise ConfigError(
            where, f"{masked_repr(alias)} is not one of this profile's servers ({listed})"
        )


def _check_socket(
    where: str, name: str, profile: ProfileConfig, main: str, sockets: dict[str, str]
) -> None:
    try:
        mode = int(profile.socket_mode, 8)
    except ValueError:
        raise ConfigError(
            f"{where}.socket_mode", 'must be an octal string such as "0660"'
        ) from None
    if not 0 <= mode <= 0o777:
        raise ConfigError(f"{where}.socket_mode", "must be between 0000 and 0777")
    check_groups(profile.allow_groups, f"{where}.allow_groups")
    check_uids(profile.allow_uids, f"{where}.allow_uids")
    if profile.socket is None:
        own = (
            ("allow_uids", profile.allow_uids),
            ("allow_groups", profile.allow_groups),
            ("socket_mode", profile.socket_mode != ProfileConfig().socket_mode),
        )
        for key, given in own:
            if given:
                raise ConfigError(f"{where}.{key}", "only applies to a profile with its own socket")
        return
    if name == DEFAULT_PROFILE:
        raise ConfigError(f"{where}.socket", "the default profile is served on [daemon] socket")
    path = os.path.abspath(profile.socket)
    if path == main:
        raise ConfigError(f"{where}.socket", "is the daemon's own socket")
    if path in sockets:
        raise ConfigError(f"{where}.socket", f"is profile {sockets[path]!r}'s socket too")
    sockets[path] = name
