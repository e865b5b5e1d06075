"""The checks of ``[[policy]]`` (``policy``), each error naming the rule and its key."""

from __future__ import annotations

import math
from collections.abc import Collection

from .glob import Glob, is_glob
from .model import ConfigError
from .policy import MAX_ASK_TIMEOUT, MAX_REASON, PolicyRule, parse_rate


def validate_policy(
    rules: list[PolicyRule], servers: Collection[str], profiles: Collection[str]
) -> None:
    """``servers``: the configured aliases; ``profiles``: every profile an agent can
    use (configured, built in, ``default``)."""
    for i, rule in enumerate(rules):
        where = f"policy[{i}]"
        if not rule.tools:
            raise ConfigError(f"{where}.tools", 'is empty; use ["*"] for every tool')
        for j, pattern in enumerate(rule.tools):
            _check_tool(f"{where}.tools[{j}]", pattern, servers)
        for j, pattern in enumerate(rule.servers):
            _check_name(f"{where}.servers[{j}]", pattern, servers, "configured server")
        for j, pattern in enumerate(rule.profiles):
            _check_name(f"{where}.profiles[{j}]", pattern, profiles, "profile")
        if rule.annotations is not None and not rule.annotations.wanted():
            raise ConfigError(
                f"{where}.annotations", "names no hint (readOnlyHint, destructiveHint, ...)"
            )
        if rule.reason is not None and not 0 < len(rule.reason) <= MAX_REASON:
            raise ConfigError(f"{where}.reason", f"must be 1 to {MAX_REASON} characters")
        if rule.rate is not None:
            if rule.action == "deny":
                raise ConfigError(f"{where}.rate", "a denied call is never let through to count")
            try:
                parse_rate(rule.rate)
            except ValueError as exc:
                raise ConfigError(f"{where}.rate", str(exc)) from None
        asking = (("timeout", rule.timeout), ("remember", rule.remember), ("decider", rule.decider))
        for key, value in asking:
            if value is not None and rule.action != "ask":
                raise ConfigError(f"{where}.{key}", 'only applies to action = "ask"')
        if rule.timeout is not None and not (
            0 < rule.timeout <= MAX_ASK_TIMEOUT and math.isfinite(rule.timeout)
        ):
            raise ConfigError(f"{where}.timeout", f"must be positive, at most {MAX_ASK_TIMEOUT:g}")


def _check_tool(where: str, pattern: str, servers: Collection[str]) -> None:
    if not pattern:
        raise ConfigError(where, "is empty")
    alias, slash, _ = pattern.partition("/")
    # Aliases hold no "/": a pattern with one names its server first, and a server
    # that is not there is a typo that would leave the rule matching nothing.
    if slash and alias and not is_glob(alias) and alias not in servers:
        known = ", ".join(sorted(servers)) or "none configured"
        raise ConfigError(where, f"{alias!r} is not a configured server (servers: {known})")


def _check_name(where: str, pattern: str, names: Collection[str], kind: str) -> None:
    if not pattern:
        raise ConfigError(where, "is empty")
    glob = Glob(pattern)
    if any(glob.match(n) for n in names):
        return
    known = ", ".join(sorted(names)) or "none"
    what = "matches no" if is_glob(pattern) else "is not a"
    raise ConfigError(where, f"{pattern!r} {what} {kind} ({kind}s: {known})")
