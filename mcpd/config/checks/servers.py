"""What a server's table must satisfy beyond its types, one error at a time.

Errors are yielded in the order the checks run, so that the caller can pass over those
about values not known yet (left unexpanded) and still see the rest.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection, Iterator
from typing import Final

import msgspec

from protocol.http.mcp_headers import TRANSPORT_HEADERS
from protocol.shown.stand_ins import masked_repr

from ...local.ownership.trusted_path import untrusted_file
from ..credentials.held import credential_header
from ..sandboxing.keys import grant_errors
from ..tables.model import (
    ALIAS_RE,
    LIST_LIMIT_KEYS,
    ConfigError,
    alias_for,
    duration_problem,
    key_as_written,
)
from ..tables.servertable import AuthConfig, ServerConfig, ToolsConfig
from .command_line import command_line_errors
from .strings import control_named, server_string_errors, unpassable, url_errors


def _ca_file_errors(at: str, path: str) -> Iterator[ConfigError]:
    """The CA bundle decides whom mcpd believes is the server, and so who gets its
    credentials: one another user could write would let them stand in for it."""
    problem = unpassable(path)
    if problem is not None:
        yield ConfigError(at, problem)
        return
    try:
        st = os.stat(path)
    except OSError:
        yield ConfigError(at, f"{masked_repr(path)} does not exist")
        return
    if not stat.S_ISREG(st.st_mode):
        yield ConfigError(at, f"{masked_repr(path)} is not a regular file")
        return
    untrusted = untrusted_file(path, st)
    if untrusted is not None:
        yield ConfigError(at, f"not trusted: {untrusted}")


# The keys that do something for one kind of server only: in the other's table they
# would be read and then do nothing.
HTTP_ONLY: Final = ("url", "headers", "ca_file", "connect_timeout", "tls_verify")
STDIO_ONLY: Final = ("args", "env", "cwd", "inherit_env", "idle_stop")


def misplaced_keys(
    where: str, given: Collection[str], *, stdio: bool, lazy: bool
) -> Iterator[ConfigError]:
    """The errors of keys in ``given`` that do nothing for a server of its kind (as
    read from the file, ``given`` holds every key written, also one written with the
    value it would have anyway)."""
    for key in HTTP_ONLY if stdio else STDIO_ONLY:
        if key in given:
            applies = "HTTP servers (with `url`)" if stdio else "stdio servers (with `command`)"
            yield ConfigError(f"{where}.{key}", f"only applies to {applies}")
    if stdio and not lazy and "idle_stop" in given:
        yield ConfigError(f"{where}.idle_stop", 'only applies with start = "lazy"')


def known_errors(
    alias: str, s: ServerConfig, unknown: Collection[str] = ()
) -> Iterator[ConfigError]:
    """The server's errors but those about a key path in ``unknown`` (or under it)."""
    for error in server_errors(alias, s):
        if not any(error.path == p or error.path.startswith((p + ".", p + "[")) for p in unknown):
            yield error


