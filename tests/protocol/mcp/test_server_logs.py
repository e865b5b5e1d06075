"""Server log messages, sans-IO: the eight syslog levels in order, a logging/setLevel
that names one (or an error listing them), a notifications/message read or passed
over, and its data as one line of text for mcpd's own log."""

from __future__ import annotations

import pytest
from msgspec import Raw

from protocol.jsonrpc import messages as rpc
from protocol.mcp.server_logs import (
    LEVELS,
    LogMessage,
    checked_level,
    data_text,
    decode_log_message,
    rank,
)
from tests.support.hostile.cut_secret import MARKER, SECRET, beginnings, guarded, padded


def test_levels_rank_from_debug_to_emergency() -> None:
    assert [rank(level) for level in LEVELS] == list(range(8))
    assert rank("warning") > rank("info")  # type: ignore[operator]
    for unknown in ("WARNING", "warn", "", None, 3):
        assert rank(unknown) is None


def test_set_level_takes_a_known_level() -> None:
    assert checked_level(Raw(b'{"level": "error"}')) == "error"
    assert checked_level(Raw(b'{"level": "debug", "_meta": {"x": 1}}')) == "debug"


@pytest.mark.parametrize(
    ("params", "named"),
    [
        (Raw(b'{"level": "verbose"}'), "'verbose'"),
        (Raw(b'{"level": 3}'), "None"),
        (Raw(b"{}"), "None"),
        (None, "None"),
    ],
)
def test_set_level_refuses_anything_else_naming_the_levels(params: Raw | None, named: str) -> None:
    with pytest.raises(rpc.RPCError) as info:
        checked_level(params)
    assert info.value.code == rpc.INVALID_PARAMS
    assert info.value.message == (
        f"unknown log level {named}; the levels are "
        "debug, info, notice, warning, error, critical, alert, emergency"
    )


def test_a_message_keeps_its_data_byte_for_byte() -> None:
    msg = decode_log_message(b'{"level": "info", "logger": "db", "data": {"b": 1,  "a": [2]}}')
    assert msg is not None
    assert (msg.level, msg.logger) == ("info", "db")
    assert bytes(msg.data) == b'{"b": 1,  "a": [2]}'


@pytest.mark.parametrize(
    "params",
    [
        None,
        b"",
        b"not json",
        b'{"level": "loud", "data": 1}',
        b'{"data": 1}',
        b'{"level": "info"}',
        b"[" * 100_000,
    ],
)
def test_what_is_not_a_log_message_is_passed_over(params: bytes | None) -> None:
    assert decode_log_message(params) is None


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b'"disk full"', "disk full"),
        (b'{"a": 1}', '{"a":1}'),
        (b"[1, 2]", "[1,2]"),
        (b"null", "null"),
    ],
)
def test_data_is_one_line_of_text(data: bytes, text: str) -> None:
    assert data_text(LogMessage("info", Raw(data))) == text


def test_long_data_is_cut_and_bad_data_is_nothing() -> None:
    long = "x" * 500 + "\u2026 (and 400 more characters)"
    assert data_text(LogMessage("info", Raw(b'"' + b"x" * 900 + b'"'))) == long
    assert (
        data_text(LogMessage("info", Raw(b'"abcdef"')), limit=3)
        == "abc\u2026 (and 3 more characters)"
    )
    assert data_text(LogMessage("info", Raw(b"{bad"))) == ""


def test_a_message_cut_inside_a_secret_shows_none_of_it_once_guarded() -> None:
    said = data_text(LogMessage("info", Raw(f'"{padded(500)}"'.encode())))
    assert SECRET[:-1] in said and SECRET not in said
    assert beginnings(guarded(said)) == [] and MARKER in guarded(said)
