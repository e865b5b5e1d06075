"""HTTP on the agent socket: curl against a running daemon for /status, /tools, /healthz,
/metrics, and Streamable HTTP MCP on /mcp in both eras, next to line-protocol agents."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import META, connect, make_config, running
from tests.support.clients.daemon_http import CURL, curl, modern, modern_headers, post
from tests.support.system.procs import scripted

pytestmark = pytest.mark.skipif(CURL is None, reason="curl is not installed")


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


async def test_status_tools_healthz_and_metrics_over_curl(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server("--tools", "2"), "beta": server("--tools", "1")})
    with trio.fail_after(60):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            sock = daemon.socket_path
            status = await curl(sock, "/status")
            assert status.status == 200 and status.headers["content-type"] == "application/json"
            assert [s["alias"] for s in status.json()["servers"]] == ["alpha", "beta"]

            tools = (await curl(sock, "/tools")).json()["tools"]
            assert [t["name"] for t in tools] == [
                "mcp__alpha__tool0",
                "mcp__alpha__tool1",
                "mcp__beta__tool0",
            ]
            assert tools[0]["_meta"]["mcpd/server"] == "alpha"
            anthropic = (await curl(sock, "/tools?format=anthropic")).json()
            assert set(anthropic[0]) == {"name", "description", "input_schema"}
            openai = (await curl(sock, "/tools?format=openai")).json()
            assert openai[0]["function"]["parameters"]["type"] == "object"
            assert (await curl(sock, "/tools?format=xml")).status == 400

            health = await curl(sock, "/healthz")
            assert health.status == 200 and health.json() == {"status": "ok", "servers": 2}

            for i in range(3):
                await agent.call("mcp__alpha__tool0", {"text": str(i)})
            await agent.call("mcp__beta__tool0", {"text": "x"})
            text = (await curl(sock, "/metrics")).body.decode()
            assert (await curl(sock, "/metrics")).headers["content-type"].startswith("text/plain")
            assert 'mcpd_tool_calls_total{server="alpha"} 3' in text
            assert 'mcpd_tool_calls_total{server="beta"} 1' in text
            assert 'mcpd_server_up{server="alpha"} 1' in text
            assert 'mcpd_server_state{server="alpha",state="ready"} 1' in text
            assert 'mcpd_tool_call_duration_seconds_bucket{server="alpha",le="+Inf"} 3' in text
            assert 'mcpd_tool_call_duration_seconds_count{server="alpha"} 3' in text
            assert 'mcpd_server_restarts_total{server="alpha"} 0' in text
            assert 'mcpd_breaker_opens_total{server="alpha"} 0' in text
            buckets = [
                int(m)
                for m in re.findall(
                    r'duration_seconds_bucket\{server="alpha",le="[^"]+"\} (\d+)', text
                )
            ]
            assert buckets == sorted(buckets) and buckets[-1] == 3  # cumulative
            assert "# TYPE mcpd_tool_call_duration_seconds histogram" in text

            assert (await curl(sock, "/nowhere")).status == 404
            assert (await curl(sock, "/status", "-X", "POST")).status == 405
            assert (await curl(sock, "/healthz", "-I")).status == 200
            # The line protocol on the same socket is unaffected.
            assert len(await agent.tools()) == 3


async def test_healthz_is_503_with_the_reasons_while_a_server_is_down(tmp_path: Path) -> None:
    broken = {"command": "/bin/sh", "args": ["-c", "echo 'no database' >&2; exit 3"]}
    # A slow retry keeps "db" failed (with a retry time) for the whole test.
    cfg = make_config(tmp_path, {"alpha": server(), "db": broken}, backoff_base=30, backoff_cap=60)
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            health = await curl(daemon.socket_path, "/healthz")
            assert health.status == 503
            body = health.json()
            assert body["status"] == "unavailable"
            (db,) = body["servers"]
            assert db["server"] == "db" and db["available"] is False
            assert "exited with status 3" in db["reason"] and db["retry_at"]
            metrics = (await curl(daemon.socket_path, "/metrics")).body.decode()
            assert 'mcpd_server_up{server="db"} 0' in metrics
            restarts = re.search(r'mcpd_server_restarts_total\{server="db"\} (\d+)', metrics)
            assert restarts is not None and int(restarts.group(1)) >= 1


async def test_modern_streamable_http_list_and_call(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server("--tools", "2")})
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            found = await post(
                sock, modern(1, "server/discover"), *modern_headers("server/discover")
            )
            assert found.status == 200
            assert found.json()["result"]["supportedVersions"] == ["2026-07-28"]
            listed = await post(sock, modern(2, "tools/list"), *modern_headers("tools/list"))
            result = listed.json()["result"]
            assert result["resultType"] == "complete"
            assert [t["name"] for t in result["tools"]] == [
                "mcp__alpha__tool0",
                "mcp__alpha__tool1",
            ]
            call = modern(
                3, "tools/call", {"name": "mcp__alpha__tool1", "arguments": {"text": "hi"}}
            )
            called = await post(sock, call, *modern_headers("tools/call", "mcp__alpha__tool1"))
            assert called.status == 200
            assert called.json()["result"]["content"][0]["text"] == "tool1:hi"
            # The routing headers are checked against the body, as the spec requires.
            wrong = await post(sock, call, *modern_headers("tools/call", "mcp__alpha__tool0"))
            assert wrong.status == 400 and wrong.json()["error"]["code"] == -32020
            missing = await post(sock, modern(4, "no/such"), *modern_headers("no/such"))
            assert missing.status == 404 and missing.json()["error"]["code"] == -32601
            bad_version = dict(modern(5, "tools/list"))
            bad_version["params"] = {
                "_meta": {**META, "io.modelcontextprotocol/protocolVersion": "1999-01-01"}
            }
            old = await post(
                sock, bad_version, "MCP-Protocol-Version: 1999-01-01", "Mcp-Method: tools/list"
            )
            assert old.status == 400 and old.json()["error"]["code"] == -32022
            no_accept = await curl(
                sock,
                "/mcp",
                *("-H", "Content-Type: application/json", "-H", "Accept: application/json"),
                *("--data-binary", "{}"),
            )
            assert no_accept.status == 406


async def test_progress_turns_the_answer_into_an_event_stream(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server("--progress", "2")})
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            params = {
                "name": "mcp__alpha__tool0",
                "arguments": {"text": "p"},
                "_meta": {**META, "progressToken": "tok"},
            }
            body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
            reply = await post(
                daemon.socket_path, body, *modern_headers("tools/call", "mcp__alpha__tool0")
            )
            assert reply.headers["content-type"] == "text/event-stream"
            events = reply.events()
            assert [e.get("method") for e in events] == [
                "notifications/progress",
                "notifications/progress",
                None,
            ]
            assert events[0]["params"]["progressToken"] == "tok"
            assert events[-1]["id"] == 9
            assert events[-1]["result"]["content"][0]["text"] == "tool0:p"


async def test_legacy_session_over_http(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server()})
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
    }
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            sock = daemon.socket_path
            opened = await post(sock, init)
            assert opened.status == 200
            assert opened.json()["result"]["protocolVersion"] == "2025-11-25"
            sid = opened.headers["mcp-session-id"]
            session = [f"Mcp-Session-Id: {sid}", "MCP-Protocol-Version: 2025-11-25"]
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await post(sock, note, *session)).status == 202
            listed = await post(sock, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, *session)
            assert "resultType" not in listed.json()["result"]
            assert len(listed.json()["result"]["tools"]) == 3
            call = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "mcp__alpha__tool2", "arguments": {"text": "old"}},
            }
            called = await post(sock, call, *session)
            assert called.json()["result"]["content"][0]["text"] == "tool2:old"
            assert (await post(sock, call)).status == 400  # no session id
            gone = await curl(sock, "/mcp", "-X", "DELETE", "-H", f"Mcp-Session-Id: {sid}")
            assert gone.status == 200
            assert (await post(sock, call, *session)).status == 404
            # GET opens a session's event stream: not for a session that ended, nor
            # for a client that does not take an event stream.
            assert (await curl(sock, "/mcp", "-H", f"Mcp-Session-Id: {sid}")).status == 404
            plain = await curl(sock, "/mcp", "-H", "Accept: application/json")
            assert plain.status == 406 and b"text/event-stream" in plain.body


async def test_reload_over_http_is_the_same_method(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"alpha": server()})
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            status = await post(
                daemon.socket_path, modern(1, "mcpd/status"), *modern_headers("mcpd/status")
            )
            assert status.json()["result"]["daemon"]["tools"] == 3


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_the_official_sdk_client_over_http_on_the_socket(tmp_path: Path, mode: str) -> None:
    probe = Path(__file__).resolve().parents[3] / "support" / "hosts" / "sdk_unix_http_probe.py"
    cfg = make_config(tmp_path, {"alpha": server("--tools", "2")})
    with trio.fail_after(90):
        async with running(cfg) as daemon:
            proc = await trio.run_process(
                [
                    sys.executable,
                    str(probe),
                    daemon.socket_path,
                    mode,
                    "mcp__alpha__tool1",
                    '{"text": "sdk"}',
                ],
                capture_stdout=True,
            )
    seen = json.loads(proc.stdout)
    assert seen["protocol_version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert seen["tools"] == ["mcp__alpha__tool0", "mcp__alpha__tool1"]
    assert seen["is_error"] is False and seen["text"] == ["tool1:sdk"]


async def test_an_http_client_that_goes_quiet_mid_request_is_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import mcpd.agents.http.http_side

    monkeypatch.setattr(mcpd.agents.http.http_side, "_REQUEST_TIMEOUT", 0.3)
    cfg = make_config(tmp_path, {}, http_listen="127.0.0.1:0", state_dir=str(tmp_path / "state"))
    with trio.fail_after(30), caplog.at_level(logging.INFO, "mcpd.http"):
        async with running(cfg) as daemon:
            stream = await trio.open_unix_socket(daemon.socket_path)
            await stream.send_all(b"GET /status HTTP/1.1\r\nHost: mcpd\r\n")  # never finished
            assert await stream.receive_some(100) == b""  # closed by mcpd
            await stream.aclose()
            assert "closing an HTTP connection on a Unix socket: no complete" in caplog.text
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            tcp = await trio.open_tcp_stream("127.0.0.1", port)
            await tcp.send_all(  # answered, then the next never finished
                f"GET /healthz HTTP/1.1\r\nHost: m\r\nAuthorization: Bearer {token}\r\n\r\n"
                "GET /healthz HTTP/1.1\r\n".encode()
            )
            got = b""
            while chunk := await tcp.receive_some(65536):
                got += chunk
            assert got.startswith(b"HTTP/1.1 200 "), got[:200]
            await tcp.aclose()
            assert "closing an HTTP connection on the HTTP endpoint: no complete" in caplog.text


_MALFORMED = {
    "a second Host": b"Host: m\r\nHost: n\r\nContent-Length: 2\r\n\r\n{}",
    "a header line without a colon": b"Host: m\r\nno colon here\r\nContent-Length: 2\r\n\r\n{}",
    "a length past any body": b"Host: m\r\nContent-Length: 99999999999999999999999\r\n\r\n{}",
    "two lengths that differ": b"Host: m\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "a chunk-size line without end": b"Host: m\r\nTransfer-Encoding: chunked\r\n\r\n"
    + b"0" * 200_000
    + b"5\r\nhello\r\n0\r\n\r\n",
    "no Host": b"Content-Length: 2\r\n\r\n{}",
    "a header name with a space": b"Host: m\r\nX-Bad Name: 1\r\nContent-Length: 2\r\n\r\n{}",
}
# What each answer says was wrong (h11's words, or the limit it passed).
_SAID = {
    "a second Host": "Host",
    "a header line without a colon": "illegal header line",
    "a length past any body": "Content-Length",
    "two lengths that differ": "Content-Length",
    "a chunk-size line without end": "over 16384 bytes",
    "no Host": "Missing mandatory Host",
    "a header name with a space": "illegal header line",
}


async def _answer_to(stream: trio.SocketStream, request: bytes) -> bytes:
    """All that comes back to ``request`` until the daemon hangs up."""
    got = b""
    with trio.move_on_after(10):  # the daemon may stop reading before all is sent
        await stream.send_all(request)
    try:
        while chunk := await stream.receive_some(65536):
            got += chunk
    except trio.BrokenResourceError:  # a reset, where the daemon left bytes unread
        pass
    await stream.aclose()
    return got


async def test_a_malformed_request_is_answered_with_its_status_then_closed(
    tmp_path: Path,
) -> None:
    """Each was closed without a word on the socket and on the endpoint alike, so a
    client could not tell a request it got wrong from a daemon that went away."""
    cfg = make_config(tmp_path, {}, http_listen="127.0.0.1:0", state_dir=str(tmp_path / "state"))
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            for what, rest in _MALFORMED.items():
                for where in ("socket", "endpoint"):
                    if where == "socket":
                        stream: trio.SocketStream = await trio.open_unix_socket(daemon.socket_path)
                        start = b"POST /mcp HTTP/1.1\r\n"
                    else:
                        stream = await trio.open_tcp_stream("127.0.0.1", port)
                        start = f"POST /mcp HTTP/1.1\r\nAuthorization: Bearer {token}\r\n"
                        start = start.encode()
                    answer = await _answer_to(stream, start + rest)
                    status = b"431" if "chunk" in what else b"400"
                    assert answer.startswith(b"HTTP/1.1 " + status + b" "), (what, where, answer)
                    assert b"\r\nconnection: close\r\n" in answer.lower(), (what, where)
                    head, _, body = answer.partition(b"\r\n\r\n")
                    assert b"\r\ncontent-type: application/json\r\n" in head.lower() + b"\r\n"
                    error = json.loads(body)
                    assert error["id"] is None and error["error"]["code"] == -32600
                    message = error["error"]["message"]
                    assert message.startswith("malformed HTTP request: "), (what, message)
                    assert _SAID[what] in message, (what, message)


async def test_one_head_limit_holds_however_the_head_arrives(tmp_path: Path) -> None:
    """A head over the limit was refused only while it had not ended: one that ended
    within the read that brought its last bytes was served, up to the limit and one
    read's worth more, whatever the 431 said the limit was."""
    cfg = make_config(tmp_path, {}, http_listen="127.0.0.1:0", state_dir=str(tmp_path / "state"))
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            for where in ("socket", "endpoint"):
                for pad in (10_000, 20_000, 60_000):
                    if where == "socket":
                        stream: trio.SocketStream = await trio.open_unix_socket(daemon.socket_path)
                        vouch = b""
                    else:
                        stream = await trio.open_tcp_stream("127.0.0.1", port)
                        vouch = f"Authorization: Bearer {token}\r\n".encode()
                    request = (
                        b"GET /healthz HTTP/1.1\r\nHost: m\r\nConnection: close\r\n" + vouch
                        + b"X-Pad: " + b"p" * pad + b"\r\n\r\n"
                    )  # fmt: skip
                    answer = await _answer_to(stream, request)  # in one write
                    case = (where, pad, answer[:300])
                    if pad < 16384:
                        assert answer.startswith(b"HTTP/1.1 200 "), case
                        continue
                    assert answer.startswith(b"HTTP/1.1 431 "), case
                    message = json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["message"]
                    assert "are 20" in message or "are 60" in message, case
                    assert "at most 16384 bytes of line and headers" in message, case