def server_errors(alias: str, s: ServerConfig) -> Iterator[ConfigError]:
    where = f"servers.{key_as_written(alias)}"
    yield from server_string_errors(where, s)
    if not ALIAS_RE.match(alias):
        said = "an alias must be non-empty and made of A-Z a-z 0-9 _ -"
        yield ConfigError(where, said + (f'; "{alias_for(alias)}" would do' if alias else ""))
    if (s.command is None) == (s.url is None):
        yield ConfigError(where, "give exactly one of `command` (stdio) or `url` (HTTP)")
    if s.command is not None and not s.command.strip():
        yield ConfigError(f"{where}.command", "is empty")
    yield from command_line_errors(where, s)
    if s.url is not None and not re.match(r"^https?://[^/\s]+", s.url):
        yield ConfigError(f"{where}.url", "must be an http:// or https:// URL")
    elif s.url is not None:
        # The transport's own reading of it, here: a URL it cannot use (credentials in
        # it, a port out of range) is the config's error, not the server's at each start.
        # Imported here: a config of stdio servers alone loads no HTTP code.
        from protocol.http.parts import parse_url

        try:
            parse_url(s.url)
        except ValueError as exc:
            yield ConfigError(f"{where}.url", str(exc))
        else:
            yield from url_errors(f"{where}.url", s.url)
    if (s.command is None) != (s.url is None):
        # Only once the kind is clear: with both given, the user never chose a transport.
        if s.command is not None and s.transport != "stdio":
            said = f'"{s.transport}" needs a `url`, not a `command`'
            yield ConfigError(f"{where}.transport", said)
        if s.url is not None and s.transport == "stdio":
            yield ConfigError(f"{where}.transport", '"stdio" needs a `command`, not a `url`')
        fields, defaults = msgspec.structs.asdict(s), msgspec.structs.asdict(ServerConfig())
        given = [k for k in (*HTTP_ONLY, *STDIO_ONLY) if fields[k] != defaults[k]]
        yield from misplaced_keys(where, given, stdio=s.command is not None, lazy=s.start == "lazy")
    for name in s.headers:
        if name.lower() in TRANSPORT_HEADERS:
            yield ConfigError(f"{where}.headers.{name}", "is a header mcpd writes itself")
    durations = {"connect_timeout": s.connect_timeout, "idle_stop": s.idle_stop}
    if s.call_timeout is not None:
        durations["call_timeout"] = s.call_timeout
    durations.update({f"tool_timeouts.{tool}": t for tool, t in s.tool_timeouts.items()})
    for key, seconds in durations.items():
        problem = duration_problem(seconds)
        if problem is not None:
            yield ConfigError(f"{where}.{key}", problem)
    if s.max_concurrency is not None and s.max_concurrency < 1:
        yield ConfigError(f"{where}.max_concurrency", "must be at least 1")
    fields = msgspec.structs.asdict(s)
    for key in (*LIST_LIMIT_KEYS, "read_budget"):
        limit = fields[key]
        if limit is not None and limit < 1:
            yield ConfigError(f"{where}.{key}", "must be at least 1")
    if s.ca_file is not None:
        yield from _ca_file_errors(f"{where}.ca_file", s.ca_file)
    if s.start == "lazy" and s.command is None:
        yield ConfigError(f"{where}.start", '"lazy" only applies to stdio servers (with `command`)')
    yield from grant_errors(where, s)
    yield from _tools_errors(f"{where}.tools", s.tools)
    yield from _tools_errors(f"{where}.prompts", s.prompts)
    if len(set(s.relay)) != len(s.relay):
        yield ConfigError(f"{where}.relay", "names a request kind twice")
    if s.auth is not None:
        yield from _auth_errors(where, s, s.auth)


def unpinned_client(alias: str, s: ServerConfig) -> str | None:
    """The warning for a pre-registered client's secret or key that no ``issuer`` ties
    to its authorization server (check-config and the journal both say it)."""
    a = s.auth
    if a is None or a.issuer is not None or a.client_id is None:
        return None
    if a.client_secret is not None:
        what, sent = "client_secret", "the secret"
    elif a.private_key is not None:
        what, sent = "private_key", "assertions signed with the key"
    else:
        return None
    return (
        f"servers.{alias}.auth: a {what} with no issuer: mcpd sends {sent} to whichever "
        "authorization server the server names, now or after it moves, so whoever runs "
        f"the server can have {sent} sent to an authorization server of theirs; set "
        f"servers.{alias}.auth.issuer to the one the client was registered at"
    )


def _off_loopback_http_host(url: str | None) -> str | None:
    """The host of a plain ``http://`` URL that is not this machine's loopback (None:
    https, loopback, or no URL mcpd can read, which has its own error)."""
    if url is None or url[:7].lower() != "http://":
        return None
    # Imported here: a config of stdio servers alone loads no HTTP code.
    from protocol.http.parts import parse_url
    from protocol.oauth.ssrf import is_loopback_host

    try:
        origin, _ = parse_url(url)
    except ValueError:
        return None
    return None if is_loopback_host(origin.host) else origin.host


def plain_http_credentials(alias: str, s: ServerConfig) -> list[str]:
    """The warnings for credential headers a server's plain ``http://`` URL sends across
    the network in clear (check-config says them; OAuth there is a config error)."""
    host = _off_loopback_http_host(s.url)
    if host is None:
        return []
    return [
        f"servers.{alias}.headers.{name}: a credential sent over plain http to {host}, "
        "which is not this machine: whoever can watch the network on the way can read "
        f"it and use it; give servers.{alias}.url as https:// if the server has it"
        for name in s.headers
        if credential_header(name)
    ]


