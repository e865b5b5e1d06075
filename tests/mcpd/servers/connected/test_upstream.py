"""Upstream against the scripted stdio server over a real transport.

The scripted server records every line it receives (``--log-file``), so the tests
check what actually reached the server, not what mcpd meant to send.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
from msgspec import UNSET, Raw

from mcpd import __version__
from mcpd.registry.text import own_keys
from mcpd.servers.connected.handshake import Incompatible, ProtocolViolation
from mcpd.servers.connected.upstream import Upstream
from mcpd.servers.results.taking_apart import AT_ONCE_PARTS, MOST_PARTS, TooComplex
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.reply_faults import MalformedReply
from protocol.mcp import core as mcp
from protocol.mcp.greeting import ServerCapabilities
from tests.support.parts.calls import at_upstream
from tests.support.parts.upstream import BAD_SHAPES, scripted_server, upstream
from transports.errors import TransportClosed
from transports.stdio.params import StdioParams
from transports.stdio.transport import open_stdio_transport

MODERN = "2026-07-28"
RESERVED = "io.modelcontextprotocol/"


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "received.jsonl"


def meta_of(message: dict[str, Any]) -> dict[str, Any] | None:
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    return meta if isinstance(meta, dict) else None


def text_of(raw: Raw) -> str:
    return str(json.loads(bytes(raw))["content"][0]["text"])


# -- era detection --


async def test_modern_server_answers_discover_and_is_spoken_to_as_modern(
    log_path: Path,
) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", "modern") as server:
            up = upstream(server)
            await up.connect()
            assert up.era == "modern"
            assert up.version == MODERN
            assert up.instructions == "scripted"
            assert up.capabilities == ServerCapabilities()
            assert up.probe_died is False
            await up.list_tools()
            assert server.methods() == ["server/discover", "tools/list"]


async def test_dual_era_server_is_spoken_to_as_modern_without_initialize(
    log_path: Path,
) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", "both") as server:
            up = upstream(server)
            await up.connect()
            assert up.era == "modern"
            await up.list_tools()
            assert "initialize" not in server.methods()


@pytest.mark.parametrize("era", ["modern", "both"])
async def test_a_byte_order_mark_before_the_first_answer_is_ignored(
    log_path: Path, era: str
) -> None:
    # The discover answer is the line the mark sits on: dropping it made a dual-era
    # server legacy and a modern-only one unreachable.
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", era, "--bom") as server:
            up = upstream(server, probe_timeout=2.0)
            await up.connect()
            assert up.era == "modern"
            tools = await up.list_tools()
            assert [t.name for t in tools.tools] == ["tool0", "tool1", "tool2"]
            assert "initialize" not in server.methods()


@pytest.mark.parametrize("era", ["modern", "both"])
async def test_unsupported_version_error_is_retried_with_a_listed_version(
    log_path: Path, era: str
) -> None:
    # The first discover gets -32022 with data.supported: modern evidence, so
    # mcpd asks again with a listed version and never falls back to initialize.
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", era, "--unsupported-version") as server:
            up = upstream(server)
            await up.connect()
            assert up.era == "modern"
            assert up.version == MODERN
            await up.list_tools()
            assert server.methods() == ["server/discover", "server/discover", "tools/list"]
            versions = [
                (meta_of(m) or {}).get(f"{RESERVED}protocolVersion")
                for m in server.requests("server/discover")
            ]
            assert versions == [MODERN, MODERN]


async def test_legacy_server_gets_initialize_then_initialized(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", "legacy") as server:
            up = upstream(server)
            await up.connect()
            assert up.era == "legacy"
            assert up.version == "2025-11-25"
            assert up.capabilities == ServerCapabilities()
            assert up.server_info is not None
            assert up.server_info.name == "scripted"
            assert up.probe_died is False
            # A request after the notification proves the server has read it too.
            await up.list_tools()
            assert server.methods() == [
                "server/discover",
                "initialize",
                "notifications/initialized",
                "tools/list",
            ]
            (init,) = server.requests("initialize")
            assert init["params"]["protocolVersion"] == "2025-11-25"
            assert init["params"]["clientInfo"] == {"name": "mcpd", "version": __version__}
            assert init["params"]["capabilities"] == {}
            (initialized,) = server.requests("notifications/initialized")
            assert "id" not in initialized


@pytest.mark.parametrize("code", ["-32602", "-32603", "-32600", "-32000"])
async def test_any_other_discover_error_also_means_legacy(log_path: Path, code: str) -> None:
    # Legacy servers differ (the Python SDK answers -32602): the fallback is not
    # keyed to one error code.
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", "legacy", "--discover-error", code) as server:
            up = upstream(server)
            await up.connect()
            assert up.era == "legacy"
            await up.list_tools()
            assert server.methods() == [
                "server/discover",
                "initialize",
                "notifications/initialized",
                "tools/list",
            ]


async def test_server_that_never_answers_discover_is_legacy_after_the_probe_timeout(
    log_path: Path,
) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", "legacy-silent") as server:
            up = upstream(server, probe_timeout=0.2)
            await up.connect()
            assert up.era == "legacy"
            assert up.version == "2025-11-25"
            tools = await up.list_tools()
            assert [t.name for t in tools.tools] == ["tool0", "tool1", "tool2"]
            assert server.methods()[:3] == [
                "server/discover",
                "initialize",
                "notifications/initialized",
            ]


async def test_server_that_dies_on_discover_raises_and_marks_the_probe_died(
    log_path: Path,
) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", "legacy-dies") as server:
            up = upstream(server)
            with pytest.raises(TransportClosed) as info:
                await up.connect()
            assert up.probe_died is True
            assert up.era is None
            assert "exited with status 1" in str(info.value)
            assert server.methods() == ["server/discover"]


async def test_slow_starting_modern_server_is_found_again_after_initialize_is_refused(
    log_path: Path,
) -> None:
    # The probe times out before the server reads anything; initialize then gets
    # -32022, which is modern evidence, so mcpd probes again instead of giving up.
    with trio.fail_after(20):
        async with scripted_server(log_path, "--era", "modern", "--start-delay", "2") as server:
            up = upstream(server, probe_timeout=0.2)
            await up.connect()
            assert up.era == "modern"
            assert up.version == MODERN
            await up.list_tools()
            assert server.methods() == [
                "server/discover",
                "initialize",
                "server/discover",
                "tools/list",
            ]


async def test_a_slow_modern_server_refusing_initialize_is_told_of_the_probe_time(
    log_path: Path,
) -> None:
    # No -32022 to go on: the refusal names the probe's time limit, the one thing the
    # user can change, rather than reading as a legacy server's complaint.
    with trio.fail_after(20):
        args = ("--era", "modern", "--start-delay", "2", "--initialize-error", "-32600")
        async with scripted_server(log_path, *args) as server:
            up = upstream(server, probe_timeout=0.2)
            with pytest.raises(Incompatible) as info:
                await up.connect()
            assert str(info.value) == (
                "scripted: no answer to server/discover within 0.2 s (the daemon's "
                'probe_timeout), and initialize failed with the error "modern only"'
            )
            assert server.methods() == ["server/discover", "initialize"]


async def test_era_preference_legacy_skips_the_probe(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", "both") as server:
            up = upstream(server, era="legacy")
            await up.connect()
            assert up.era == "legacy"
            await up.list_tools()
            assert server.methods() == ["initialize", "notifications/initialized", "tools/list"]


async def test_era_preference_modern_refuses_a_legacy_server(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", "legacy") as server:
            up = upstream(server, era="modern")
            with pytest.raises(Incompatible, match=MODERN):
                await up.connect()
            assert "initialize" not in server.methods()


async def test_a_legacy_servers_ping_is_answered(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", "legacy", "--ping-first") as server:
            up = upstream(server)
            await up.connect()
            answer = await server.stderr.wait_for(lambda line: "client answered" in line)
            assert "'id': 'srv-1'" in answer
            assert "'result': {}" in answer
            assert "error" not in answer
            # The server is still fine to talk to afterwards.
            tools = await up.list_tools()
            assert len(tools.tools) == 3


# -- tools/list paging --


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_tools_list_follows_next_cursor_until_it_is_absent(log_path: Path, era: str) -> None:
    with trio.fail_after(15):
        async with scripted_server(
            log_path, "--era", era, "--tools", "5", "--page-size", "2"
        ) as server:
            up = upstream(server)
            await up.connect()
            result = await up.list_tools()
            assert [t.name for t in result.tools] == [f"tool{i}" for i in range(5)]
            assert result.dropped == []
            cursors = [
                (m.get("params") or {}).get("cursor", "(none)")
                for m in server.requests("tools/list")
            ]
            assert cursors == ["(none)", "2", "4"]


async def test_a_list_sent_again_unchanged_is_not_decoded_again(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--tools", "5", "--page-size", "2") as server:
            up = upstream(server)
            await up.connect()
            first = await up.list_tools()
            again = await up.list_tools()
            assert len(server.requests("tools/list")) == 6  # both lists were fetched
            assert not first.unchanged and again.unchanged
            # The same tool objects: nothing was decoded the second time.
            assert again.tools is first.tools
            assert [t.name for t in again.tools] == [f"tool{i}" for i in range(5)]


async def test_what_a_list_cost_to_fetch_counts_its_reading_and_every_page_changed_or_not(
    log_path: Path,
) -> None:
    ticks = itertools.count()  # each look at the clock a second later than the last
    with trio.fail_after(15):
        async with scripted_server(log_path, "--tools", "5", "--page-size", "2") as server:
            up = upstream(server, work_clock=lambda: float(next(ticks)))
            await up.connect()
            for _ in range(2):
                read = server.transport.read_work
                listing = await up.list_tools()
                # The pages' reading as the transport measured it, and a second for
                # each of the three pages' search and its decoding, and for what was
                # made of them.
                assert server.transport.read_work > read
                assert listing.cost == pytest.approx(7.0 + server.transport.read_work - read)
            assert listing.unchanged


async def test_a_list_whose_bytes_changed_is_decoded_again(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(
            log_path, "--tools", "3", "--page-size", "2", "--new-descriptions"
        ) as server:
            up = upstream(server)
            await up.connect()
            first = await up.list_tools()
            again = await up.list_tools()
            assert not again.unchanged
            assert [t.description for t in first.tools] == [
                f"test tool {i} (list 1)" for i in range(3)
            ]
            assert [t.description for t in again.tools] == [
                f"test tool {i} (list 2)" for i in range(3)
            ]


async def test_an_empty_string_cursor_is_a_cursor_not_the_end(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(
            log_path, "--tools", "5", "--page-size", "2", "--empty-first-cursor"
        ) as server:
            up = upstream(server)
            await up.connect()
            result = await up.list_tools()
            assert [t.name for t in result.tools] == [f"tool{i}" for i in range(5)]
            cursors = [
                (m.get("params") or {}).get("cursor", "(none)")
                for m in server.requests("tools/list")
            ]
            assert cursors == ["(none)", "", "4"]


async def test_a_repeated_cursor_stops_listing_with_an_error(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(
            log_path, "--tools", "5", "--page-size", "2", "--repeat-cursor"
        ) as server:
            up = upstream(server)
            await up.connect()
            with pytest.raises(ProtocolViolation, match="repeated"):
                await up.list_tools()
            assert len(server.requests("tools/list")) == 2


async def test_the_page_cap_stops_listing_with_an_error(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--tools", "5", "--page-size", "1") as server:
            up = upstream(server, max_pages=3)
            await up.connect()
            with pytest.raises(ProtocolViolation, match="3 pages"):
                await up.list_tools()
            assert len(server.requests("tools/list")) == 3


async def test_a_listing_that_ends_exactly_at_the_page_cap_is_complete(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--tools", "5", "--page-size", "2") as server:
            up = upstream(server, max_pages=3)
            await up.connect()
            result = await up.list_tools()
            assert len(result.tools) == 5


@pytest.mark.parametrize("paged", [False, True])
async def test_a_malformed_tool_is_skipped_and_reported_and_the_others_kept(
    log_path: Path, paged: bool
) -> None:
    flags = ["--tools", "3", "--malformed-tool"] + (["--page-size", "2"] if paged else [])
    with trio.fail_after(15):
        async with scripted_server(log_path, *flags) as server:
            up = upstream(server)
            await up.connect()
            result = await up.list_tools()
            assert [t.name for t in result.tools] == ["tool0", "tool1", "tool2"]
            assert len(result.dropped) == 1
            assert "malformed" in result.dropped[0]


async def test_tools_hosts_would_refuse_are_dropped_or_mended(log_path: Path) -> None:
    flags = ["--tools", "1", "--extra-tools", json.dumps(BAD_SHAPES), "--page-size", "3"]
    with trio.fail_after(15):
        async with scripted_server(log_path, *flags) as server:
            up = upstream(server)
            await up.connect()
            result = await up.list_tools()
    tools = {t.name: t for t in result.tools}
    assert sorted(tools) == ["empty", "odd_fields", "tool0", "untyped"]
    assert tools["tool0"].description != "a second tool0", "a later duplicate replaced the first"
    assert json.loads(bytes(tools["untyped"].inputSchema)) == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
    }
    assert json.loads(bytes(tools["empty"].inputSchema)) == {"type": "object"}
    assert tools["odd_fields"].outputSchema is UNSET and tools["odd_fields"].icons is UNSET
    reasons = " | ".join(result.dropped)
    for name in ("array_schema", "string_schema", "null_schema", "list_type"):
        assert f"{name}: inputSchema" in reasons
    assert '"array", not "object"' in reasons and "tool0: listed twice" in reasons


async def test_tool_definitions_keep_their_input_schema_bytes(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--tools", "1") as server:
            up = upstream(server)
            await up.connect()
            (tool,) = (await up.list_tools()).tools
            # The scripted server writes with json.dumps: ", " and ": " separators.
            assert bytes(tool.inputSchema) == (
                b'{"type": "object", "properties": {"text": {"type": "string"}}}'
            )
            assert tool.annotations == {"readOnlyHint": True}


# -- what each era puts on the wire --


async def test_modern_requests_carry_version_capabilities_and_client_info(
    log_path: Path,
) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--tools", "3", "--page-size", "2") as server:
            up = upstream(server)
            await up.connect()
            await up.list_tools()
            await at_upstream(up, mcp.CallToolParams(name="tool0", arguments=Raw(b"{}")))
            await up.probe()
            received = server.received()
            assert [m["method"] for m in received] == [
                "server/discover",
                "tools/list",
                "tools/list",
                "tools/call",
                "server/discover",
            ]
            for message in received:
                meta = meta_of(message)
                assert meta is not None, message
                assert meta[f"{RESERVED}protocolVersion"] == MODERN
                assert meta[f"{RESERVED}clientCapabilities"] == {}
                assert meta[f"{RESERVED}clientInfo"] == {"name": "mcpd", "version": __version__}


async def test_modern_call_keeps_the_agents_own_meta_but_not_its_reserved_keys(
    log_path: Path,
) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path) as server:
            up = upstream(server)
            await up.connect()
            params = mcp.CallToolParams(
                name="tool0",
                arguments=Raw(b"{}"),
                meta={
                    "progressToken": "p-1",
                    f"{RESERVED}protocolVersion": "1999-01-01",
                    f"{RESERVED}clientInfo": {"name": "agent", "version": "9"},
                },
            )
            await at_upstream(up, params, capabilities={"elicitation": {}})
            (call,) = server.requests("tools/call")
            assert call["params"]["_meta"] == {
                "progressToken": "p-1",
                f"{RESERVED}protocolVersion": MODERN,
                f"{RESERVED}clientCapabilities": {"elicitation": {}},
                f"{RESERVED}clientInfo": {"name": "mcpd", "version": __version__},
            }


async def test_legacy_requests_carry_no_modern_meta(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(
            log_path, "--era", "legacy", "--tools", "3", "--page-size", "2"
        ) as server:
            up = upstream(server)
            await up.connect()
            await up.list_tools()
            params = mcp.CallToolParams(
                name="tool0",
                arguments=Raw(b'{"text":"hi"}'),
                meta={"progressToken": 7, f"{RESERVED}protocolVersion": MODERN},
            )
            assert text_of(await at_upstream(up, params)) == "tool0:hi"
            await up.probe()
            lines = server.raw_lines()
            received = server.received()
            start = [m.get("method") for m in received].index("initialize")
            assert [m.get("method") for m in received[start:]] == [
                "initialize",
                "notifications/initialized",
                "tools/list",
                "tools/list",
                "tools/call",
                "ping",
            ]
            for line in lines[start:]:
                assert RESERVED.encode() not in line, line
            (call,) = server.requests("tools/call")
            assert call["params"]["_meta"] == {"progressToken": 7}
            first_list = server.requests("tools/list")[0]
            assert "_meta" not in (first_list.get("params") or {})


async def test_call_tool_sends_the_original_name_and_arguments_byte_exact(
    log_path: Path,
) -> None:
    arguments = b'{ "text" :"caf\\u00e9  \\"q\\"",  "n":1.50,"list":[1 ,2,3],"deep":{"a":null}}'
    with trio.fail_after(15):
        async with scripted_server(log_path, "--names", "notes.search,other") as server:
            up = upstream(server)
            await up.connect()
            result = await at_upstream(
                up, mcp.CallToolParams(name="notes.search", arguments=Raw(arguments))
            )
            assert text_of(result) == 'notes.search:café  "q"'
            (line,) = [raw for raw in server.raw_lines() if b'"tools/call"' in raw]
            assert b'"arguments":' + arguments in line
            assert json.loads(line)["params"]["name"] == "notes.search"


async def test_call_tool_result_is_returned_as_the_servers_bytes(log_path: Path) -> None:
    with trio.fail_after(15):
        async with scripted_server(log_path, "--era", "legacy") as server:
            up = upstream(server)
            await up.connect()
            raw = await at_upstream(
                up, mcp.CallToolParams(name="tool1", arguments=Raw(b'{"text":"x"}'))
            )
            # json.dumps spacing shows these are the server's bytes, not re-encoded.
            assert bytes(raw) == b'{"content": [{"type": "text", "text": "tool1:x"}]}'


async def test_a_list_ttl_that_is_no_whole_number_is_said_once_while_it_stays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    canned = Path(__file__).resolve().parents[3] / "support" / "servers" / "canned.py"
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"tools": {"a": {}}, "list_ttl": "1.5"}))
    params = StdioParams(command=sys.executable, args=[str(canned), str(answers)])
    with trio.fail_after(15):
        async with open_stdio_transport("canned", params) as transport:
            up = Upstream("canned", transport)
            await up.connect()
            for _ in range(3):
                result = await up.list_tools()
                assert [t.name for t in result.tools] == ["a"] and result.ttl_ms == 0
    said = [r.getMessage() for r in caplog.records if "ttlMs" in r.getMessage()]
    assert said == [
        'canned: tools/list: its ttlMs "1.5" is no whole number of milliseconds '
        "mcpd can read; taken as 0"
    ]


class Answering:
    """A transport that answers every request with ``answer``, as it came."""

    era = "modern"
    read_work = 0.0

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.sent: list[str] = []

    async def request(self, method: str, params: Any, **_: Any) -> Raw:
        self.sent.append(method)
        return Raw(self.answer)

    def send(self, method: str, params: Any, reply: Any, **_: Any) -> rpc.Id:
        raise TransportClosed(f"this transport sends no {method} without waiting")


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_the_health_probe_reads_nothing_of_its_answer(
    era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def walked(value: object) -> bool:
        raise AssertionError("the probe's answer was taken apart")

    monkeypatch.setattr(own_keys, "drop_from_meta", walked)
    answer = b'{"resultType":"complete","x":[' + b",".join([b"{}"] * 1000)
    transport = Answering(answer + b'],"_meta":{"mcpd/outage":{"state":"failed"}}}')
    up = Upstream("s", transport)  # type: ignore[arg-type]
    up.era, up.version = era, MODERN if era == "modern" else "2025-11-25"  # type: ignore[assignment]
    await up.probe()
    # A legacy server is pinged: a list may take as long as the server likes to make.
    assert transport.sent == ["server/discover" if era == "modern" else "ping"]
    with pytest.raises(AssertionError, match="taken apart"):
        await up.request("server/discover", UNSET)


async def test_a_page_taken_apart_in_the_servers_thread_counts_what_that_took() -> None:
    ticks = itertools.count()  # each look at the clock a second later than the last
    threads: list[int] = []

    def clock() -> float:
        threads.append(threading.get_ident())
        return float(next(ticks))

    tool = b'{"name":"a","inputSchema":{"type":"object"}}'
    empties = b",".join([b"{}"] * (3 * AT_ONCE_PARTS))
    page = b'{"tools":[' + tool + b'],"x":[' + empties + b'],"_meta":{"mcpd/server":"n"}}'
    up = Upstream("s", Answering(page), work_clock=clock)  # type: ignore[arg-type]
    up.era, up.version = "legacy", "2025-11-25"
    listing = await up.list_tools()
    assert [t.name for t in listing.tools] == ["a"]
    # A second for the page's search on the event loop, for its taking apart in the
    # server's thread, for its decoding and for what was made of it.
    assert listing.cost == 4.0
    assert len(set(threads)) == 2


async def test_a_tasks_result_too_large_to_take_apart_fails_that_request() -> None:
    empties = b",".join([b"{}"] * MOST_PARTS)
    up = Upstream("s", Answering(b'{"taskId":"t","status":"working","x":[' + empties + b"]}"))  # type: ignore[arg-type]
    up.era, up.version = "modern", MODERN  # type: ignore[assignment]
    with pytest.raises(TooComplex, match="a tasks/get result of"):
        await up.request("tasks/get", {"taskId": "t"})
    # Any other result of the same bytes holds nothing to take apart: it passes.
    assert bytes(await up.request("tools/list", UNSET)).startswith(b'{"taskId":"t"')


class Failing(Answering):
    """A transport that fails every request with ``error``."""

    def __init__(self, error: Exception) -> None:
        super().__init__(b"{}")
        self.error = error

    async def request(self, method: str, params: Any, **_: Any) -> Raw:
        raise self.error


@pytest.mark.parametrize(
    ("transport", "answered"),
    [
        (Answering(b'{"contents":[]}'), True),
        (Failing(rpc.RPCError(rpc.INVALID_PARAMS, "no such resource")), True),
        (Failing(MalformedReply("not JSON")), True),
        (Failing(TransportClosed("s: connection reset")), False),
    ],
    ids=["a result", "an error", "an unreadable reply", "a failure"],
)
async def test_each_answer_to_a_request_is_heard_of(transport: Answering, answered: bool) -> None:
    heard: list[None] = []
    up = Upstream("s", transport, answered=lambda: heard.append(None))  # type: ignore[arg-type]
    up.era, up.version = "modern", MODERN  # type: ignore[assignment]
    with contextlib.suppress(rpc.RPCError, MalformedReply, TransportClosed):
        await up.request("resources/read", {"uri": "file:///a"})
    assert len(heard) == int(answered)


async def test_a_program_that_echoes_what_it_reads_is_told_apart(tmp_path: Path) -> None:
    # /bin/cat sends mcpd's initialize back as a request, then mcpd's refusal of it as
    # the answer: not the server's words, though they would read as such.
    with trio.fail_after(20):
        async with open_stdio_transport("echo", StdioParams(command="/bin/cat")) as transport:
            with pytest.raises(Incompatible) as info:
                await Upstream("echo", transport, probe_timeout=2).connect()
    assert str(info.value) == (
        "echo: the server sent mcpd's initialize request back as its own, then mcpd's "
        "refusal of it as the answer: it echoes what it reads (is it an MCP server?)"
    )
