"""The demo servers on stdio, as real child processes, in both protocol eras."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from mcpd.demo import notes
from tests.support.clients.demo import (
    CUSTOM,
    INITIALIZED,
    MODERN,
    NOTES,
    TICKETS,
    call,
    cancel,
    initialize,
    meta,
    pages,
    request,
    spawn_stdio,
    text_of,
)

SERVER_INFO = "io.modelcontextprotocol/serverInfo"


async def test_notes_modern_discover_pages_and_the_long_note() -> None:
    with trio.fail_after(20):
        async with spawn_stdio(NOTES) as peer:
            discover = (await peer.ask(request(1, "server/discover", {"_meta": meta()})))["result"]
            assert MODERN in discover["supportedVersions"]
            assert discover["resultType"] == "complete"
            assert discover["ttlMs"] >= 0 and discover["cacheScope"] in ("public", "private")
            assert discover["_meta"][SERVER_INFO]["name"] == "notes"
            assert "tools" in discover["capabilities"]

            listed = await pages(peer, 2, {"_meta": meta()})
            assert [len(p["tools"]) for p in listed] == [2, 1]
            for page in listed:
                assert page["resultType"] == "complete"
                assert page["ttlMs"] >= 0 and page["cacheScope"] in ("public", "private")
                assert page["_meta"][SERVER_INFO]["name"] == "notes"
            tools = {t["name"]: t for p in listed for t in p["tools"]}
            assert set(tools) == {"search", "read_note", "list_notes"}
            assert tools["read_note"]["inputSchema"]["required"] == ["name"]

            handbook = await peer.ask(call(10, "read_note", {"name": "handbook"}))
            assert handbook["result"]["resultType"] == "complete"
            assert handbook["result"]["_meta"][SERVER_INFO]["name"] == "notes"
            text = text_of(handbook)
            assert len(text) > 20_000
            assert text == notes.handbook(), "generated the same way on every run"

            names = text_of(await peer.ask(call(11, "list_notes", {})))
            assert "handbook" in names and "welcome" in names
            found = text_of(await peer.ask(call(12, "search", {"query": "LEMON"})))
            assert {line.split(":")[0] for line in found.splitlines()} == {"groceries", "recipes"}
            assert peer.seen == [m for m in peer.seen if "id" in m], "no notifications expected"


async def test_notes_legacy_handshake_ping_and_pages() -> None:
    with trio.fail_after(20):
        async with spawn_stdio(NOTES) as peer:
            init = (await peer.ask(initialize(1)))["result"]
            assert init["protocolVersion"] == "2025-11-25"
            assert init["serverInfo"]["name"] == "notes"
            assert "tools" in init["capabilities"]
            await peer.send(INITIALIZED)
            assert (await peer.ask(request(2, "ping")))["result"] == {}

            listed = await pages(peer, 3, {})
            assert [len(p["tools"]) for p in listed] == [2, 1]
            assert all("resultType" not in p and "ttlMs" not in p for p in listed)

            reply = await peer.ask(
                request(9, "tools/call", {"name": "read_note", "arguments": {"name": "welcome"}})
            )
            assert "resultType" not in reply["result"]
            assert text_of(reply).startswith("# Welcome")


@pytest.mark.parametrize("how", ["--dir", "NOTES_DIR"])
async def test_notes_from_a_directory(tmp_path: Path, how: str) -> None:
    (tmp_path / "alpha.md").write_text("# Alpha\nthe quick brown fox\n")
    (tmp_path / "beta.txt").write_text("lazy dogs sleep\n")
    (tmp_path / "ignored.json").write_text("{}")
    argv = [*NOTES, "--dir", str(tmp_path)] if how == "--dir" else NOTES
    env = {"NOTES_DIR": str(tmp_path)} if how == "NOTES_DIR" else None
    with trio.fail_after(20):
        async with spawn_stdio(argv, env=env) as peer:
            listing = text_of(await peer.ask(call(1, "list_notes", {})))
            assert [line.split()[0] for line in listing.splitlines()] == ["alpha", "beta"]
            assert (
                text_of(await peer.ask(call(2, "read_note", {"name": "beta"})))
                == "lazy dogs sleep\n"
            )
            assert text_of(await peer.ask(call(3, "search", {"query": "fox"}))).startswith(
                "alpha: "
            )


async def test_errors_protocol_and_tool_level() -> None:
    with trio.fail_after(20):
        async with spawn_stdio(NOTES) as peer:
            bad_cursor = await peer.ask(
                request(1, "tools/list", {"_meta": meta(), "cursor": "nope"})
            )
            assert bad_cursor["error"]["code"] == -32602

            unknown = await peer.ask(call(2, "no_such_tool", {}))
            assert unknown["error"]["code"] == -32602
            assert "no_such_tool" in unknown["error"]["message"]

            missing = (await peer.ask(call(3, "read_note", {})))["result"]
            assert missing["isError"] is True
            assert "'name'" in missing["content"][0]["text"]

            wrong_type = (await peer.ask(call(4, "search", {"query": 5})))["result"]
            assert wrong_type["isError"] is True and "string" in wrong_type["content"][0]["text"]

            extra = (await peer.ask(call(5, "list_notes", {"verbose": True})))["result"]
            assert extra["isError"] is True and "verbose" in extra["content"][0]["text"]

            absent = (await peer.ask(call(6, "read_note", {"name": "nope"})))["result"]
            assert absent["isError"] is True and "nope" in absent["content"][0]["text"]

            method = await peer.ask(request(7, "prompts/list", {"_meta": meta()}))
            assert method["error"]["code"] == -32601

            no_meta = await peer.ask(request(8, "tools/list", {}))
            assert no_meta["error"]["code"] == -32602

            future = await peer.ask(request(9, "server/discover", {"_meta": meta("2099-01-01")}))
            assert future["error"]["code"] == -32022
            assert MODERN in future["error"]["data"]["supported"]
            assert future["error"]["data"]["requested"] == "2099-01-01"

            # Removed from 2026-07-28: ping is a legacy method.
            ping = await peer.ask(request(10, "ping", {"_meta": meta()}))
            assert ping["error"]["code"] == -32601

            await peer.send({"jsonrpc": "2.0", "id": 11, "method": 5})
            assert (await peer.response(11))["error"]["code"] == -32600


async def test_a_failing_handler_is_a_tool_error() -> None:
    with trio.fail_after(20):
        async with spawn_stdio(CUSTOM) as peer:
            result = (await peer.ask(call(1, "boom", {})))["result"]
            assert result["isError"] is True
            assert "kaboom" in result["content"][0]["text"]
            assert result["resultType"] == "complete"


async def test_progress_comes_before_the_result_only_when_asked() -> None:
    with trio.fail_after(20):
        async with spawn_stdio(TICKETS) as peer:
            await peer.send(call(1, "search", {"query": "login"}, progressToken="tok-1"))
            first = await peer.recv()
            assert first is not None and first["method"] == "notifications/progress"
            assert first["params"]["progressToken"] == "tok-1"
            second = await peer.recv()
            assert second is not None and second["id"] == 1
            assert "T-1" in text_of(second)

            await peer.send(call(2, "search", {"query": "login"}))
            plain = await peer.recv()
            assert plain is not None and plain.get("id") == 2, "no progress without a token"


async def test_tickets_calls_and_annotations() -> None:
    with trio.fail_after(20):
        async with spawn_stdio(TICKETS) as peer:
            (page,) = await pages(peer, 1, {"_meta": meta()})
            hints = {t["name"]: t.get("annotations", {}).get("readOnlyHint") for t in page["tools"]}
            assert hints == {"search": True, "get_ticket": True, "create_ticket": False}

            created = text_of(
                await peer.ask(
                    call(2, "create_ticket", {"title": "Printer on fire", "priority": "high"})
                )
            )
            new_id = created.split()[1]
            ticket = (await peer.ask(call(3, "get_ticket", {"id": new_id})))["result"]
            assert ticket["structuredContent"]["title"] == "Printer on fire"
            assert ticket["structuredContent"]["priority"] == "high"
            assert new_id in text_of(await peer.ask(call(4, "search", {"query": "printer"})))
            closed = text_of(await peer.ask(call(5, "search", {"query": "", "status": "closed"})))
            assert closed.splitlines() == [
                "T-2 [closed, normal] Export to CSV drops the header row"
            ]


async def test_requests_run_concurrently_and_cancel() -> None:
    with trio.fail_after(20):
        async with spawn_stdio(CUSTOM) as peer:
            await peer.send(call(1, "sleep", {}))
            await peer.send(call("two", "sleep", {}))
            # Neither is answered, yet a third request gets through.
            assert "sleep" in json.dumps(
                (await peer.ask(request(3, "tools/list", {"_meta": meta()})))["result"]
            )
            await peer.send(cancel(1))
            assert json.loads(text_of(await peer.ask(call(4, "cancelled", {"count": 1})))) == [1]
            await peer.send(cancel("two"))
            assert json.loads(text_of(await peer.ask(call(5, "cancelled", {"count": 2})))) == [
                1,
                "two",
            ]
            await peer.close_input()
            rest = await peer.rest()
            answered = {m.get("id") for m in peer.seen + rest if "method" not in m}
            assert answered == {3, 4, 5}, "a cancelled request must not be answered"
            assert await peer.proc.wait() == 0


async def test_stdin_eof_lets_running_work_finish_then_exits() -> None:
    with trio.fail_after(20):
        async with spawn_stdio(NOTES) as peer:
            for i in range(5):
                await peer.send(call(i, "read_note", {"name": "handbook"}))
            await peer.close_input()
            rest = await peer.rest()
            assert sorted(m["id"] for m in rest) == [0, 1, 2, 3, 4]
            assert await peer.proc.wait() == 0


async def test_stdin_eof_cancels_work_that_outlives_the_grace() -> None:
    with trio.fail_after(20):
        async with spawn_stdio([*CUSTOM, "--eof-grace", "0"]) as peer:
            await peer.send(call(1, "sleep", {}, progressToken=1))
            assert (await peer.recv() or {}).get("method") == "notifications/progress"
            await peer.close_input()
            assert await peer.rest() == []
            assert await peer.proc.wait() == 0


async def test_stray_prints_do_not_reach_stdout() -> None:
    with trio.fail_after(20):
        async with spawn_stdio(CUSTOM) as peer:
            assert text_of(await peer.ask(call(1, "chatter", {}))) == "printed"
            await peer.close_input()
            assert await peer.rest() == []


async def test_tool_list_changes_reach_legacy_clients_and_listeners() -> None:
    with trio.fail_after(20):
        async with spawn_stdio([*CUSTOM, "--page-size", "2"]) as legacy:
            await legacy.ask(initialize(1))
            await legacy.send(INITIALIZED)
            first = (await legacy.ask(request(2, "tools/list", {})))["result"]
            await legacy.ask(
                request(3, "tools/call", {"name": "grow", "arguments": {"name": "echo2"}})
            )
            assert await legacy.notification("notifications/tools/list_changed") == {
                "jsonrpc": "2.0",
                "method": "notifications/tools/list_changed",
            }
            stale = await legacy.ask(request(4, "tools/list", {"cursor": first["nextCursor"]}))
            assert stale["error"]["code"] == -32602, "a cursor from before the change is refused"
            names = [t["name"] for p in await pages(legacy, 5, {}) for t in p["tools"]]
            assert "echo2" in names

        async with spawn_stdio(CUSTOM) as modern:
            listen = request(
                "L1",
                "subscriptions/listen",
                {"_meta": meta(), "notifications": {"toolsListChanged": True}},
            )
            await modern.send(listen)
            ack = await modern.recv()
            assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
            assert ack["params"]["notifications"] == {"toolsListChanged": True}
            await modern.ask(call(2, "shrink", {"name": "boom"}))
            changed = await modern.notification("notifications/tools/list_changed")
            assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
            await modern.send(cancel("L1"))
            await modern.close_input()
            assert all(m.get("id") != "L1" for m in await modern.rest())
            assert await modern.proc.wait() == 0


@pytest.mark.parametrize(
    "line", [b"{not json\n", b"[1,2]\n", b'{"jsonrpc":"2.0","id":true,"method":"x"}\n']
)
async def test_garbage_gets_an_error_and_the_connection_survives(line: bytes) -> None:
    with trio.fail_after(20):
        async with spawn_stdio(NOTES) as peer:
            await peer._stdin.send_all(line)
            err = await peer.recv()
            assert err is not None and err["error"]["code"] in (-32700, -32600)
            assert err["id"] is None
            assert "result" in await peer.ask(request(1, "server/discover", {"_meta": meta()}))


async def test_sigterm_stops_a_server_whose_client_stopped_reading() -> None:
    with trio.fail_after(20):
        async with spawn_stdio(NOTES) as peer:
            # Far more output than a pipe holds, and the client reads almost none of it.
            for i in range(40):
                await peer.send(call(i, "read_note", {"name": "handbook"}))
            assert "result" in (await peer.recv() or {})
            peer.proc.terminate()
            assert await peer.proc.wait() == 0
