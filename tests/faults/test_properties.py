"""Properties of the pieces every hostile byte goes through: the line framer, the
JSON-RPC decoder and the tool-name mapping.

tests/protocol and tests/mcpd/registry/tables/test_table.py already check that any chunking of
short lines gives the same lines, that arbitrary bytes only ever raise DecodeFailure,
that valid requests round-trip and that local names are unique, safe and reversible.
These add what an attacker would aim at: lines over the limit and the memory bound,
the decoder's classification of every kind of envelope (against JSON-RPC's rules, not
the code), invalid UTF-8, replies to what could not be read, and name lookups that
must not match or cost more than the name is worth.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcpd.config.tables.model import NamingConfig
from mcpd.config.tables.profiles import EVERYTHING
from mcpd.registry.profiles.views import ProfileView
from mcpd.registry.tables.catalog import Catalog
from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.lines.framing import LineFramer, Oversized
from protocol.mcp import core as mcp

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- the framer ---------------------------------------------------------------------------------


def reference_lines(stream: bytes, limit: int) -> list[bytes | None]:
    """What a framer must produce for ``stream``: each line without its final CR, blank
    lines skipped, and ``None`` (one Oversized) for each line longer than ``limit``."""
    out: list[bytes | None] = []
    pieces = stream.split(b"\n")
    complete, last = pieces[:-1], pieces[-1]
    for line in complete:
        if len(line) > limit:
            out.append(None)
            continue
        line = line.removesuffix(b"\r")
        if line and not line.isspace():
            out.append(line)
    if last:
        # No newline yet: an unfinished line is kept unless it is already too long.
        out.append(None if len(last) > limit else b"<unfinished>")
    return out


line_bodies = st.one_of(
    st.binary(max_size=12),
    st.binary(min_size=20, max_size=90),
    st.sampled_from([b" ", b"\t", b"\r", b"x\r", b"{}", b"\r\r"]),
).map(lambda b: b.replace(b"\n", b""))


@SETTINGS
@given(
    lines=st.lists(line_bodies, max_size=25),
    tail=line_bodies,
    limit=st.integers(8, 40),
    cuts=st.lists(st.integers(1, 64), min_size=1, max_size=20),
)
@example(lines=[b"a" * 10], tail=b"", limit=10, cuts=[10])
@example(lines=[b"a" * 10 + b"\r"], tail=b"", limit=10, cuts=[64])  # CR at the limit, one read
@example(lines=[b"a" * 10 + b"\r"], tail=b"", limit=10, cuts=[11, 1])  # the same, in two
def test_framer_bounds_memory_and_reports_each_long_line_once(
    lines: list[bytes], tail: bytes, limit: int, cuts: list[int]
) -> None:
    stream = b"".join(line + b"\n" for line in lines) + tail
    framer = LineFramer(max_line=limit)
    got: list[bytes | Oversized] = []
    pos = i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        got += framer.feed(stream[pos : pos + step])
        # Whatever the peer sends, no more than one line's worth is ever held.
        assert framer.buffered <= limit
        pos += step
        i += 1
    expected = reference_lines(stream, limit)
    if expected and expected[-1] == b"<unfinished>":
        expected.pop()
        flushed = framer.flush()
        unfinished = tail.removesuffix(b"\r")
        assert flushed == ([unfinished] if unfinished and not unfinished.isspace() else [])
    assert [None if isinstance(x, Oversized) else x for x in got] == expected


# -- the JSON-RPC decoder -----------------------------------------------------------------------

ABSENT: Any = object()
ids = st.one_of(
    st.integers(-(10**30), 10**30),
    st.text(max_size=20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.just(ABSENT),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def past_bounds(value: Any) -> bool:
    """An id of the right type that mcpd refuses on a request: too long a string, an
    integer past 64 bits (a request's id is kept while it runs, and echoed)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return not rpc.MIN_INT_ID <= value <= rpc.MAX_INT_ID
    return isinstance(value, str) and len(value) > rpc.MAX_ID_LENGTH


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {}
    version = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2, ABSENT]))
    if version is not ABSENT:
        msg["jsonrpc"] = version
    rid = draw(ids)
    if rid is not ABSENT:
        msg["id"] = rid
    kind = draw(st.sampled_from(["method", "result", "error", "both", "none"]))
    if kind in ("method", "both"):
        msg["method"] = draw(st.one_of(st.text(max_size=10), st.integers(), st.none()))
        if draw(st.booleans()):
            msg["params"] = draw(json_values)
    if kind in ("result", "both"):
        msg["result"] = draw(json_values)
    if kind == "error":
        msg["error"] = draw(
            st.one_of(
                st.fixed_dictionaries(
                    {"code": st.integers(-40000, 0), "message": st.text(max_size=10)}
                ),
                json_values,
            )
        )
    return msg


def expected_kind(msg: dict[str, Any]) -> tuple[str, Any]:
    """JSON-RPC 2.0's answer: the message kind, or ("invalid", id a reply may carry)."""
    rid = msg.get("id", ABSENT)
    keep = rid if valid_id(rid) else None
    if "method" in msg and past_bounds(rid):
        return "invalid", None
    if msg.get("jsonrpc") != "2.0":
        return "invalid", keep
    if "method" in msg:
        if not isinstance(msg["method"], str):
            return "invalid", keep
        if rid is ABSENT:
            return "notification", None
        return ("request", rid) if valid_id(rid) else ("invalid", None)
    if "error" in msg:
        # An error answers a request that may have had no readable id: null (or none).
        return ("error", keep) if rid in (None, ABSENT) or valid_id(rid) else ("invalid", None)
    if "result" in msg:
        return ("response", rid) if valid_id(rid) else ("invalid", None)
    return "invalid", keep


