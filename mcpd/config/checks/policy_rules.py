"""The checks of ``[[policy]]`` (``policy``), each error naming the rule and its key;
and ``leavable``, the warning for a rule whose ``profiles`` an agent can step out of.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from fnmatch import fnmatchcase

from protocol.shown.stand_ins import masked_repr

from ..tables.glob import Glob, is_glob
from ..tables.hosts import builtin_profiles
from ..tables.model import Config, ConfigError
from ..tables.policy import MAX_ASK_TIMEOUT, MAX_REASON, PolicyRule, parse_rate
from ..tables.profiles import DEFAULT_PROFILE, EVERYTHING, ProfileConfig, split_pattern


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
        raise ConfigError(
            where, f"{masked_repr(alias)} is not a configured server (servers: {known})"
        )


def _check_name(where: str, pattern: str, names: Collection[str], kind: str) -> None:
    if not pattern:
        raise ConfigError(where, "is empty")
    glob = Glob(pattern)
    if any(glob.match(n) for n in names):
        return
    known = ", ".join(sorted(names)) or "none"
    what = "matches no" if is_glob(pattern) else "is not a"
    raise ConfigError(where, f"{masked_repr(pattern)} {what} {kind} ({kind}s: {known})")


def leavable(config: Config) -> list[str]:
    """One warning per ``deny`` or ``ask`` rule scoped to profiles that an agent can
    step out of: an agent on the daemon's socket in one of them picks another
    (``mcpd/useProfile``, ``?profile=``) that shows tools of a server the rule is
    about. Any agent there may pick a profile without a socket of its own; the
    daemon's own user and root (and the TCP endpoint's token) any profile. Only an
    agent on a profile's own socket has that profile and no other. A host's built-in
    profile counts as the default one."""
    builtin = builtin_profiles(config.profiles)
    every = {DEFAULT_PROFILE: EVERYTHING, **builtin, **config.profiles}
    out = []
    for i, rule in enumerate(config.policy):
        if rule.action == "allow" or not rule.profiles:
            continue
        within = _scope(rule, every, builtin)
        inside = [p for name, p in every.items() if name in within and p.socket is None]
        aliases = [a for a in sorted(config.servers) if _about(rule, a)]
        shared = [a for a in aliases if any(_shows(p, a) for p in inside)]
        outside = {
            name: [a for a in shared if _shows(p, a)]
            for name, p in sorted(every.items())
            if name not in within
        }
        escapes = {name: found for name, found in outside.items() if found}
        if not escapes:
            continue
        out.append(_leaving(i, rule, DEFAULT_PROFILE in within and bool(builtin), escapes, every))
    return out


def _leaving(
    i: int,
    rule: PolicyRule,
    hosts_too: bool,
    escapes: dict[str, list[str]],
    every: dict[str, ProfileConfig],
) -> str:
    named = ", ".join(rule.profiles) + (
        " (and so in the hosts' built-in ones)" if hosts_too else ""
    )
    servers = ", ".join(sorted({a for found in escapes.values() for a in found}))
    if len(escapes) == 1:
        picked, them = f"the profile {', '.join(escapes)}, which shows", "it"
    else:
        picked, them = f"the profiles {', '.join(escapes)}, which show", "them"
    socketed = [name for name in escapes if every[name].socket is not None]
    how = "mcpd/useProfile, ?profile="
    if socketed:
        how += f"; {', '.join(socketed)} by the daemon's own user and root"
    return (
        f"policy[{i}] ({rule.action}) holds only for agents in {named}; an agent on the "
        f"daemon's socket steps out of it by picking {picked} tools of {servers} too "
        f"({how}): name {them} in the rule's profiles as well, or leave its profiles out"
    )


def _scope(rule: PolicyRule, names: Collection[str], builtin: Collection[str]) -> set[str]:
    """Those of ``names`` the rule's ``profiles`` are about: a built-in profile is when
    the default is."""
    globs = [Glob(p) for p in rule.profiles]
    default = any(g.match(DEFAULT_PROFILE) for g in globs)
    return {n for n in names if any(g.match(n) for g in globs) or (default and n in builtin)}


def _about(rule: PolicyRule, alias: str) -> bool:
    """Whether the rule may be about a tool of the server ``alias``."""
    if rule.servers and not any(Glob(p).match(alias) for p in rule.servers):
        return False
    # A pattern with a "/" names its server first; one without may be about any.
    return any(
        not slash or Glob(server).match(alias)
        for server, slash, _ in (p.partition("/") for p in rule.tools)
    )


def _shows(profile: ProfileConfig, alias: str) -> bool:
    """Whether the profile may show tools of the server ``alias``."""
    if not any(fnmatchcase(alias, p) for p in profile.servers):
        return False
    allowed = [split_pattern(p)[0] for p in profile.tools.allow]
    return not allowed or any(a is None or fnmatchcase(alias, a) for a in allowed)
