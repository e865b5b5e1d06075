"""A page at an origin of ``http_origins`` using the TCP endpoint as its browser would:
the preflight its token header needs, then requests of both eras and a legacy session's
stream, each answer readable by that page; a page at any other origin is refused and
reads nothing, and the status page stays closed to both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.agent import make_config, running
from tests.support.clients.daemon_http import MCP, answer_head, header_dict, modern, modern_headers
from tests.support.system.procs import scripted

APP = "http://localhost:3000"


def config(tmp_path: Path) -> Any:
    command, args = scripted("--tools", "2")
    return make_config(
        tmp_path,
        {"code": {"command": command, "args": list(args)}},
        http_listen="127.0.0.1:0",
        http_origins=[APP],
        state_dir=str(tmp_path / "state"),
    )


class Answer:
    """An answer's status, its header lines as they came (every one, in order), body."""

    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.lines = [(k.lower(), v.strip()) for k, _, v in (h.partition(":") for h in lines[1:])]
        self.headers = dict(self.lines)

    def cors(self) -> dict[str, str]:
        return {k: v for k, v in self.lines if k.startswith("access-control-") or k == "vary"}


def request_bytes(
    port: int, method: str, target: str, headers: dict[str, str], body: bytes
) -> bytes:
    fields = {"Host": f"127.0.0.1:{port}", **headers}
    if body or method == "POST":
        fields["Content-Length"] = str(len(body))
    lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in fields.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def ask(
    port: int, method: str, target: str, headers: dict[str, str], body: bytes = b""
) -> Answer:
    """One request on a connection of its own, read to its close."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        closing = {"Connection": "close", **headers}
        await stream.send_all(request_bytes(port, method, target, closing, body))
        data = b""
        while chunk := await stream.receive_some(1 << 16):
            data += chunk
    return Answer(data)


def preflight(origin: str, method: str = "POST", wanted: str = "") -> dict[str, str]:
    asked = {"Origin": origin, "Access-Control-Request-Method": method}
    return {**asked, "Access-Control-Request-Headers": wanted} if wanted else asked


READABLE = {
    "access-control-allow-origin": APP,
    "vary": "Origin",
    "access-control-expose-headers": "Mcp-Session-Id, WWW-Authenticate",
}


async def test_a_page_at_an_allowed_origin_can_use_the_endpoint_and_no_other_can(
    tmp_path: Path,
) -> None:
    with trio.fail_after(60):
        async with running(config(tmp_path)) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, token = daemon.agent_server.endpoint.port, daemon.http_token()
            wanted = "authorization,content-type,mcp-method,mcp-protocol-version"
            asked = await ask(port, "OPTIONS", "/mcp", preflight(APP, wanted=wanted))
            assert asked.status == 204 and asked.body == b""
            assert asked.lines == [
                ("access-control-allow-origin", APP),
                ("vary", "Origin"),
                ("access-control-allow-methods", "GET, POST, DELETE"),
                (
                    "access-control-allow-headers",
                    "authorization, content-type, accept, mcp-protocol-version, "
                    "mcp-session-id, mcp-method, mcp-name",
                ),
                ("access-control-max-age", "300"),
                ("connection", "close"),
            ]
            for origin in ("http://evil.example:3000", "null", f"{APP}.evil.example"):
                refused = await ask(port, "OPTIONS", "/mcp", preflight(origin))
                assert refused.status == 403 and refused.cors() == {}
            rebound = {**preflight(APP), "Host": f"attacker.test:{port}"}
            refused = await ask(port, "OPTIONS", "/mcp", rebound)
            assert refused.status == 403 and refused.cors() == {}
            assert daemon.agent_server.http.sessions == {}  # a preflight opens nothing

            token_header = {"Authorization": f"Bearer {token}"}
            from_app = {**MCP, "Origin": APP}
            body = json.dumps(modern(1, "tools/list")).encode()
            modern_fields = header_dict(modern_headers("tools/list"))
            listed = await ask(
                port, "POST", "/mcp", {**from_app, **token_header, **modern_fields}, body
            )
            assert listed.status == 200 and listed.cors() == READABLE
            assert len(json.loads(listed.body)["result"]["tools"]) == 2
            bare = await ask(port, "POST", "/mcp", {**from_app, **modern_fields}, body)
            assert bare.status == 401 and bare.cors() == READABLE
            assert bare.headers["www-authenticate"] == 'Bearer realm="mcpd"'
            wrong = {**from_app, **modern_fields, "Authorization": "Bearer wrong"}
            assert (await ask(port, "POST", "/mcp", wrong, body)).cors() == READABLE
            foreign = {**MCP, **token_header, **modern_fields, "Origin": "http://evil.example"}
            stranger = await ask(port, "POST", "/mcp", foreign, body)
            assert stranger.status == 403 and stranger.cors() == {}

            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "page", "version": "0"},
                },
            }
            opened = await ask(
                port, "POST", "/mcp", {**from_app, **token_header}, json.dumps(init).encode()
            )
            assert opened.status == 200 and opened.cors() == READABLE
            session = opened.headers["mcp-session-id"]

            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                fields = {
                    **token_header,
                    "Origin": APP,
                    "Accept": "text/event-stream",
                    "Mcp-Session-Id": session,
                    "MCP-Protocol-Version": "2025-11-25",
                }
                await stream.send_all(request_bytes(port, "GET", "/mcp", fields, b""))
                events = Answer(await answer_head(stream))
            assert events.status == 200 and events.cors() == READABLE
            assert events.headers["content-type"] == "text/event-stream"

            # The status page keeps to its own origin, with or without the token.
            for headers in ({"Origin": APP}, {"Origin": APP, **token_header}):
                page = await ask(port, "GET", "/", headers)
                assert page.cors() == {}
            page_asked = await ask(port, "OPTIONS", "/", preflight(APP, "GET"))
            assert page_asked.status != 204 and page_asked.cors() == {}