def _auth_errors(where: str, s: ServerConfig, a: AuthConfig) -> Iterator[ConfigError]:
    at = f"{where}.auth"
    if s.url is None:
        yield ConfigError(at, "only applies to HTTP servers (with `url`)")
    in_clear = (
        "OAuth needs https there, as its client secret and tokens would cross the network "
        "in clear (plain http is for this machine's loopback only: 127.0.0.1, ::1, localhost)"
    )
    host = _off_loopback_http_host(s.url)
    if host is not None:
        yield ConfigError(f"{where}.url", f"is plain http to {host}, not this machine: {in_clear}")
    for name in s.headers:
        if name.lower() == "authorization":
            yield ConfigError(
                f"{where}.headers.{name}", f"cannot be combined with [{at}]: mcpd sends the token"
            )
    if a.type == "client_credentials":
        if a.client_id is None:
            yield ConfigError(f"{at}.client_id", "is needed for client_credentials")
        if a.client_secret is None and a.private_key is None:
            yield ConfigError(at, "client_credentials needs client_secret or private_key")
    if (a.client_secret is not None or a.private_key is not None) and a.client_id is None:
        key = "client_secret" if a.client_secret is not None else "private_key"
        yield ConfigError(f"{at}.{key}", "needs client_id (the client it belongs to)")
    for key, value in (("client_id", a.client_id), ("client_secret", a.client_secret)):
        if value is not None and not value.strip():
            yield ConfigError(f"{at}.{key}", "is empty")
        elif value is not None and (control := control_named(value)) is not None:
            # No authorization server takes one (a secret read from a file with its
            # line end, most often): said here rather than as its refusal at login.
            yield ConfigError(f"{at}.{key}", f"holds {control}, which no client value may")
    for key, url in (("client_metadata_url", a.client_metadata_url), ("issuer", a.issuer)):
        if url is not None:
            yield from url_errors(f"{at}.{key}", url)
    if a.client_metadata_url is not None and not re.match(
        r"^https://[^/\s#]+/[^\s#]+$", a.client_metadata_url
    ):
        yield ConfigError(
            f"{at}.client_metadata_url", "must be an https:// URL with a path and no fragment"
        )
    if a.issuer is not None and not re.match(r"^https?://[^/\s#?]+[^\s#?]*$", a.issuer):
        yield ConfigError(f"{at}.issuer", "must be an http(s) URL without query or fragment")
    elif (host := _off_loopback_http_host(a.issuer)) is not None:
        yield ConfigError(f"{at}.issuer", f"is plain http to {host}, not this machine: {in_clear}")
    for i, scope in enumerate(a.scopes or []):
        if not scope or any(c.isspace() or c in '"\\' or ord(c) < 0x20 for c in scope):
            yield ConfigError(f"{at}.scopes[{i}]", "must be one scope token (no spaces)")
    if not 0 <= a.redirect_port <= 65535:
        yield ConfigError(f"{at}.redirect_port", "must be a port number (0: any free port)")
    if a.private_key is not None:
        from protocol.oauth import OAuthConfigError, load_signing_key

        try:
            load_signing_key(a.private_key)
        except OAuthConfigError as exc:
            yield ConfigError(f"{at}.private_key", str(exc))
    method = a.token_endpoint_auth_method
    if method == "private_key_jwt" and a.private_key is None:
        yield ConfigError(f"{at}.token_endpoint_auth_method", "private_key_jwt needs private_key")
    if method in ("client_secret_basic", "client_secret_post") and a.client_secret is None:
        yield ConfigError(f"{at}.token_endpoint_auth_method", f"{method} needs client_secret")


def _tools_errors(where: str, t: ToolsConfig) -> Iterator[ConfigError]:
    for key, patterns in (("allow", t.allow), ("deny", t.deny)):
        for i, pattern in enumerate(patterns):
            if not pattern:
                yield ConfigError(f"{where}.{key}[{i}]", "is empty")
    targets: dict[str, str] = {}
    for tool, new in t.rename.items():
        if not new.strip():
            yield ConfigError(f"{where}.rename.{tool}", "is empty")
        if new in targets:
            yield ConfigError(
                f"{where}.rename.{tool}",
                f"{targets[new]!r} is already renamed to {masked_repr(new)}",
            )
        targets[new] = tool
