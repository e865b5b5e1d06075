"""A value holding any text, even words msgspec's own messages use, is refused with the
key it is at and what that key takes; reading the error never fails on it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import ConfigError

HTTP = {"url": "https://h.example/mcp"}


def _refusal(data: dict[str, object]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, env={})
    return caught.value


def test_an_enum_value_that_reads_like_a_path_is_refused_with_its_choices() -> None:
    error = _refusal({"servers": {"x": {**HTTP, "transport": "a - at `$x` b"}}})
    assert str(error) == (
        "servers.x.transport: Invalid enum value: a string of 13 characters; "
        'give one of "http", "sse", "stdio"'
    )


def test_a_policy_enum_value_with_a_path_in_it_names_its_own_key() -> None:
    rules = [{"action": "allow"}, {"action": "deny - at `$.servers`"}]
    error = _refusal({"policy": rules})
    assert str(error).startswith("policy[1].action: Invalid enum value")
    assert str(error).endswith('; give one of "allow", "ask", "deny"')


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(["'", '"', "`", "$", " - at `$", "`", ".x", "[0]", "\\", "\\N{x}", "a"])
        | st.text(max_size=4),
        max_size=8,
    ).map("".join)
)
def test_any_enum_value_is_refused_as_a_config_error(value: str) -> None:
    if value in ("http", "sse", "stdio"):
        return
    error = _refusal({"servers": {"x": {**HTTP, "transport": value}}})
    if str(error).startswith("servers.x.transport: bad variable reference"):
        return  # "${" with no "}": refused as that first, naming the key all the same
    assert str(error).startswith("servers.x.transport: Invalid enum value")
    # A value near a choice is followed by the suggestion, then the choices.
    assert str(error).endswith(' give one of "http", "sse", "stdio"')
