"""How a runner reaches its server, from its config: a stdio process started as the
config says, a Streamable HTTP endpoint, or an old HTTP+SSE one, each given the
settings of its own entry and the daemon's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import Config
from mcpd.servers.life.transport_factory import http_settings, open_transport, stdio_params
from protocol.jsonrpc import messages as rpc
from tests.support.http_servers.legacy_sse import serve_legacy_sse
from tests.support.http_servers.serving import Responder, SeenRequest, result, serve_http
from transports.http.params import HttpParams

LIMIT = 10

# A stdio server answering every request with what it was started with.
TELLS = (
    "import json, os, sys\n"
    "for line in sys.stdin:\n"
    "    m = json.loads(line)\n"
    "    said = {'greeting': os.environ.get('GREETING'), 'cwd': os.getcwd(),"
    " 'argv': sys.argv[1:]}\n"
    "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': said}), flush=True)\n"
)


def config(servers: dict[str, Any], **daemon: Any) -> Config:
    env = {"HOME": "/nonexistent", "OTHER_TOKEN": "t0k"}
    return parse_config({"daemon": daemon, "servers": servers}, env=env)


def ignore(msg: rpc.Notification) -> None:
    pass


def test_a_stdio_server_is_started_as_its_entry_says() -> None:
    cfg = config(
        {
            "s": {
                "command": "srv",
                "args": ["--port", "0"],
                "env": {"GREETING": "hi"},
                "cwd": "/srv/data",
            },
            "other": {"command": "other", "env": {"TOKEN": "${OTHER_TOKEN}"}},
        },
        max_line_bytes=4096,
    )
    params = stdio_params("s", cfg.servers["s"], cfg)
    assert params.command == "srv"
    assert params.args == ("--port", "0")
    assert params.env == {"GREETING": "hi"}
    assert params.cwd == "/srv/data"
    assert params.max_line == 4096
    # What the config resolves for another server never reaches this one by inheritance.
    assert "OTHER_TOKEN" in params.withheld
    assert params.sandbox is not None and params.sandbox.where == "servers.s"


def test_a_stdio_server_without_env_gets_none_of_its_own() -> None:
    cfg = config({"s": {"command": "srv"}})
    params = stdio_params("s", cfg.servers["s"], cfg)
    assert params.env is None and params.args == ()
    assert params.withheld == frozenset()
    assert params.read_budget == 5000


def test_a_stdio_server_is_read_within_its_own_budget_or_the_daemons() -> None:
    cfg = config(
        {"s": {"command": "srv", "read_budget": 50}, "t": {"command": "t"}}, read_budget=70
    )
    assert stdio_params("s", cfg.servers["s"], cfg).read_budget == 50
    assert stdio_params("t", cfg.servers["t"], cfg).read_budget == 70


def test_an_http_server_gets_its_entrys_settings_and_the_daemons_limit(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    cfg = config(
        {
            "s": {
                "url": "https://mcp.example.com/mcp",
                "headers": {"X-Team": "a"},
                "connect_timeout": 2.5,
                "tls_verify": False,
                "ca_file": str(ca),
                "max_concurrency": 3,
                "read_budget": 100,
            },
            "plain": {"url": "https://mcp.example.com/v2/mcp"},
        },
        max_line_bytes=8192,
        read_budget=200,
    )
    assert http_settings("s", cfg.servers["s"], cfg) == HttpParams(
        headers={"X-Team": "a"},
        connect_timeout=2.5,
        tls_verify=False,
        ca_file=str(ca),
        pool_size=3,
        max_body=8192,
        read_budget=100,
    )
    plain = http_settings("plain", cfg.servers["plain"], cfg)
    assert (plain.pool_size, plain.tls_verify, plain.headers) == (16, True, {})
    assert plain.read_budget == 200


async def test_a_stdio_server_runs_with_its_args_env_and_folder(tmp_path: Path) -> None:
    cfg = config(
        {
            "s": {
                "command": sys.executable,
                "args": ["-c", TELLS, "first", "second"],
                "env": {"GREETING": "hi"},
                "cwd": str(tmp_path),
                "sandbox": "off",
            }
        }
    )
    with trio.fail_after(LIMIT):
        async with open_transport("s", cfg.servers["s"], cfg, ignore) as t:
            said = json.loads(bytes(await t.request("ping", None)))
    assert said == {"greeting": "hi", "cwd": str(tmp_path), "argv": ["first", "second"]}


async def test_a_url_is_reached_over_streamable_http_with_its_headers() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.json(result(req.rpc_id, {}))

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            cfg = config({"s": {"url": srv.url(), "headers": {"X-Team": "a"}}})
            async with open_transport("s", cfg.servers["s"], cfg, ignore) as t:
                assert json.loads(bytes(await t.request("ping", None))) == {}
    (post,) = srv.requests
    assert (post.method, post.target, post.rpc_method) == ("POST", "/mcp", "ping")
    assert post.header("x-team") == "a"


async def test_an_sse_url_is_reached_over_the_old_transport() -> None:
    with trio.fail_after(LIMIT):
        async with serve_legacy_sse() as legacy:
            cfg = config({"s": {"url": legacy.url(), "headers": {"X-Team": "a"}}})
            assert cfg.servers["s"].kind == "sse"
            async with open_transport("s", cfg.servers["s"], cfg, ignore) as t:
                assert json.loads(bytes(await t.request("ping", None))) == {}
    get, post = legacy.requests
    assert (get.method, get.header("accept")) == ("GET", "text/event-stream")
    assert post.rpc_method == "ping"
    assert get.header("x-team") == post.header("x-team") == "a"


async def test_the_transport_key_overrides_what_the_url_implies() -> None:
    async def handler(req: SeenRequest, respond: Responder) -> None:
        await respond.json(result(req.rpc_id, {}))

    with trio.fail_after(LIMIT):
        async with serve_http(handler) as srv:
            cfg = config({"s": {"url": srv.url("/sse"), "transport": "http"}})
            async with open_transport("s", cfg.servers["s"], cfg, ignore) as t:
                await t.request("ping", None)
    assert [r.method for r in srv.requests] == ["POST"]
