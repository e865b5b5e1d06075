"""The HTTP endpoint on TCP: the socket's HTTP side behind a bearer token and an Origin
check, both eras of POST /mcp, ?profile=, and `mcpd token` printing and rotating."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import META, make_config, running
from tests.support.clients.daemon_http import (
    MCP,
    Reply,
    auth,
    header_dict,
    http,
    modern,
    modern_headers,
)
from tests.support.system.procs import SCRIPTED, scripted


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


def config(tmp_path: Path, **daemon: Any) -> Any:
    return make_config(
        tmp_path,
        {"code": server("--tools", "3", "--progress", "2"), "mail": server("--names", "send_mail")},
        profiles={"mail": {"servers": ["mail"]}},
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
        **daemon,
    )


async def test_no_token_is_401_a_foreign_origin_403(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            token_file = tmp_path / "state" / "token"
            token = daemon.http_token()
            assert token_file.read_text().strip() == token and len(token) >= 40
            assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
            bare = await http(port, "GET", "/healthz")
            assert bare.status == 401
            assert bare.headers["www-authenticate"] == 'Bearer realm="mcpd"'
            assert "mcpd token" in bare.json()["error"]["message"]
            off_by_one = token[:-1] + ("x" if token[-1] != "x" else "y")
            wrong = await http(port, "GET", "/healthz", auth(off_by_one))
            assert wrong.status == 401
            listed = modern(1, "tools/list")
            no_token_mcp = await http(port, "POST", "/mcp", {**MCP}, json.dumps(listed).encode())
            assert no_token_mcp.status == 401
            evil = await http(port, "GET", "/healthz", auth(token, Origin="http://evil.example"))
            assert evil.status == 403 and "evil.example" in evil.json()["error"]["message"]
            rebound = auth(token, Origin=f"http://attacker.test:{port}")  # DNS rebinding
            assert (await http(port, "GET", "/status", rebound)).status == 403
            for origin in (f"http://127.0.0.1:{port}", None):
                headers = auth(token) if origin is None else auth(token, Origin=origin)
                ok = await http(port, "GET", "/healthz", headers)
                assert ok.status == 200 and ok.json() == {"status": "ok", "servers": 2}
            status = await http(port, "GET", "/status", auth(token))
            assert status.json()["daemon"]["http"] == f"http://127.0.0.1:{port}/mcp"
            # The Unix socket stays as it was: no token there.
            sock = await trio.open_unix_socket(daemon.socket_path)
            await sock.send_all(b"GET /healthz HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := await sock.receive_some(1 << 16):
                data += chunk
            assert Reply(data).status == 200


async def test_both_eras_json_and_sse_and_profiles_over_tcp(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            headers = {**MCP, **auth(token), **header_dict(modern_headers("tools/list"))}
            body = json.dumps(modern(1, "tools/list")).encode()
            everything = await http(port, "POST", "/mcp", headers, body)
            assert everything.status == 200
            assert everything.headers["content-type"] == "application/json"
            assert len(everything.json()["result"]["tools"]) == 4
            mail = await http(port, "POST", "/mcp?profile=mail", headers, body)
            assert [t["name"] for t in mail.json()["result"]["tools"]] == ["mcp__mail__send_mail"]
            nope = await http(port, "POST", "/mcp?profile=nope", headers, body)
            assert nope.status == 400 and "no profile named 'nope'" in nope.body.decode()
            # Without its version header a modern request is taken for a 2025-03-26 one;
            # the error names the header, not the session that era would need.
            bare = await http(port, "POST", "/mcp", {**MCP, **auth(token)}, body)
            assert bare.status == 400
            assert "needs the MCP-Protocol-Version header" in bare.json()["error"]["message"]
            assert bare.json()["id"] == 1

            params = {
                "name": "mcp__code__tool1",
                "arguments": {"text": "t"},
                "_meta": {**META, "progressToken": "p"},
            }
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
            call_headers = {
                **MCP,
                **auth(token),
                **header_dict(modern_headers("tools/call", "mcp__code__tool1")),
            }
            streamed = await http(port, "POST", "/mcp", call_headers, json.dumps(call).encode())
            assert streamed.headers["content-type"] == "text/event-stream"
            events = streamed.events()
            assert [e.get("method") for e in events] == [
                "notifications/progress",
                "notifications/progress",
                None,
            ]
            assert events[-1]["result"]["content"][0]["text"] == "tool1:t"

            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "legacy", "version": "0"},
                },
            }
            opened = await http(
                port, "POST", "/mcp?profile=mail", {**MCP, **auth(token)}, json.dumps(init).encode()
            )
            session = opened.headers["mcp-session-id"]
            legacy_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            legacy_headers = {
                **MCP,
                **auth(token),
                "Mcp-Session-Id": session,
                "MCP-Protocol-Version": "2025-11-25",
            }
            listed = await http(
                port, "POST", "/mcp", legacy_headers, json.dumps(legacy_list).encode()
            )
            assert [t["name"] for t in listed.json()["result"]["tools"]] == ["mcp__mail__send_mail"]
            rows = {p.name: p.agents for p in daemon.status().profiles}
            assert rows["mail"] == 1  # the legacy session uses it


async def test_mcpd_token_prints_and_rotates(tmp_path: Path) -> None:
    cfg_path = tmp_path / "mcpd.toml"
    cfg_path.write_text(
        f'[daemon]\nsocket = "{tmp_path / "mcpd.sock"}"\nstate_dir = "{tmp_path / "state"}"\n'
        'http_listen = "127.0.0.1:0"\n'
    )
    from mcpd.config.loading.load import load

    mcpd = [sys.executable, "-m", "mcpd", "token", "--config", str(cfg_path)]
    with trio.fail_after(60):
        async with running(load(cfg_path), str(cfg_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            printed = (await trio.run_process(mcpd, capture_stdout=True)).stdout.decode().strip()
            assert printed == daemon.http_token()
            assert (await http(port, "GET", "/healthz", auth(printed))).status == 200
            rotated = await trio.run_process(
                [*mcpd, "--rotate"], capture_stdout=True, capture_stderr=True
            )
            new = rotated.stdout.decode().strip()
            assert new != printed and "no longer works" in rotated.stderr.decode()
            assert (await http(port, "GET", "/healthz", auth(printed))).status == 401
            assert (await http(port, "GET", "/healthz", auth(new))).status == 200
    assert oct(os.stat(tmp_path / "state" / "token").st_mode & 0o777) == "0o600"


# What only the daemon's user and root may do, on the Unix socket: an agent given the
# endpoint's token must not reload mcpd, reset a server's circuit, log it out of a
# server, approve what its own servers changed, or decide its own calls.
OWNER_ONLY = {
    "mcpd/reload": {},
    "mcpd/reset": {"server": "code"},
    "mcpd/auth/logout": {"server": "code"},
    "mcpd/auth/login": {"server": "code"},
    "mcpd/auth/dashboard": {},
    "mcpd/auth/dashboard_spent": {"code": "x"},
    "mcpd/pins/approve": {"server": "code"},
    "mcpd/pins/import": {"pins": {"format": 1, "servers": {}}, "replace": True},
    "mcpd/approvals/list": {},
    "mcpd/approvals/show": {"id": "x"},
    "mcpd/approvals/decide": {"id": "x", "approve": True},
}


async def test_the_owners_methods_are_refused_to_a_holder_of_the_token(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            for rid, (method, params) in enumerate(OWNER_ONLY.items()):
                headers = {**MCP, **auth(token), **header_dict(modern_headers(method))}
                body = json.dumps(modern(rid, method, params)).encode()
                reply = await http(port, "POST", "/mcp", headers, body)
                error = reply.json()["error"]
                assert error["code"] == -32000, (method, error)
                assert "only for the daemon's user and root" in error["message"], (method, error)


async def test_a_server_cannot_take_the_endpoints_port_before_mcpd(tmp_path: Path) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    notes = tmp_path / "squatter.notes"
    squatter = str(Path(SCRIPTED).parents[1] / "breakout" / "squatter.py")
    args = [squatter, str(notes), f"tcp:127.0.0.1:{port}", "--", "--tools", "2"]
    cfg = make_config(
        tmp_path,
        {"squat": {"command": sys.executable, "args": args}},
        http_listen=f"127.0.0.1:{port}",
        state_dir=str(tmp_path / "state"),
    )
    with trio.fail_after(60):
        async with running(cfg) as daemon:
            # The server had its first start (and its try) before agents are served.
            assert notes.read_text() == f"tcp:127.0.0.1:{port} refused EADDRINUSE\n"
            ok = await http(port, "GET", "/healthz", auth(daemon.http_token()))
            assert ok.status == 200 and ok.json() == {"status": "ok", "servers": 1}


async def _answer_head(stream: trio.SocketStream) -> bytes:
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        got += chunk
    return got


async def _until_closed(stream: trio.SocketStream) -> None:
    """Until the daemon hangs up (a reset, where it left a body unread, is that too)."""
    try:
        while await stream.receive_some(65536):
            pass
    except trio.BrokenResourceError:
        pass


async def test_strangers_without_the_token_hold_no_place_its_holders_need(
    tmp_path: Path,
) -> None:
    """The page's paths are let past the gate without the token (a link's code, an
    OAuth landing, the page's own refusal); a local user who asked for them on
    connections kept open took every place, and a host with the token got 503. Each is
    answered, then closed."""
    with trio.fail_after(60):
        async with running(config(tmp_path, max_connections=4)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            asks = [f"HEAD /?code=x HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"]
            asks.append(f"GET /page/oauth/notes?x=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
            asks.append(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")  # refused
            for i in range(9):
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                await stream.send_all(asks[i % 3].encode())
                answer = await _answer_head(stream)
                assert answer.startswith((b"HTTP/1.1 200 ", b"HTTP/1.1 40")), answer[:100]
                # Said, so that a client does not send its next request on it.
                assert b"\r\nconnection: close\r\n" in answer.lower(), answer[:300]
                await _until_closed(stream)  # the daemon hung up: the place is free
                await stream.aclose()
            holder = await http(port, "GET", "/status", auth(daemon.http_token()))
            assert holder.status == 200, holder.body[:200]


async def test_a_strangers_request_with_a_body_is_refused_before_it_is_read(
    tmp_path: Path,
) -> None:
    """It would have been held, up to the 4 MiB limit, on a connection nobody vouched
    for (most of the limit on each of many connections)."""
    with trio.fail_after(20):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            for target, method in (("/?code=x", "GET"), ("/page/oauth/notes", "POST")):
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                await stream.send_all(
                    f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    f"Content-Length: {4 * 1024 * 1024}\r\n\r\n".encode()
                    + b"x" * 65536
                )
                assert (await _answer_head(stream)).startswith(b"HTTP/1.1 413 ")
                await _until_closed(stream)
                await stream.aclose()


async def test_a_second_origin_or_host_is_refused(tmp_path: Path) -> None:
    """The endpoint's own Origin first and a foreign one after it passed: only the first
    was read."""
    with trio.fail_after(30):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            own = f"http://127.0.0.1:{port}"
            for twice in (
                f"Origin: {own}\r\nOrigin: http://evil.example\r\n",
                f"Host: 127.0.0.1:{port}\r\nHost: evil.example\r\n",
            ):
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                host = "" if twice.startswith("Host") else f"Host: 127.0.0.1:{port}\r\n"
                await stream.send_all(
                    f"GET /status HTTP/1.1\r\n{host}{twice}Authorization: Bearer {token}\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                answer = await _answer_head(stream)
                # A second Host is turned away as h11 reads it, before mcpd does.
                assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
                await stream.aclose()
