"""A retry's arguments against those of the call it continues: a call sent without
arguments, with ``null`` or with ``{}`` is the same call (every server reads it as
one without arguments), however the retry writes it; any argument makes another."""

from __future__ import annotations

import pytest
from msgspec import UNSET, Raw, UnsetType

from mcpd.agents.askback.bound import binding, other_arguments

NONE: list[Raw | UnsetType] = [UNSET, Raw(b"null"), Raw(b"{}"), Raw(b" { } "), Raw(b"\tnull\n")]


@pytest.mark.parametrize("first", NONE)
@pytest.mark.parametrize("retry", NONE)
def test_no_arguments_continue_no_arguments_however_written(
    first: Raw | UnsetType, retry: Raw | UnsetType
) -> None:
    assert other_arguments(binding(first)[0], retry) is None


@pytest.mark.parametrize("first", NONE)
@pytest.mark.parametrize("retry", [b'{"a":1}', b'{"":null}', b"[]", b'""', b"0", b"false"])
def test_an_argument_where_there_was_none_is_another_call(
    first: Raw | UnsetType, retry: bytes
) -> None:
    assert other_arguments(binding(first)[0], Raw(retry)) == "a call with other arguments"
    assert other_arguments(binding(Raw(retry))[0], first) == "a call with other arguments"
