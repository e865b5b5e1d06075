"""``[[policy]]``'s own values: the rate a rule allows (written as people write it and
said back in words), the time a person has to decide, and the rules an earlier one
leaves unreachable."""

from __future__ import annotations

import pytest

from mcpd.config.tables.policy import (
    DEFAULT_ASK_TIMEOUT,
    AnnotationMatch,
    PolicyRule,
    Rate,
    parse_rate,
    unreachable,
)


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("30/min", Rate(30, 60.0)),
        ("1/s", Rate(1, 1.0)),
        ("5/sec", Rate(5, 1.0)),
        ("5/second", Rate(5, 1.0)),
        ("2/minute", Rate(2, 60.0)),
        ("100/h", Rate(100, 3600.0)),
        ("100/hour", Rate(100, 3600.0)),
        ("7/d", Rate(7, 86400.0)),
        (" 7 / DAY ", Rate(7, 86400.0)),
        ("007/day", Rate(7, 86400.0)),
    ],
)
def test_a_rate_is_read_as_people_write_it(text: str, rate: Rate) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize(
    "text",
    ["", "30", "/min", "30/", "30/mins", "30/week", "-1/min", "1.5/min", "30/min/x", "3 0/s"],
)
def test_what_is_not_a_rate_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_rate(text)
    assert str(info.value) == f'{text!r} is not a rate such as "30/min" (per s, min, h or day)'


def test_a_rate_of_nothing_points_to_deny() -> None:
    with pytest.raises(ValueError, match='lets no call through; use action = "deny"'):
        parse_rate("0/h")


@pytest.mark.parametrize(
    ("rate", "words"),
    [
        (Rate(1, 1.0), "1 call a second"),
        (Rate(30, 60.0), "30 calls a minute"),
        (Rate(2, 3600.0), "2 calls an hour"),
        (Rate(1, 86400.0), "1 call a day"),
        (Rate(3, 90.0), "3 calls every 90 s"),
    ],
)
def test_a_rate_is_said_in_words(rate: Rate, words: str) -> None:
    assert rate.words() == words


def test_an_ask_rule_waits_its_own_timeout_or_the_default() -> None:
    assert PolicyRule(action="ask").ask_timeout() == DEFAULT_ASK_TIMEOUT
    assert PolicyRule(action="ask", timeout=5.0).ask_timeout() == 5.0


def test_annotations_want_only_the_hints_given() -> None:
    assert AnnotationMatch().wanted() == {}
    assert AnnotationMatch(readOnlyHint=False, openWorldHint=True).wanted() == {
        "readOnlyHint": False,
        "openWorldHint": True,
    }


def test_rules_after_one_that_matches_every_call_are_named() -> None:
    rules = [
        PolicyRule(tools=["github/*"], action="ask"),
        PolicyRule(tools=["x", "*"], action="deny"),
        PolicyRule(tools=["notes/*"], action="allow"),
        PolicyRule(action="ask"),
    ]
    assert unreachable(rules) == [
        "policy[2] is never reached: policy[1] matches every call",
        "policy[3] is never reached: policy[1] matches every call",
    ]


@pytest.mark.parametrize(
    "narrowed",
    [
        PolicyRule(servers=["notes"], action="deny"),
        PolicyRule(profiles=["coding"], action="deny"),
        PolicyRule(annotations=AnnotationMatch(readOnlyHint=False), action="deny"),
        PolicyRule(tools=["*/*"], action="deny"),
    ],
)
def test_a_catch_all_narrowed_by_another_key_leaves_the_rest_reachable(
    narrowed: PolicyRule,
) -> None:
    assert unreachable([narrowed, PolicyRule(action="allow")]) == []


def test_a_catch_all_at_the_end_leaves_nothing_unreachable() -> None:
    assert unreachable([PolicyRule(tools=["a"], action="deny"), PolicyRule(action="ask")]) == []
