"""The structured fields of a log record: each given part under its journal name, and
an empty one left out rather than written as an empty field."""

from __future__ import annotations

import logging

import pytest

from protocol.shown.logfields import log_extra


def test_every_part_under_its_own_name() -> None:
    extra = log_extra(
        "tickets",
        "outage",
        "exited with status 1",
        ["line 1", "line 2"],
        item="search",
        kind="tool",
    )
    assert extra == {
        "mcpd_server": "tickets",
        "mcpd_event": "outage",
        "mcpd_reason": "exited with status 1",
        "mcpd_stderr": "line 1\nline 2",
        "mcpd_item": "search",
        "mcpd_kind": "tool",
    }


@pytest.mark.parametrize("server", [None, ""])
def test_a_record_about_no_server_names_none(server: str | None) -> None:
    assert log_extra(server) == {}
    assert log_extra(server, "started") == {"mcpd_event": "started"}


def test_empty_event_reason_and_stderr_are_left_out() -> None:
    assert log_extra("tickets", "", "", []) == {"mcpd_server": "tickets"}


def test_an_item_with_an_empty_name_is_still_named() -> None:
    # A server may name an item ""; what is said of it must still say which it was.
    assert log_extra("tickets", item="", kind="") == {
        "mcpd_server": "tickets",
        "mcpd_item": "",
        "mcpd_kind": "",
    }


def test_the_fields_reach_the_record(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("mcpd.test_logfields")
    with caplog.at_level(logging.INFO, log.name):
        log.info("said", extra=log_extra("tickets", "outage", stderr=["a", "b"]))
    (record,) = caplog.records
    assert record.__dict__["mcpd_server"] == "tickets"
    assert record.__dict__["mcpd_stderr"] == "a\nb"
    assert "mcpd_reason" not in record.__dict__
