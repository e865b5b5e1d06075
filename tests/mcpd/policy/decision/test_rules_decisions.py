"""``[[policy]]``: the rules as the config states them, checked with errors that name
the key, and the decision they give a call: first match wins, the default allows,
annotations count only from trusted servers, rates refuse with a retry time."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.glob import Glob
from mcpd.config.tables.hosts import HOSTS, host_profile
from mcpd.config.tables.model import ConfigError, NamingConfig
from mcpd.config.tables.policy import Rate, parse_rate, unreachable
from mcpd.config.tables.profiles import EVERYTHING, ProfileConfig
from mcpd.policy.agent import AgentInfo
from mcpd.policy.decision import refusals
from mcpd.policy.decision.gate import CallGate
from mcpd.policy.decision.rates import PRUNE_AT, RateLimits
from mcpd.policy.decision.rules import CallFacts, Policy, facts_of
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.policy.waiting.approvals import Approvals
from mcpd.registry.profiles.views import ProfileView
from mcpd.registry.tables.catalog import Catalog
from mcpd.registry.tables.shown import Entry
from protocol.mcp import core as mcp

SERVERS = {"github": {"command": "true"}, "notes": {"command": "true"}}


def config(*rules: dict[str, Any], **extra: Any) -> Any:
    return parse_config({"servers": SERVERS, "policy": list(rules), **extra}, env={})


def facts(name: str = "mcp__github__delete_repo", **kw: Any) -> CallFacts:
    base: dict[str, Any] = {
        "name": name,
        "server": "github",
        "original": "delete_repo",
        "profile": "default",
    }
    return CallFacts(**{**base, **kw})


# -- the config --


@pytest.mark.parametrize(
    ("rule", "where", "words"),
    [
        ({}, "policy[0]", "action"),
        ({"action": "maybe"}, "policy[0].action", 'give one of "allow", "ask", "deny"'),
        ({"action": "ask", "tools": []}, "policy[0].tools", "empty"),
        ({"action": "ask", "tools": [""]}, "policy[0].tools[0]", "empty"),
        ({"action": "ask", "tools": ["gihtub/*"]}, "policy[0].tools[0]", "'gihtub'"),
        ({"action": "ask", "servers": ["gihtub"]}, "policy[0].servers[0]", "configured server"),
        ({"action": "ask", "servers": ["x*"]}, "policy[0].servers[0]", "matches no"),
        ({"action": "ask", "profiles": ["ci"]}, "policy[0].profiles[0]", "not a profile"),
        ({"action": "ask", "annotations": {}}, "policy[0].annotations", "no hint"),
        (
            {"action": "ask", "annotations": {"readonly": True}},
            "policy[0].annotations.readonly",
            "unknown key",
        ),
        ({"action": "deny", "rate": "3/min"}, "policy[0].rate", "never let through"),
        ({"action": "allow", "rate": "3/fortnight"}, "policy[0].rate", "30/min"),
        ({"action": "allow", "rate": "0/min"}, "policy[0].rate", "no call"),
        ({"action": "allow", "timeout": 5}, "policy[0].timeout", 'action = "ask"'),
        ({"action": "deny", "remember": "connection"}, "policy[0].remember", "ask"),
        (
            {"action": "ask", "remember": "forever"},
            "policy[0].remember",
            'give one of "connection", "none"',
        ),
        ({"action": "ask", "timeout": 0}, "policy[0].timeout", "positive"),
        ({"action": "ask", "timeout": float("nan")}, "policy[0].timeout", "positive"),
        ({"action": "ask", "reason": ""}, "policy[0].reason", "1 to"),
        ({"action": "ask", "rules": []}, "policy[0].rules", "unknown key"),
    ],
)
def test_a_bad_rule_is_an_error_that_names_its_key(
    rule: dict[str, Any], where: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config(rule)
    assert caught.value.path == where, caught.value
    assert words in str(caught.value)


def test_rules_may_name_configured_and_built_in_profiles() -> None:
    cfg = config(
        {"action": "deny", "profiles": ["ci", "claude-code", "default"]},
        profiles={"ci": {"servers": ["notes"]}},
    )
    assert cfg.policy[0].profiles == ["ci", "claude-code", "default"]


def test_a_catch_all_rule_leaves_the_ones_after_it_unreachable() -> None:
    cfg = config(
        {"action": "deny", "tools": ["*/delete_*"]},
        {"action": "ask"},
        {"action": "allow", "servers": ["notes"]},
    )
    assert unreachable(cfg.policy) == ["policy[2] is never reached: policy[1] matches every call"]
    assert unreachable(config({"action": "ask", "servers": ["notes"]}).policy) == []


@pytest.mark.parametrize(
    ("text", "rate"),
    [("30/min", Rate(30, 60.0)), ("1/s", Rate(1, 1.0)), (" 5 / hour", Rate(5, 3600.0))],
)
def test_rates_are_read_as_written(text: str, rate: Rate) -> None:
    assert parse_rate(text) == rate


# -- the decision --


def test_the_first_rule_that_matches_decides_and_the_default_allows() -> None:
    policy = Policy(
        config(
            {"action": "deny", "tools": ["*/delete_*"], "reason": "no deletions"},
            {"action": "ask", "servers": ["github"]},
        ).policy
    )
    d = policy.decide(facts())
    assert (d.action, d.rule, d.reason, d.by) == ("deny", 0, "no deletions", "policy[0]")
    merge = facts("mcp__github__merge", original="merge")
    assert (policy.decide(merge).action, policy.decide(merge).rule) == ("ask", 1)
    other = facts("mcp__notes__read", server="notes", original="read")
    d = policy.decide(other)
    assert (d.action, d.rule, d.by) == ("allow", None, "default")


def test_a_tool_pattern_matches_the_agents_name_or_alias_slash_original() -> None:
    by_local = Policy(config({"action": "deny", "tools": ["mcp__github__*"]}).policy)
    by_original = Policy(config({"action": "deny", "tools": ["github/delete_*"]}).policy)
    # A rename changes the names agents know the tool by, not alias/original.
    renamed = facts("gh_remove", original="delete_repo")
    assert by_local.decide(renamed).action == "allow"
    assert by_original.decide(renamed).action == "deny"
    assert by_local.decide(facts()).action == "deny"
    assert by_original.decide(facts(server="notes")).action == "allow"


def test_an_alias_slash_name_pattern_holds_for_the_name_as_agents_know_it() -> None:
    """The server renames ``delete_repo`` to ``delete.repo``: agents know it alike, and
    the rule that named it holds for it still."""
    policy = Policy(config({"action": "deny", "tools": ["github/delete_repo"]}).policy)
    assert policy.decide(facts(original="delete.repo")).action == "deny"
    assert policy.decide(facts(original="delete repo")).action == "deny"
    assert policy.decide(facts("mcp__github__delete-repo", original="delete-repo")).action == (
        "allow"
    )


def test_an_allow_rule_holds_for_the_servers_own_name_only() -> None:
    rules = [
        {"action": "allow", "tools": ["github/delete_repo"]},
        {"action": "deny", "servers": ["github"]},
    ]
    policy = Policy(config(*rules).policy)
    assert policy.decide(facts(original="delete_repo")).action == "allow"
    assert policy.decide(facts(original="delete.repo")).action == "deny"


def test_profiles_and_servers_narrow_a_rule() -> None:
    policy = Policy(
        config(
            {"action": "deny", "profiles": ["c*"], "servers": ["github"]},
            profiles={"ci": {}},
        ).policy
    )
    assert policy.decide(facts(profile="ci")).action == "deny"
    assert policy.decide(facts(profile="default")).action == "allow"
    assert policy.decide(facts(profile="ci", server="notes")).action == "allow"


def test_annotations_count_only_from_a_trusted_server() -> None:
    policy = Policy(
        config(
            {"action": "allow", "annotations": {"readOnlyHint": True}},
            {"action": "ask", "annotations": {"destructiveHint": True}},
        ).policy
    )
    says_safe = {"readOnlyHint": True, "destructiveHint": False}
    # An untrusted server saying its tool only reads is taken at its most dangerous.
    d = policy.decide(facts(annotations=says_safe, trusted=False))
    assert (d.action, d.rule) == ("ask", 1)
    d = policy.decide(facts(annotations=says_safe, trusted=True))
    assert (d.action, d.rule) == ("allow", 0)
    # A trusted server's hint left out means what the spec says: destructive.
    d = policy.decide(facts(annotations={}, trusted=True))
    assert (d.action, d.rule) == ("ask", 1)
    # A hint that is not a boolean is no hint.
    d = policy.decide(facts(annotations={"readOnlyHint": "yes"}, trusted=True))
    assert d.rule == 1


def test_ask_carries_its_timeout_and_memory() -> None:
    policy = Policy(
        config(
            {"action": "ask", "tools": ["a*"], "timeout": 30, "remember": "connection"},
            {"action": "ask"},
        ).policy
    )
    d = policy.decide(facts("alpha"))
    assert (d.timeout, d.remember) == (30, True)
    d = policy.decide(facts("beta"))
    assert (d.timeout, d.remember) == (120, False)


def test_what_mcpd_tools_policy_is_told_says_who_decides_an_ask() -> None:
    policy = Policy(
        config(
            {"action": "ask", "tools": ["a*"], "decider": "operator"},
            {"action": "ask"},
        ).policy
    )
    operator = policy.decide(facts("alpha")).summary()
    assert (operator["action"], operator["decider"]) == ("ask", "operator")
    assert "decider" not in policy.decide(facts("beta")).summary()


def test_an_empty_policy_says_so() -> None:
    assert Policy().empty
    assert Policy().decide(facts()).action == "allow"
    assert not Policy(config({"action": "deny"}).policy).empty


# -- every name a tool has --


def table(**servers: list[str]) -> Catalog:
    tables = Catalog(NamingConfig())
    for alias, names in servers.items():
        tables.update(alias, [mcp.Tool(name=n, inputSchema=msgspec.Raw(b"{}")) for n in names])
    return tables


def view_of(
    tables: Catalog, name: str, profile: ProfileConfig, default: ProfileView | None = None
) -> ProfileView:
    view = ProfileView(name, tables)
    view.configure(profile, tables.naming, 128, default)
    return view


def listed(view: ProfileView, original: str) -> Entry:
    [entry] = [e for e in view.entries() if e.original == original]
    return entry


def decided(policy: Policy, view: ProfileView, original: str, derived: str | None = None) -> str:
    """What the rules decide for a call to ``original`` by its name in ``view``."""
    entry = view.lookup(listed(view, original).local)
    assert entry is not None
    return policy.decide(facts_of(entry, view.name, False, derived)).action


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_rule_in_the_daemons_names_holds_under_each_hosts_profile(host: str) -> None:
    policy = Policy(config({"action": "deny", "tools": ["mcp__github__delete_*"]}).policy)
    tables = table(github=["delete_repo", "merge"])
    view = view_of(tables, host, host_profile(host, EVERYTHING))
    assert decided(policy, view, "delete_repo") == "deny"
    assert decided(policy, view, "merge") == "allow"
    assert decided(policy, view_of(tables, "default", EVERYTHING), "delete_repo") == "deny"


def test_a_look_alike_does_not_rename_a_tool_out_of_an_exact_rule() -> None:
    policy = Policy(config({"action": "deny", "tools": ["mcp__github__delete_repo"]}).policy)
    tables = table(github=["delete_repo", "delete.repo"])
    default = view_of(tables, "default", EVERYTHING)
    # Both want the name, so both are hashed: the rule holds for either by it.
    assert listed(default, "delete_repo").local.startswith("mcp__github__delete_repo_")
    assert decided(policy, default, "delete_repo") == "deny"
    assert decided(policy, default, "delete.repo") == "deny"
    codex = view_of(tables, "codex", host_profile("codex", EVERYTHING))
    assert decided(policy, codex, "delete_repo", "default") == "deny"


def test_a_rule_holds_under_the_default_profiles_own_names_in_every_other() -> None:
    policy = Policy(config({"action": "deny", "tools": ["github_delete_*"]}).policy)
    tables = table(github=["delete_repo", "merge"])
    own = ProfileConfig(template="{alias}_{tool}")
    default = view_of(tables, "default", own)
    assert decided(policy, default, "delete_repo") == "deny"
    for name, profile in [("cursor", host_profile("cursor", own)), ("ci", ProfileConfig())]:
        view = view_of(tables, name, profile, default)
        assert decided(policy, view, "delete_repo") == "deny"
        assert decided(policy, view, "merge") == "allow"


def test_a_rule_about_the_default_profile_is_about_the_hosts_profiles_too() -> None:
    rules = config(
        {"action": "deny", "tools": ["github/delete_*"], "profiles": ["default"]},
        {"action": "ask", "tools": ["github/merge"], "profiles": ["claude-code"]},
    ).policy
    policy = Policy(rules)
    tables = table(github=["delete_repo", "merge"])
    default = view_of(tables, "default", EVERYTHING)
    codex = view_of(tables, "codex", host_profile("codex", EVERYTHING))
    claude = view_of(tables, "claude-code", host_profile("claude-code", EVERYTHING))
    assert decided(policy, default, "delete_repo") == "deny"
    assert decided(policy, codex, "delete_repo", "default") == "deny"
    # One naming a host's profile stays about that one.
    assert decided(policy, claude, "merge", "default") == "ask"
    assert decided(policy, codex, "merge", "default") == "allow"
    assert decided(policy, default, "merge") == "allow"


# -- globs --

_GLOB_CHARS = st.sampled_from(list("ab*?[]!-/_"))
_TEXT_CHARS = st.sampled_from(list("ab-/_[]!"))


@settings(max_examples=2000, deadline=None)
@given(st.text(_GLOB_CHARS, max_size=10), st.text(_TEXT_CHARS, max_size=12))
def test_a_glob_matches_as_fnmatchcase_does(pattern: str, text: str) -> None:
    assert Glob(pattern).match(text) == fnmatchcase(text, pattern), (pattern, text)


class _Counting(str):
    """A name that counts how often the matcher looks at one of its characters."""

    looked = 0

    def __getitem__(self, key: Any) -> Any:
        _Counting.looked += 1
        return str.__getitem__(self, key)


@pytest.mark.parametrize("n", [1_000, 10_000])
def test_a_glob_never_tries_a_name_twice(n: int) -> None:
    # Against a backtracking matcher this pattern takes time exponential in its stars.
    pattern = "*a?" * 8 + "*b?"
    _Counting.looked = 0
    assert not Glob(pattern).match(_Counting("a" * n))
    assert _Counting.looked <= 2 * len(pattern) * n


# -- rate limits --


def test_a_rate_lets_its_count_through_then_says_when_to_come_back() -> None:
    policy = Policy(config({"action": "allow", "rate": "3/min"}).policy)
    decision = policy.decide(facts())
    rates = RateLimits()
    assert [rates.admit(decision, "pid:1", 100.0) for _ in range(3)] == [None] * 3
    wait = rates.admit(decision, "pid:1", 100.0)
    assert wait == pytest.approx(20.0)  # one call back every 20 s
    assert rates.admit(decision, "pid:2", 100.0) is None  # another agent counts apart
    assert rates.admit(decision, "pid:1", 110.0) == pytest.approx(10.0)
    assert rates.admit(decision, "pid:1", 120.0) is None


def test_quiet_agents_buckets_are_forgotten() -> None:
    decision = Policy(config({"action": "allow", "rate": "1/s"}).policy).decide(facts())
    rates = RateLimits()
    for pid in range(PRUNE_AT):
        rates.admit(decision, f"pid:{pid}", 0.0)
    assert len(rates) == PRUNE_AT
    rates.admit(decision, "pid:new", 5.0)  # all the others have refilled by now
    assert len(rates) == 1


def test_the_gate_refuses_past_the_rate_with_the_retry_time() -> None:
    now = [0.0]
    gate = CallGate(Approvals(), KnownSecrets(), clock=lambda: now[0])
    gate.configure(config({"action": "ask", "rate": "1/min", "reason": "costly"}).policy)
    agent = AgentInfo(pid=7, uid=1000, connection="c1")
    assert gate.decide(facts(), agent).action == "ask"
    limited = gate.decide(facts(), agent)
    assert (limited.action, limited.limited) == ("deny", pytest.approx(60.0))
    result = refusals.limited(facts(), limited)
    text = result.content[0].text
    assert "at most 1 call a minute" in text and "in 60 s" in text and "not an outage" in text
    assert result.isError is True
    assert result.meta["mcpd/policy"]["decision"] == "limited"
    now[0] = 60.0
    assert gate.decide(facts(), agent).action == "ask"


def test_a_denied_call_reads_as_policy_not_an_outage() -> None:
    decision = Policy(config({"action": "deny", "reason": "read-only day"}).policy).decide(facts())
    result = refusals.denied(facts(), decision)
    text = result.content[0].text
    assert "does not allow calls to 'mcp__github__delete_repo'" in text
    assert "read-only day" in text and "not an outage" in text
    assert result.meta["mcpd/policy"] == {"decision": "deny", "rule": 0, "reason": "read-only day"}
