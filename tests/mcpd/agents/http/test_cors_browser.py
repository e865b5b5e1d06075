"""A web page using the TCP endpoint in a real browser (headless Chromium): a page at an
origin of ``http_origins`` fetches ``tools/list`` with the token and reads the tools,
the 401 of a wrong token too; the same page at an origin not listed reads nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.support.clients.agent import META, make_config, running
from tests.support.page.browser import chromium
from tests.support.system.procs import scripted

# Room for a first run that installs the browser with apt.
pytestmark = pytest.mark.timeout(600)

# What the page runs: a 2026-07-28 tools/list, as a browser-based MCP client sends it.
FETCH = """
const [url, token, meta, done] = arguments;
fetch(url, {
  method: "POST",
  headers: {
    "Authorization": "Bearer " + token,
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/list",
  },
  body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "tools/list", params: {_meta: meta}}),
}).then(
  async (r) => done({status: r.status, body: await r.text()}),
  (e) => done({error: String(e)}),
);
"""


class _Blank(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>app</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def app_server() -> Iterator[int]:
    """A page's own server, on a port of its own: its port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Blank)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


async def test_only_a_page_at_an_allowed_origin_reads_the_endpoints_answers(
    tmp_path: Path,
) -> None:
    command, args = scripted("--tools", "2")
    with app_server() as app_port, chromium() as browser:
        listed = f"http://localhost:{app_port}"
        # The same page by another name is another origin, one not listed.
        unlisted = f"http://127.0.0.1:{app_port}"
        config = make_config(
            tmp_path,
            {"code": {"command": command, "args": list(args)}},
            http_listen="127.0.0.1:0",
            http_origins=[listed],
            state_dir=str(tmp_path / "state"),
        )
        with trio.fail_after(120):
            async with running(config) as daemon:
                assert daemon.agent_server.endpoint is not None
                url, token = daemon.agent_server.endpoint.url, daemon.http_token()

                def fetch_from(origin: str, bearer: str) -> dict[str, Any]:
                    browser.get(origin + "/")
                    got: dict[str, Any] = browser.execute_async_script(FETCH, url, bearer, META)
                    return got

                async def page_at(origin: str, bearer: str = token) -> dict[str, Any]:
                    return await trio.to_thread.run_sync(fetch_from, origin, bearer)

                read = await page_at(listed)
                assert read.get("status") == 200, read
                tools = json.loads(read["body"])["result"]["tools"]
                assert len(tools) == 2
                refused = await page_at(listed, "wrong")
                assert refused.get("status") == 401, refused
                assert "mcpd token" in refused["body"]
                elsewhere = await page_at(unlisted)
                assert "error" in elsewhere and "status" not in elsewhere, elsewhere