@SETTINGS
@example({"jsonrpc": "1.0", "id": 2**70, "method": "x"})
@example({"id": "x" * 300, "method": 0})
@given(envelopes())
def test_every_envelope_is_classified_as_json_rpc_says(msg: dict[str, Any]) -> None:
    kind, rid = expected_kind(msg)
    data = json.dumps(msg).encode()
    try:
        got = envelope.decode_message(data)
    except rpc.DecodeFailure as exc:
        assert kind == "invalid", (msg, exc.message)
        assert exc.id == rid and type(exc.id) is type(rid)
        # The reply to it is itself a well-formed error response under that id.
        reply = envelope.decode_message(exc.reply())
        assert isinstance(reply, rpc.ErrorResponse) and reply.id == rid
        return
    names = {
        rpc.Request: "request",
        rpc.Notification: "notification",
        rpc.Response: "response",
        rpc.ErrorResponse: "error",
    }
    assert names[type(got)] == kind, msg
    if isinstance(got, rpc.Request | rpc.Response):
        assert got.id == rid and type(got.id) is type(rid)


def not_utf8(data: bytes) -> bytes:
    """``data``, or, where it is UTF-8, ``data`` after a byte that never starts a UTF-8
    sequence."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    return b"\xff" + data


@SETTINGS
@given(st.binary(min_size=1, max_size=200))
@example(b'\xc2"\x80')
def test_anything_that_is_not_utf8_is_a_parse_error(data: bytes) -> None:
    # Taking the quotes out of bytes that are not UTF-8 can leave bytes that are
    # (b'\xc2"\x80' less its quote is U+0080): each line is made not UTF-8 on its own.
    inner = not_utf8(data.replace(b'"', b""))
    wrapped = b'{"jsonrpc":"2.0","id":1,"result":"' + inner + b'"}'
    for line in (not_utf8(data), wrapped):
        try:
            envelope.decode_message(line)
        except rpc.DecodeFailure as exc:
            assert exc.code == rpc.PARSE_ERROR
        else:
            raise AssertionError(f"accepted {line!r}")


@SETTINGS
@given(
    rid=st.one_of(st.integers(-(10**40), 10**40), st.text(max_size=40)),
    result=json_values,
    message=st.text(max_size=40),
)
def test_replies_round_trip_with_any_id(rid: int | str, result: Any, message: str) -> None:
    raw = msgspec.Raw(msgspec.json.encode(result))
    got = envelope.decode_message(rpc.encode_result(rid, raw))
    assert isinstance(got, rpc.Response) and got.id == rid
    assert bytes(got.result) == bytes(raw)  # passed through untouched
    err = envelope.decode_message(rpc.encode_error(rid, -32000, message))
    assert isinstance(err, rpc.ErrorResponse) and err.id == rid
    assert err.error.message == message


# -- the name mapping ------------------------------------------------------------------------------

aliases = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
tool_names = st.text(min_size=1, max_size=80)


def everything(catalog: Catalog) -> ProfileView:
    """The view of a profile that shows every tool: where an agent's near misses are
    looked up."""
    view = ProfileView("default", catalog)
    view.configure(EVERYTHING, catalog.naming, 128)
    return view


@settings(max_examples=200, deadline=None)
@given(
    servers=st.dictionaries(aliases, st.lists(tool_names, unique=True, max_size=6), max_size=4),
    max_length=st.integers(16, 64),
    probe=st.one_of(st.text(max_size=400), st.text(alphabet="mcp_ab", min_size=100, max_size=250)),
)
def test_suggestions_are_difflibs_and_lookups_never_guess(
    servers: dict[str, list[str]], max_length: int, probe: str
) -> None:
    reg = Catalog(NamingConfig(max_length=max_length))
    for alias, names in servers.items():
        reg.update(alias, [mcp.Tool(name=n) for n in names])
    local = [e.local for e in reg.entries()]
    # The length cut-off in closest() never changes its answer.
    assert everything(reg).closest(probe) == difflib.get_close_matches(
        probe, local, n=3, cutoff=0.5
    )
    # Only a listed name finds a tool; an original name or a near miss finds nothing.
    found = reg.lookup(probe)
    assert (found is not None) == (probe in local)
    for alias, names in servers.items():
        for name in names:
            if name not in local:
                assert reg.lookup(name) is None
            assert reg.lookup(f"mcp__{alias}__{name}x") is None or f"mcp__{alias}__{name}x" in local


@settings(max_examples=50, deadline=None)
@given(size=st.integers(1, 4), max_length=st.integers(16, 80))
def test_a_huge_unknown_name_is_refused_without_work(size: int, max_length: int) -> None:
    reg = Catalog(NamingConfig(max_length=max_length))
    reg.update("notes", [mcp.Tool(name="search"), mcp.Tool(name="read")])
    assert everything(reg).closest("mcp__notes__search" * (size * 50_000)) == []
