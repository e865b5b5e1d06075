"""The checks of ``[[policy]]``: each mistake is named by the rule's index and key, and a
name that matches nothing (a typo that would leave a rule matching no call) is named
with what it could have been; a deny or ask rule scoped to profiles that an agent on
the daemon's socket can leave by picking another is warned of."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpd.config.checks.policy_rules import leavable, validate_policy
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import ConfigError
from mcpd.config.tables.policy import MAX_ASK_TIMEOUT, MAX_REASON, AnnotationMatch, PolicyRule

SERVERS = ("github", "notes")
PROFILES = ("default", "coding")


def rule(**keys: Any) -> PolicyRule:
    keys.setdefault("action", "allow")
    return PolicyRule(**keys)


def error_of(*rules: PolicyRule, servers: tuple[str, ...] = SERVERS) -> tuple[str, str]:
    with pytest.raises(ConfigError) as info:
        validate_policy(list(rules), servers, PROFILES)
    return info.value.path, info.value.message


def test_valid_rules_pass() -> None:
    validate_policy(
        [
            rule(tools=["github/merge_*", "*/delete_*", "mcp__notes__*", "/odd"], action="ask"),
            rule(servers=["git*", "notes"], profiles=["cod?ng", "default"], action="deny"),
            rule(annotations=AnnotationMatch(readOnlyHint=True), rate=" 30 / MIN "),
            rule(action="ask", timeout=MAX_ASK_TIMEOUT, remember="connection", reason="r"),
            rule(action="ask", decider="operator"),
            rule(tools=["*"], reason="x" * MAX_REASON),
        ],
        SERVERS,
        PROFILES,
    )
    validate_policy([], (), ())


def test_a_rule_with_no_tools_is_told_how_to_mean_all() -> None:
    assert error_of(rule(tools=[])) == ("policy[0].tools", 'is empty; use ["*"] for every tool')


def test_an_empty_tool_pattern_is_named() -> None:
    assert error_of(rule(), rule(tools=["*", ""])) == ("policy[1].tools[1]", "is empty")


def test_a_tool_pattern_naming_a_server_that_is_not_there_is_named() -> None:
    assert error_of(rule(tools=["githb/merge"])) == (
        "policy[0].tools[0]",
        "'githb' is not a configured server (servers: github, notes)",
    )
    assert error_of(rule(tools=["notes/x"]), servers=()) == (
        "policy[0].tools[0]",
        "'notes' is not a configured server (servers: none configured)",
    )


def test_a_tool_pattern_with_a_server_glob_is_not_checked_against_the_servers() -> None:
    validate_policy([rule(tools=["zz*/x", "[a-c]/y"])], SERVERS, PROFILES)


@pytest.mark.parametrize(
    ("keys", "path", "message"),
    [
        ({"servers": ["notes", "note"]}, "servers[1]", "'note' is not a configured server"),
        ({"servers": ["x*"]}, "servers[0]", "'x*' matches no configured server"),
        ({"servers": [""]}, "servers[0]", "is empty"),
        ({"profiles": ["codng"]}, "profiles[0]", "'codng' is not a profile"),
        ({"profiles": ["q?"]}, "profiles[0]", "'q?' matches no profile"),
        ({"profiles": [""]}, "profiles[0]", "is empty"),
    ],
)
def test_a_server_or_profile_that_matches_nothing_is_named(
    keys: dict[str, Any], path: str, message: str
) -> None:
    got_path, got = error_of(rule(**keys))
    assert got_path == f"policy[0].{path}"
    assert got.startswith(message)


def test_the_names_it_could_have_been_are_listed() -> None:
    assert error_of(rule(servers=["nope"]))[1].endswith("(configured servers: github, notes)")
    assert error_of(rule(profiles=["nope"]))[1].endswith("(profiles: coding, default)")
    assert error_of(rule(servers=["nope"]), servers=())[1].endswith("(configured servers: none)")


def test_profile_names_are_matched_case_sensitively() -> None:
    assert error_of(rule(profiles=["Coding"]))[0] == "policy[0].profiles[0]"


def test_annotations_that_name_no_hint_are_named() -> None:
    path, message = error_of(rule(annotations=AnnotationMatch()))
    assert path == "policy[0].annotations"
    assert message.startswith("names no hint")


@pytest.mark.parametrize("reason", ["", "x" * (MAX_REASON + 1)])
def test_a_reason_out_of_bounds_is_named(reason: str) -> None:
    assert error_of(rule(reason=reason)) == (
        "policy[0].reason",
        f"must be 1 to {MAX_REASON} characters",
    )


def test_a_rate_on_a_deny_rule_is_refused() -> None:
    assert error_of(rule(action="deny", rate="1/s")) == (
        "policy[0].rate",
        "a denied call is never let through to count",
    )


@pytest.mark.parametrize(
    ("rate", "message"),
    [
        ("30", "'30' is not a rate such as \"30/min\" (per s, min, h or day)"),
        ("30/week", "'30/week' is not a rate such as \"30/min\" (per s, min, h or day)"),
        ("0/min", "'0/min' lets no call through; use action = \"deny\" for that"),
    ],
)
def test_a_bad_rate_is_named_with_what_is_wrong(rate: str, message: str) -> None:
    assert error_of(rule(rate=rate)) == ("policy[0].rate", message)


@pytest.mark.parametrize("action", ["allow", "deny"])
@pytest.mark.parametrize(
    ("key", "value"), [("timeout", 10.0), ("remember", "connection"), ("decider", "operator")]
)
def test_ask_keys_on_another_action_are_named(action: str, key: str, value: Any) -> None:
    assert error_of(rule(action=action, **{key: value})) == (
        f"policy[0].{key}",
        'only applies to action = "ask"',
    )


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan"), float("inf"), MAX_ASK_TIMEOUT + 1])
def test_an_ask_timeout_out_of_range_is_named(timeout: float) -> None:
    assert error_of(rule(action="ask", timeout=timeout)) == (
        "policy[0].timeout",
        f"must be positive, at most {MAX_ASK_TIMEOUT:g}",
    )


# -- a scope an agent can leave --


def scoped(*rules: dict[str, Any], **profiles: dict[str, Any]) -> list[str]:
    """The warnings of ``leavable`` for a config of the servers gh and notes."""
    servers = {"gh": {"command": "true"}, "notes": {"command": "true"}}
    return leavable(
        parse_config({"servers": servers, "profiles": profiles, "policy": list(rules)}, env={})
    )


def test_a_rule_about_the_default_profile_holds_in_the_hosts_profiles_but_not_others() -> None:
    deny = {"tools": ["gh/delete_*"], "profiles": ["default"], "action": "deny"}
    [warning] = scoped(deny, ci={"servers": ["*"]}, notes={"servers": ["notes"]})
    assert warning.startswith(
        "policy[0] (deny) holds only for agents in default (and so in the hosts' built-in"
    )
    # The hosts' profiles are the default under other names; notes shows no tool of gh.
    assert "by picking the profile ci, which shows tools of gh too" in warning
    assert "codex" not in warning and "notes," not in warning
    assert scoped(deny, notes={"servers": ["notes"]}) == []


def test_a_rule_about_one_hosts_profile_is_left_for_the_default_and_the_others() -> None:
    [warning] = scoped({"servers": ["gh"], "profiles": ["claude-code"], "action": "ask"})
    assert "(ask) holds only for agents in claude-code;" in warning
    picked = "the profiles claude-desktop, codex, cursor, default, gemini-cli, vscode, which"
    assert picked in warning


def test_a_profile_with_a_socket_of_its_own_is_left_by_no_agent_on_it(tmp_path: Path) -> None:
    own = {"servers": ["gh"], "socket": str(tmp_path / "ci.sock")}
    deny = {"tools": ["*"], "profiles": ["ci"], "action": "deny"}
    # An agent on ci's socket has ci and nothing else.
    assert scoped(deny, ci=own) == []
    # The daemon's own user, on the daemon's socket, may pick ci too.
    [warning] = scoped({**deny, "profiles": ["default"]}, ci=own)
    assert "picking the profile ci, which shows tools of gh too" in warning
    assert "(mcpd/useProfile, ?profile=; ci by the daemon's own user and root)" in warning


def test_allow_rules_and_rules_about_every_profile_are_not_warned_of() -> None:
    allow = {"tools": ["*"], "profiles": ["default"], "action": "allow"}
    assert scoped(allow, ci={"servers": ["gh"]}) == []
    assert scoped({"tools": ["*"], "action": "deny"}, ci={"servers": ["gh"]}) == []
