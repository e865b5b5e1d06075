"""What a stdio server's environment holds: a short default set, the names its config
lets it inherit, and its own variables. No trio here (``transports.stdio.process.launch``).

A server inherits from mcpd's environment only:

- the default set: what any program needs to run as its user (``HOME``, ``LOGNAME``,
  ``PATH``, ``SHELL``, ``TERM``, ``USER``), the locale (``LANG``, ``LANGUAGE``,
  ``LC_*``), ``TZ``, the proxy variables and the CA bundles a proxy needs, and the
  shared package caches (``npm_config_cache``, ``UV_CACHE_DIR``);
- the names and ``PREFIX_*`` patterns of its ``inherit_env`` list, or everything when
  ``inherit_env`` is true;

never what systemd hands to mcpd alone, what mcpd itself reads (``MCPD_*``), or a
``withheld`` name: a variable the config resolves for another server (a header secret
of an HTTP server) reaches no other server through a pattern or ``true``, only through
its exact name in a list. The server's own ``env`` is added as written, last.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from typing import Final

# Variables systemd hands to the main process only (plus mcpd's own test-fault switches).
# A child that inherited them could send READY=1 or WATCHDOG=1 on mcpd's behalf, believe
# it owns mcpd's listening sockets, or think its stderr is a journal stream when it is
# really a pipe into mcpd.
PARENT_ONLY_VARS: Final = frozenset(
    {
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "JOURNAL_STREAM",
        "SYSTEMD_EXEC_PID",
        "FDSTORE",
        "MEMORY_PRESSURE_WATCH",
        "MEMORY_PRESSURE_WRITE",
        "TRIGGER_UNIT",
        "TRIGGER_PATH",
        "TRIGGER_TIMER_REALTIME_USEC",
        "TRIGGER_TIMER_MONOTONIC_USEC",
        "MAINPID",
        "MCPD_TEST_FAULTS",
        "MCPD_TEST_WEDGE_SECONDS",
    }
)

# Never inherited, not even with ``inherit_env = true``: the service's credentials and
# directories, and whatever configures mcpd itself.
NEVER_INHERITED: Final = PARENT_ONLY_VARS | {
    "CREDENTIALS_DIRECTORY",
    "RUNTIME_DIRECTORY",
    "STATE_DIRECTORY",
    "CACHE_DIRECTORY",
    "LOGS_DIRECTORY",
    "CONFIGURATION_DIRECTORY",
}
NEVER_PREFIXES: Final = ("LISTEN_", "MCPD_")

DEFAULT_NAMES: Final = frozenset(
    {
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "USER",
        "LANG",
        "LANGUAGE",
        "TZ",
        "http_proxy",
        "https_proxy",
        "ftp_proxy",
        "all_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "FTP_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
        "REQUESTS_CA_BUNDLE",
        "npm_config_cache",
        "UV_CACHE_DIR",
    }
)
DEFAULT_PREFIXES: Final = ("LC_",)


def never_inherited(name: str) -> bool:
    return name in NEVER_INHERITED or name.startswith(NEVER_PREFIXES)


def in_default_set(name: str) -> bool:
    return name in DEFAULT_NAMES or name.startswith(DEFAULT_PREFIXES)


def matches(name: str, pattern: str) -> bool:
    """``NAME`` matches itself; ``PREFIX_*`` every name that starts with ``PREFIX_``."""
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def environment(
    inherit: bool | Sequence[str],
    own: Mapping[str, str] | None,
    base: Mapping[str, str] | None = None,
    *,
    withheld: Collection[str] = (),
    provided: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The child's environment from ``base`` (mcpd's own by default): what it inherits,
    then what mcpd provides (its own ``HOME``), then its own ``own`` variables."""
    base = os.environ if base is None else base
    patterns = () if isinstance(inherit, bool) else tuple(inherit)
    named = {p for p in patterns if not p.endswith("*")}
    env: dict[str, str] = {}
    for name, value in base.items():
        if never_inherited(name):
            continue
        if name in named:
            env[name] = value  # asked for by name: the config says it is this server's
        elif name in withheld and not in_default_set(name):
            continue
        elif inherit is True or in_default_set(name) or any(matches(name, p) for p in patterns):
            env[name] = value
    if provided:
        env.update(provided)
    if own:
        env.update(own)
    return env