async def test_a_request_framed_by_both_length_and_chunks_is_answered_then_closed(
    tmp_path: Path,
) -> None:
    """Content-Length beside Transfer-Encoding: read as chunked, and what came behind it
    on the connection was served as a request of its own, where a proxy in front that
    read the length would have taken it for the body."""
    cfg = make_config(tmp_path, {}, http_listen="127.0.0.1:0", state_dir=str(tmp_path / "state"))
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            for where in ("socket", "endpoint"):
                if where == "socket":
                    stream: trio.SocketStream = await trio.open_unix_socket(daemon.socket_path)
                    vouch = b""
                else:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                    vouch = f"Authorization: Bearer {token}\r\n".encode()
                first = (
                    b"POST /healthz HTTP/1.1\r\nHost: m\r\n" + vouch
                    + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + b"5\r\nhello\r\n0\r\n\r\n"
                )  # fmt: skip
                behind = b"GET /healthz HTTP/1.1\r\nHost: m\r\n" + vouch + b"\r\n"
                answer = await _answer_to(stream, first + behind)
                assert answer.count(b"HTTP/1.1 ") == 1, (where, answer[:400])
                assert b"\r\nconnection: close\r\n" in answer.lower(), (where, answer[:400])


async def test_a_body_over_the_limit_is_refused_with_a_json_rpc_error_naming_it(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {}, http_listen="127.0.0.1:0", state_dir=str(tmp_path / "state"))
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            limit = 4 * 1024 * 1024
            head = (
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\n"
            ).encode()
            piece = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
            sent = {
                "its length": (head + f"Content-Length: {limit + 1}\r\n\r\n".encode(), "says"),
                "its chunks": (
                    head + b"Transfer-Encoding: chunked\r\n\r\n" + piece * 65,
                    "more came",
                ),
            }
            for what, (request, said) in sent.items():
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                answer = await _answer_to(stream, request)
                assert answer.startswith(b"HTTP/1.1 413 "), (what, answer[:200])
                head_part, _, body = answer.partition(b"\r\n\r\n")
                assert b"\r\ncontent-type: application/json\r\n" in head_part.lower() + b"\r\n"
                error = json.loads(body)
                assert error["id"] is None and error["error"]["code"] == -32600
                message = error["error"]["message"]
                assert f"at most {limit} bytes" in message and said in message, message
