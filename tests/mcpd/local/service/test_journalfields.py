"""What a record becomes in the journal, read back with an independent decoder of the
native protocol: whatever a server puts in a message, a name or a stderr line, it
stays inside its own field, shown as text, within the cap."""

from __future__ import annotations

import logging

import pytest

from mcpd.local.service import journalfields
from mcpd.local.service.journalfields import (
    MAX_FIELD_BYTES,
    NOTICE,
    encode_entry,
    record_fields,
    syslog_priority,
    unnamed,
)
from protocol.shown.logfields import log_extra
from tests.support.system.journald import decode_entry

FORGED = "ok\nPRIORITY=0\nMCPD_SERVER=bank\nMESSAGE=approved"


def record(msg: str, level: int = logging.INFO, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("mcpd.server", level, "/x.py", 7, msg, None, None, "f")
    made.__dict__.update(extra)
    return made


def entry(made: logging.LogRecord) -> dict[str, str]:
    return decode_entry(encode_entry(record_fields(made)))


@pytest.mark.parametrize(
    "value",
    [
        FORGED,
        "ok\n",
        "\n",
        "x" * (MAX_FIELD_BYTES // 6) + "\nPRIORITY=0",
        "=\n=",
        "lone \udc80 surrogate",
        "",
    ],
)
def test_a_value_with_line_breaks_cannot_add_a_field(value: str) -> None:
    data = encode_entry([("MESSAGE", value), ("PRIORITY", "6"), ("MCPD_SERVER", "notes")])
    fields = decode_entry(data)
    assert set(fields) == {"MESSAGE", "PRIORITY", "MCPD_SERVER"}
    assert (fields["PRIORITY"], fields["MCPD_SERVER"]) == ("6", "notes")
    assert fields["MESSAGE"] == value.encode("utf-8", "backslashreplace").decode()


def test_the_quick_way_and_the_field_by_field_way_encode_alike() -> None:
    fields = [("MESSAGE", "hello"), ("PRIORITY", "6"), ("MCPD_REASON", "é🙂 \udc80")]
    quick = encode_entry(fields)
    # The same entry with one value over the quick way's size: the other fields are
    # written the same way by the field-by-field encoder.
    long = "y" * (MAX_FIELD_BYTES // 6 + 1)
    slow = encode_entry([*fields, ("MCPD_STDERR", long)])
    assert slow.startswith(quick)
    assert decode_entry(slow)["MCPD_STDERR"] == long


def test_a_runaway_value_is_cut_at_the_cap_and_says_so() -> None:
    big = "z" * (MAX_FIELD_BYTES + 10)
    fields = decode_entry(encode_entry([("MCPD_STDERR", big), ("PRIORITY", "3")]))
    assert fields["MCPD_STDERR"] == "z" * MAX_FIELD_BYTES + "\n[... 10 bytes truncated by mcpd]"
    assert fields["PRIORITY"] == "3"


def test_a_value_cut_at_the_cap_is_still_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # journalctl shows a field that is not UTF-8 as a blob, not as the text it is.
    monkeypatch.setattr(journalfields, "MAX_FIELD_BYTES", 1000)
    for lead in ("", "a", "ab", "abc"):
        value = lead + "é🙂" * 1000
        data = encode_entry([("MCPD_STDERR", value)])
        fields = decode_entry(data)  # strict UTF-8
        kept, _, note = fields["MCPD_STDERR"].partition("\n[... ")
        assert value.startswith(kept) and len(kept.encode()) <= 1000
        assert len(kept.encode()) > 1000 - 4
        dropped = len(value.encode()) - len(kept.encode())
        assert note == f"{dropped} bytes truncated by mcpd]"


def test_a_servers_message_is_one_field_of_text_naming_the_server() -> None:
    made = record(
        f"{FORGED}\x1b[2K\r\u202egnp.exe",
        logging.ERROR,
        **log_extra("notes", "message", reason="x\x1b[31my"),
    )
    fields = entry(made)
    assert fields["MESSAGE"] == (
        "notes: ok\nPRIORITY=0\nMCPD_SERVER=bank\nMESSAGE=approved\\x1b[2K\\r\\u202egnp.exe"
    )
    assert fields["PRIORITY"] == "3" and fields["MCPD_SERVER"] == "notes"
    assert fields["MCPD_EVENT"] == "message" and fields["MCPD_REASON"] == "x\\x1b[31my"
    assert fields["SYSLOG_IDENTIFIER"] == "mcpd" and fields["LOGGER"] == "mcpd.server"


def test_a_servers_names_for_things_are_shown_as_text_in_their_own_fields() -> None:
    """On one line: journalctl prints a field's lines as lines, which a name's own
    would make read as other fields."""
    made = record(
        "held",
        **log_extra("notes", "definition_changed", item="se\x1barch\nPRIORITY=0", kind="tool"),
    )
    fields = entry(made)
    assert fields["MCPD_ITEM"] == "se\\x1barch\\nPRIORITY=0"
    assert fields["PRIORITY"] == "6" and fields["MCPD_KIND"] == "tool"


def test_a_field_left_empty_or_unset_is_not_written() -> None:
    made = record("plain", mcpd_reason="", mcpd_item=None)
    made.lineno = 0
    made.funcName = ""
    fields = entry(made)
    for name in ("MCPD_SERVER", "MCPD_REASON", "MCPD_ITEM", "CODE_LINE", "CODE_FUNC"):
        assert name not in fields
    assert fields["MESSAGE"] == "plain"


def test_the_server_is_named_once_in_front() -> None:
    assert unnamed("notes", "notes: down: notes: exit 1") == "down: exit 1"
    assert unnamed("notes", "notesy: up") == "notesy: up"
    assert entry(record("notes: crashed", **log_extra("notes")))["MESSAGE"] == "notes: crashed"


def test_a_traceback_is_part_of_the_message() -> None:
    try:
        raise ValueError("bad\x1b[0m")
    except ValueError:
        made = record("failed")
        made.exc_info = __import__("sys").exc_info()
    message = entry(made)["MESSAGE"]
    assert message.startswith("failed\nTraceback")
    assert message.endswith("ValueError: bad\\x1b[0m")


@pytest.mark.parametrize(
    ("level", "priority"),
    [
        (logging.CRITICAL + 5, 2),
        (logging.CRITICAL, 2),
        (logging.ERROR, 3),
        (logging.WARNING, 4),
        (NOTICE, 5),
        (logging.INFO, 6),
        (logging.DEBUG, 7),
        (0, 7),
    ],
)
def test_each_level_has_its_syslog_priority(level: int, priority: int) -> None:
    assert syslog_priority(level) == priority
