"""What a log record becomes in journald: its fields (mcpd's own beside ``MESSAGE`` and
``PRIORITY``), their values capped, and the native protocol's encoding of an entry;
``journal`` sends them, or writes lines of the same.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence

from protocol.shown.visible import visible

IDENTIFIER = "mcpd"

# LogRecord attribute (set through ``extra=``) -> journal field.
RECORD_FIELDS: Mapping[str, str] = {
    "mcpd_server": "MCPD_SERVER",
    "mcpd_event": "MCPD_EVENT",
    "mcpd_reason": "MCPD_REASON",
    "mcpd_stderr": "MCPD_STDERR",
    "mcpd_suppressed": "MCPD_SUPPRESSED",
    "mcpd_item": "MCPD_ITEM",
    "mcpd_kind": "MCPD_KIND",
    # A call's audit entry (MCPD_EVENT=call).
    "mcpd_method": "MCPD_METHOD",
    "mcpd_tool": "MCPD_TOOL",
    "mcpd_outcome": "MCPD_OUTCOME",
    "mcpd_decision": "MCPD_DECISION",
    "mcpd_decided_by": "MCPD_DECIDED_BY",
    "mcpd_agent_uid": "MCPD_AGENT_UID",
    "mcpd_agent_pid": "MCPD_AGENT_PID",
    "mcpd_profile": "MCPD_PROFILE",
}

# The fields whose values are lines (a server's stderr tail); every other one is a name
# or a sentence on one line, its line breaks shown as escapes, as MESSAGE shows a call's:
# ``journalctl --output-fields=`` and ``-o verbose`` print a value's lines as they are,
# and a name with a line break would write lines of its own choosing there, which read
# as other fields or entries.
MULTI_LINE: frozenset[str] = frozenset({"MCPD_STDERR"})

# Between INFO and WARNING: what an operator may look for (a refused or failed call),
# kept out of ``journalctl -p warning``.
NOTICE = 25
logging.addLevelName(NOTICE, "NOTICE")

# One field value is capped so that a runaway server cannot make us build (and journald
# store) arbitrarily large entries. Well above anything a stderr tail or traceback needs.
MAX_FIELD_BYTES = 1 << 20


def syslog_priority(levelno: int) -> int:
    """syslog(3) priority for a ``logging`` level."""
    if levelno >= logging.CRITICAL:
        return 2
    if levelno >= logging.ERROR:
        return 3
    if levelno >= logging.WARNING:
        return 4
    if levelno >= NOTICE:
        return 5
    if levelno >= logging.INFO:
        return 6
    return 7


def extra(record: logging.LogRecord, name: str) -> object:
    """What a record's ``extra`` put under ``name``, or None: the logging module sets
    those as attributes no type declares, so they are read from the record's dict."""
    return record.__dict__.get(name)


def message_of(record: logging.LogRecord) -> str:
    """The message plus traceback/stack, as the default Formatter would put them, with
    every control and hidden character shown as an escape (``shown``)."""
    text = record.getMessage()
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    for extra in (record.exc_text, record.stack_info):
        if extra:
            text = f"{text}\n{extra}"
    return log_text(text)


def log_text(value: object) -> str:
    """A record's text as the log shows it. Much of what mcpd logs is a server's (its
    stderr, its log messages, the errors it answers with, its names for things), often
    inside mcpd's own sentence: an escape sequence or a carriage return in it would act
    on the terminal of whoever reads the log, and journalctl shows a message with a
    control character as a blob instead of text. mcpd's own text has no character this
    changes but its line breaks and tabs, which stay."""
    return visible(str(value), lines=True)


def _cap(value: bytes) -> bytes:
    if len(value) <= MAX_FIELD_BYTES:
        return value
    # Cut between characters, never inside one: journalctl shows a field that is not
    # UTF-8 as a blob, not as the text it is.
    cut = MAX_FIELD_BYTES
    while cut > 0 and value[cut] & 0xC0 == 0x80:
        cut -= 1
    dropped = len(value) - cut
    return value[:cut] + f"\n[... {dropped} bytes truncated by mcpd]".encode()


def encode_entry(fields: Sequence[tuple[str, str]]) -> bytes:
    """Serialize fields in journald's native format.

    ``NAME=value\\n`` when the value has no newline; otherwise ``NAME\\n``, the value's
    length as a little-endian 64-bit integer, the value, ``\\n``.
    """
    # Most entries (every call's) have no line break in any value and are far below the
    # cap: encoded whole, as the loop below would encode them field by field. A
    # character takes at most 6 bytes (a lone surrogate's escape), so no value of an
    # entry of fewer characters than a sixth of the cap can be over it.
    text = "".join([f"{name}={value}\n" for name, value in fields])
    if text.count("\n") == len(fields) and len(text) <= MAX_FIELD_BYTES // 6:
        return text.encode("utf-8", "backslashreplace")
    out = bytearray()
    for name, value in fields:
        data = _cap(value.encode("utf-8", "backslashreplace"))
        if b"\n" in data:
            out += name.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
        else:
            out += name.encode() + b"=" + data + b"\n"
    return bytes(out)


def unnamed(server: str, message: str) -> str:
    """``message`` without the ``server: `` that its own text or the reasons quoted in
    it begin with: the handlers name the server once, in front."""
    head = f"{server}: "
    return message.removeprefix(head).replace(": " + head, ": ")


def record_fields(record: logging.LogRecord, identifier: str = IDENTIFIER) -> list[tuple[str, str]]:
    message = message_of(record)
    server = extra(record, "mcpd_server")
    if isinstance(server, str) and server:
        # journalctl shows MESSAGE alone; name the server in it, as the line format does.
        message = f"{server}: {unnamed(server, message)}"
    fields = [
        ("MESSAGE", message),
        ("PRIORITY", str(syslog_priority(record.levelno))),
        ("SYSLOG_IDENTIFIER", identifier),
    ]
    # Records made by hand (makeLogRecord) may lack a name or source location.
    optional: dict[str, object] = {"LOGGER": record.name, "CODE_FILE": record.pathname}
    optional |= {"CODE_LINE": record.lineno or None, "CODE_FUNC": record.funcName}
    optional |= {name: extra(record, attr) for attr, name in RECORD_FIELDS.items()}
    fields += [
        (name, log_text(value) if name in MULTI_LINE else visible(str(value)))
        for name, value in optional.items()
        if value not in (None, "")
    ]
    return fields
