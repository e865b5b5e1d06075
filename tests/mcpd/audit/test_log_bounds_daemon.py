"""A running daemon's audit records stay within their bound whatever an agent or a
server sends: a burst of made-up tool names of megabytes each (on the socket, through
search mode's ``mcpd_call_tool`` and over HTTP) leaves the records before it in the
file, each name cut to its first 256 characters and its length; a server's over-long
tool name is cut the same way; arguments whose masking makes two keys one are kept
with both; and an HTTP call refused for reusing an id in flight leaves its record."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from mcpd.audit.log import FILE_NAME
from mcpd.audit.record import NAME_KEPT, NAME_SHOWN
from tests.support.clients.agent import connect, make_config, running
from tests.support.clients.http_stream_client import Client, open_session, session_headers
from tests.support.daemons.reloading import wait_for
from tests.support.system.procs import scripted

LIMIT = 90
HUGE = 2_000_000  # characters of each made-up name
SECRET = "held-secret-value-0123456789"
MARKER = "[secret of servers.vault.env.API_TOKEN]"
# A record's texts are cut to NAME_KEPT characters; nothing else in one comes near it.
LONGEST_LINE = 4 * NAME_KEPT


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


def records(state: Path) -> list[dict[str, Any]]:
    """Every record in the file and its rotated copies, oldest first."""
    rotated = sorted(state.glob(FILE_NAME + ".*"), key=lambda p: -int(p.suffix[1:]))
    files = [*rotated, state / FILE_NAME]
    lines = [line for f in files for line in f.read_text().splitlines()]
    assert all(len(line.encode()) < LONGEST_LINE for line in lines)
    return [json.loads(line) for line in lines]


async def test_made_up_names_of_megabytes_leave_the_records_before_them(tmp_path: Path) -> None:
    long_tool = "L" * 20_000
    servers = {
        "echo": server("--names", f"echo,{long_tool}"),
        "vault": {"command": sys.executable, "env": {"API_TOKEN": SECRET}, "enabled": False},
    }
    state = tmp_path / "state"
    cfg = make_config(
        tmp_path,
        servers,
        profiles={"srch": {"discovery": "search"}},
        state_dir=str(state),
        audit_arguments=True,
        audit_journal=False,
        audit_max_bytes=65536,
        audit_files=2,
    )
    made_up = "x" * HUGE
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            async with connect(daemon.socket_path) as agent:
                for i in range(5):
                    await agent.call("mcp__echo__echo", {"i": i})
                [local] = [t["name"] for t in await agent.tools() if "LLLL" in t["name"]]
                await agent.call(local, {})
                # What the server was sent: both keys, one of them the secret.
                both = {SECRET: "DANGEROUS", MARKER: "harmless"}
                assert not (await agent.call("mcp__echo__echo", both)).get("isError")
                for name in [made_up] * 7 + [made_up[:1000]]:
                    refused = await agent.rpc("tools/call", {"name": name, "arguments": {}})
                    assert refused["result"]["isError"]
                await agent.use_profile("srch")
                await agent.rpc(
                    "tools/call",
                    {"name": "mcpd_call_tool", "arguments": {"name": made_up, "arguments": {}}},
                )
            sid = await open_session(daemon, unix=daemon.socket_path)
            request = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
            request["params"] = {"name": made_up, "arguments": {}}  # type: ignore[assignment]
            async with Client.open(daemon, unix=daemon.socket_path) as c:
                assert (await c.request("POST", session_headers(sid), request))[0] == 200
            kept = daemon.oversight.audit.recent(lambda r: True, 1000)
            assert sum(len(r.name or "") for r in kept) < len(kept) * NAME_KEPT
    found = records(state)
    assert [r["arguments"] for r in found[:5]] == [{"i": i} for i in range(5)]
    assert (
        found[5]["original"]
        == f"{'L' * NAME_SHOWN}\u2026 (and {20000 - NAME_SHOWN} more characters)"
    )
    # The record keeps both keys the server got, the secret masked, as the text sent.
    assert found[6]["arguments"] == f'{{"{MARKER}":"DANGEROUS","{MARKER}":"harmless"}}'
    cut = f"{'x' * NAME_SHOWN}\u2026 (and {HUGE - NAME_SHOWN} more characters)"
    shorter = f"{'x' * NAME_SHOWN}… (and {1000 - NAME_SHOWN} more characters)"
    assert [r["name"] for r in found[7:]] == [cut] * 7 + [shorter] + [cut] * 2
    assert [r["reason"] for r in found[7:]] == ["unknown tool"] * 10


async def test_an_http_call_reusing_an_id_in_flight_leaves_its_record(tmp_path: Path) -> None:
    heard = tmp_path / "heard.jsonl"
    slow = server("--names", "nap,delete_all", "--hang-on-call", "--log-file", str(heard))
    state = tmp_path / "state"
    cfg = make_config(tmp_path, {"slow": slow}, state_dir=str(state), audit_journal=False)
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            sid = await open_session(daemon, unix=sock)

            def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
                params = {"name": name, "arguments": arguments}
                return {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}

            async def first() -> None:
                async with Client.open(daemon, unix=sock) as c:
                    await c.request("POST", session_headers(sid), call("mcp__slow__nap", {}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(first)
                await wait_for(lambda: heard.exists() and '"tools/call"' in heard.read_text())
                async with Client.open(daemon, unix=sock) as c:
                    again = call("mcp__slow__delete_all", {"b": 2})
                    status, _, body = await c.request("POST", session_headers(sid), again)
                assert status == 400 and "is in use" in json.loads(body)["error"]["message"]
                nursery.cancel_scope.cancel()
    turned = [r for r in records(state) if r["name"] == "mcp__slow__delete_all"]
    assert [(r["outcome"], r["reason"]) for r in turned] == [
        ("refused", "its id was in use by a request in flight")
    ]
    assert turned[0]["args_bytes"] == len(json.dumps({"b": 2}))


async def test_the_file_holds_hidden_characters_only_as_escapes(tmp_path: Path) -> None:
    """A name or arguments an agent chose with bidi controls, zero-width characters or
    DEL in them reach the file as ``\\uXXXX`` escapes, which decode to what was sent:
    read in a terminal, the record is not reordered or hidden."""
    state = tmp_path / "state"
    cfg = make_config(
        tmp_path,
        {"echo": server("--names", "echo")},
        state_dir=str(state),
        audit_arguments=True,
        audit_journal=False,
    )
    name = "x\u202eevil\u200b\u2066\x7fz é"
    arguments = {"note": "a\u202eb\u200bc"}
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            async with connect(daemon.socket_path) as agent:
                refused = await agent.rpc("tools/call", {"name": name, "arguments": {}})
                assert refused["result"]["isError"]
                await agent.call("mcp__echo__echo", arguments)
            await daemon.oversight.audit.flush()
    written = (state / FILE_NAME).read_text()
    assert not {"\u202e", "\u200b", "\u2066", "\x7f"} & set(written)
    assert "\\u202e" in written and "é" in written
    found = records(state)
    assert [r["name"] for r in found] == [name, "mcp__echo__echo"]
    assert found[1]["arguments"] == arguments
