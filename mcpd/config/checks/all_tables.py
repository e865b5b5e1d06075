"""The checks of a config read into the model's structs, beyond its types: every error
of its tables, each naming its key.

The tables are checked each on its own, so that one reading shows every error they
hold; what ties them together (a profile's servers, a policy's names, a grant against
the endpoint) is checked once they are sound, since it reads them as such.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping

import msgspec

from ..sandboxing.keys import limits_errors
from ..tables.hosts import builtin_profiles
from ..tables.model import (
    LIST_LIMIT_KEYS,
    MAX_AUDIT_FILES,
    Config,
    ConfigError,
    DaemonConfig,
    NamingConfig,
    duration_problem,
)
from ..tables.profiles import DEFAULT_PROFILE
from .endpoints import check_groups, check_uids, validate_grants, validate_http, validate_profiles
from .policy_rules import validate_policy
from .servers import known_errors
from .strings import daemon_string_errors


def config_errors(
    config: Config, unexpanded: Mapping[str, Collection[str]] | None = None
) -> list[ConfigError]:
    """Every error of ``config``, in the order of its tables. ``unexpanded``: per
    server, the key paths whose values were left as written."""
    errors = list(_tables(config, unexpanded))
    return errors or list(_across(config))


def _first(check: Callable[[], None]) -> Iterator[ConfigError]:
    """The error of a check that stops at its first, if any."""
    try:
        check()
    except ConfigError as exc:
        yield exc


def _tables(
    config: Config, unexpanded: Mapping[str, Collection[str]] | None
) -> Iterator[ConfigError]:
    """Each table's errors: the daemon's (with naming's among them), then each
    server's."""
    d = config.daemon
    strings = list(daemon_string_errors(config))
    yield from strings
    try:
        mode = config.socket_mode()
    except ValueError:
        yield ConfigError("daemon.socket_mode", 'must be an octal string such as "0600"')
    else:
        if not 0 <= mode <= 0o777:
            yield ConfigError("daemon.socket_mode", "must be between 0000 and 0777")
    yield from _duration_errors(d)
    yield from _count_errors(d)
    yield from _first(lambda: check_uids(d.allow_uids, "daemon.allow_uids"))
    if not strings:  # a group's name the system cannot take is not looked up
        yield from _first(lambda: check_groups(d.allow_groups, "daemon.allow_groups"))
    yield from _size_errors(d)
    yield from _naming_errors(config.naming)
    if d.max_tools < 1:
        yield ConfigError("daemon.max_tools", "must be at least 1")
    yield from limits_errors("daemon.limits", d.limits)
    for alias, server in config.servers.items():
        yield from known_errors(alias, server, (unexpanded or {}).get(alias, ()))


def _duration_errors(d: DaemonConfig) -> Iterator[ConfigError]:
    """The daemon's times: each a duration, and each cap no less than its base."""
    fields = msgspec.structs.asdict(d)  # the times checked alike, by key
    for key in (
        "call_timeout",
        "max_call_time",
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
        "http_header_timeout",
        "first_message_timeout",
    ):
        problem = duration_problem(fields[key])
        if problem is not None:
            yield ConfigError(f"daemon.{key}", problem)
    problem = duration_problem(d.health_interval, off=True)
    if problem is not None:
        yield ConfigError("daemon.health_interval", problem)
    # Compared only when each is a duration, so that one bad value is said once.
    sound = {
        key: duration_problem(fields[key]) is None
        for key in ("backoff_base", "backoff_cap", "cooldown_base", "cooldown_cap")
    }
    if sound["backoff_base"] and sound["backoff_cap"] and d.backoff_cap < d.backoff_base:
        yield ConfigError("daemon.backoff_cap", "must be at least backoff_base")
    if sound["cooldown_base"] and sound["cooldown_cap"] and d.cooldown_cap < d.cooldown_base:
        yield ConfigError("daemon.cooldown_cap", "must be at least cooldown_base")


def _count_errors(d: DaemonConfig) -> Iterator[ConfigError]:
    """How many of each thing the daemon allows, and how much of the audit log it
    keeps."""
    fields = msgspec.structs.asdict(d)  # the counts checked alike, by key
    for key in (
        "max_restarts",
        "failure_threshold",
        "queue_size",
        "max_connections",
        "max_inflight_per_connection",
        *LIST_LIMIT_KEYS,
        "read_budget",
        "audit_files",
    ):
        if fields[key] < 1:
            yield ConfigError(f"daemon.{key}", "must be at least 1")
    if d.audit_files > MAX_AUDIT_FILES:
        # Each rotation renames every file kept, and `mcpd calls` reads back as many.
        yield ConfigError("daemon.audit_files", f"must be at most {MAX_AUDIT_FILES}")
    if d.audit_max_bytes < 64 * 1024:
        yield ConfigError("daemon.audit_max_bytes", "must be at least 65536")


def _size_errors(d: DaemonConfig) -> Iterator[ConfigError]:
    """The sizes of what the daemon reads and answers, and its connections per user."""
    if d.max_line_bytes < 4096:
        yield ConfigError("daemon.max_line_bytes", "must be at least 4096")
    if d.result_budget_chars < 100:
        yield ConfigError("daemon.result_budget_chars", "must be at least 100")
    if d.max_connections_per_uid is not None and d.max_connections_per_uid < 1:
        yield ConfigError("daemon.max_connections_per_uid", "must be at least 1")
    if d.page_size < 0:
        yield ConfigError("daemon.page_size", "must be >= 0 (0 = everything in one page)")
    if d.max_pages < 1:
        yield ConfigError("daemon.max_pages", "must be at least 1")


def _naming_errors(naming: NamingConfig) -> Iterator[ConfigError]:
    """The template of the names agents see, and how long one may be."""
    if "{tool}" not in naming.template:
        yield ConfigError("naming.template", "must contain {tool}")
    unknown = set(re.findall(r"\{([^}]*)\}", naming.template)) - {"alias", "tool"}
    if unknown:
        yield ConfigError("naming.template", f"unknown placeholder {{{sorted(unknown)[0]}}}")
    if not 16 <= naming.max_length <= 1024:
        yield ConfigError("naming.max_length", "must be between 16 and 1024")


def _across(config: Config) -> Iterator[ConfigError]:
    """The first error of what ties the tables together: each of these checks reads
    what those before it passed as sound."""
    profiles = {DEFAULT_PROFILE, *config.profiles, *builtin_profiles(config.profiles)}
    checks: tuple[Callable[[], None], ...] = (
        lambda: validate_http(config.daemon),
        lambda: validate_grants(config),
        lambda: validate_profiles(config),
        lambda: validate_policy(config.policy, config.servers, profiles),
    )
    for check in checks:
        for error in _first(check):
            yield error
            return
