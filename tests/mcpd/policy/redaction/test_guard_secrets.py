"""No secret mcpd holds reaches an agent, a log line or ``mcpd status`` through what a
server sends: a stdio server repeats another server's secret (as if it had stolen it)
and an HTTP server its own header secret and OAuth token, in every place a server's
text goes; every output shows the marker naming whose secret it was, or nothing."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.local.service import journal
from mcpd.local.service.journalfields import record_fields
from protocol.mcp.core import KEY_LOG_LEVEL
from tests.support.clients.agent import META, Agent, connect, make_config, running
from tests.support.hostile.cut_secret import MARKER, SECRET, WHOSE, beginnings
from tests.support.hostile.echoing_mcp import EchoingMcp, serve_echoing
from tests.support.oauth.protected_mcp import login
from tests.support.parts.status_rows import status_text

LEAKY = str(Path(__file__).parents[3] / "support" / "hostile" / "leaky_server.py")
PADDING = str(Path(__file__).parents[3] / "support" / "hostile" / "padding_server.py")
LIMIT = 60
# Another server's secret: a quote, a slash and a letter JSON encoders escape.
STOLEN = 'other-Sécret/"key-0123456789'
HEADER = "hdr-secret-0123456789abcdef"
OTHERS = "[secret of servers.other.env.API_TOKEN]"
HEADERS = "[secret of servers.echo.headers.X-Api-Key]"
OAUTH = "[secret of servers.echo (OAuth)]"


class Collector(logging.Handler):
    """Every log record as the terminal and the journal would show it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self.events: list[tuple[str, str]] = []
        self.arrived = trio.Event()
        self._lines = journal.LineHandler(io.StringIO())

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self._lines.format_record(record))
        fields = record_fields(record)
        self.texts += [value for _, value in fields]
        found = dict(fields)
        self.events.append((found.get("MCPD_SERVER", ""), found.get("MCPD_EVENT", "")))
        self.arrived.set()
        self.arrived = trio.Event()

    async def wait_for(self, server: str, event: str) -> None:
        while (server, event) not in self.events:
            await self.arrived.wait()


@pytest.fixture
def collector() -> Iterator[Collector]:
    root = logging.getLogger()
    level = root.level
    handler = Collector()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def secrets_in(texts: list[str], srv: EchoingMcp) -> list[str]:
    """What of the secrets (as they are, or as JSON writes them) shows in ``texts``."""
    forms = {STOLEN, json.dumps(STOLEN)[1:-1], HEADER, *srv.issued, *srv.live_refresh}
    return [f"{form!r} in {text!r}" for text in texts for form in forms if form in text]


@contextlib.asynccontextmanager
async def leaking(tmp: Path) -> AsyncIterator[tuple[EchoingMcp, Agent, Agent]]:
    async with serve_echoing() as srv:
        servers: dict[str, Any] = {
            # Never started: only its secret matters.
            "other": {"command": sys.executable, "args": [LEAKY], "env": {"API_TOKEN": STOLEN}},
            "leaky": {"command": sys.executable, "args": [LEAKY], "env": {"LEAK": STOLEN}},
            "echo": {"url": srv.mcp_url, "headers": {"X-Api-Key": HEADER}},
        }
        servers["other"]["enabled"] = False
        cfg = make_config(
            tmp, servers, state_dir=str(tmp / "state"), backoff_base=30, backoff_cap=60
        )
        async with (
            running(cfg) as daemon,
            connect(daemon.socket_path) as modern,
            connect(daemon.socket_path, modern=False) as legacy,
        ):
            await legacy.initialize()
            out = await login(modern, srv, "echo")
            assert out["state"] == "ready"
            yield srv, modern, legacy


def texts_of(value: Any) -> list[str]:
    return [json.dumps(value, ensure_ascii=False), json.dumps(value)]


async def test_no_secret_reaches_an_agent_a_log_line_or_status(
    tmp_path: Path, collector: Collector
) -> None:
    seen: list[str] = []
    with trio.fail_after(LIMIT):
        async with leaking(tmp_path) as (srv, modern, legacy):
            await legacy.result("logging/setLevel", {"level": "debug"})
            for agent in (modern, legacy):
                tools = {t["name"]: t for t in await agent.tools()}
                seen += texts_of(tools)
                assert OTHERS in tools["mcp__leaky__leak"]["description"]
                echo = tools["mcp__echo__echo"]["description"]
                assert HEADERS in echo and OAUTH in echo
                meta = {KEY_LOG_LEVEL: "debug"} if agent.modern else {}
                for tool, markers in [
                    ("mcp__leaky__leak", [OTHERS]),
                    ("mcp__echo__echo", [HEADERS, OAUTH]),
                ]:
                    params = {"name": tool, "arguments": {}, "_meta": meta}
                    reply = await agent.rpc("tools/call", params)
                    seen += texts_of(reply)
                    text = reply["result"]["content"][0]["text"]
                    assert all(m in text for m in markers), text
                for tool, markers in [
                    ("mcp__leaky__fail", [OTHERS]),
                    ("mcp__echo__fail", [HEADERS, OAUTH]),
                ]:
                    reply = await agent.rpc("tools/call", {"name": tool, "arguments": {}})
                    seen += texts_of(reply)
                    error = reply["error"]
                    assert all(m in error["message"] for m in markers), error
                    if tool == "mcp__leaky__fail":
                        assert error["data"] == {"key": OTHERS}
            # The log messages: relayed to the legacy agent that asked for them.
            said = [
                json.dumps(n["params"], ensure_ascii=False)
                for n in legacy.notifications
                if n["method"] == "notifications/message"
            ]
            assert any(OTHERS in s for s in said), said
            assert any(HEADERS in s and OAUTH in s for s in said), said
            seen += texts_of(modern.notifications) + texts_of(legacy.notifications)
            seen += texts_of(modern.unmatched) + texts_of(legacy.unmatched)
            # It dies saying the secret on stderr: its last words show in status.
            crashed = await modern.call("mcp__leaky__crash")
            seen += texts_of(crashed)
            await collector.wait_for("leaky", "outage")
            status = await modern.result("mcpd/status")
            seen += [*texts_of(status), status_text(status)]
            rows = {row["alias"]: row for row in status["servers"]}
            assert OTHERS in "\n".join(rows["leaky"]["stderr"])
            assert rows["leaky"]["secrets_masked"]["servers.other.env.API_TOKEN"] >= 6
            assert rows["echo"]["secrets_masked"]["servers.echo (OAuth)"] >= 4
            assert rows["echo"]["secrets_masked"]["servers.echo.headers.X-Api-Key"] >= 4
            assert "secrets masked|" in status_text(status)
    seen += collector.texts
    assert ("leaky", "secret_masked") in collector.events
    assert ("echo", "secret_masked") in collector.events
    assert any(OTHERS in t for t in collector.texts)
    assert secrets_in(seen, srv) == []


# A header secret with letters of either case: found only as it was sent.
MIXED = "Hdr-Secret-0123456789ABCdef"


@contextlib.asynccontextmanager
async def refusing(tmp: Path, collector: Collector) -> AsyncIterator[tuple[Agent, list[str]]]:
    """An agent of a daemon whose server ``echo`` refuses calls with its credentials in
    the refusal, and what every view shows; after it, none may hold a secret in any case."""
    seen: list[str] = []
    async with serve_echoing() as srv:
        # Its authorization server registers mcpd under the header's secret, as if it
        # had been told it.
        srv.client_id = f"client-{MIXED}"
        servers = {"echo": {"url": srv.mcp_url, "headers": {"X-Api-Key": MIXED}}}
        # Open after four failures in a row, and for longer than the test runs.
        cfg = make_config(
            tmp, servers, state_dir=str(tmp / "state"), failure_threshold=4, cooldown_base=300
        )
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            await login(agent, srv, "echo")
            yield agent, seen
            # The views' JSON, as `mcpd status --json`, `mcpd auth status --json`, the
            # HTTP endpoint's /status and the status page read them, and as printed.
            status = await agent.result("mcpd/status")
            seen += [*texts_of(status), status_text(status)]
            seen += texts_of(await agent.result("mcpd/auth/status"))
    seen += collector.texts
    secrets = [MIXED, *srv.issued]
    found = [(s, text) for s in secrets for text in seen if s.lower() in text.lower()]
    assert [f"{s!r} in {text!r}" for s, text in found] == []


def row_of(status: dict[str, Any]) -> dict[str, Any]:
    (row,) = status["servers"]
    return row  # type: ignore[no-any-return]


async def test_a_secret_a_server_echoes_in_an_http_refusal_reaches_no_view(
    tmp_path: Path, collector: Collector
) -> None:
    with trio.fail_after(LIMIT):
        async with refusing(tmp_path, collector) as (agent, seen):
            said = {"phrase": await agent.call("mcp__echo__phrase")}
            degraded = row_of(await agent.result("mcpd/status"))
            for tool in ("content_type", "challenge", "phrase"):
                said[tool] = await agent.call(f"mcp__echo__{tool}")
            # The fourth failure in a row opened the circuit: this call is refused with
            # why the last one failed.
            refused = await agent.call("mcp__echo__echo")
            opened = row_of(await agent.result("mcpd/status"))
            seen += texts_of([said, degraded, refused, opened])
    for result in [*said.values(), refused]:
        text = result["content"][0]["text"]
        assert HEADERS in text and OAUTH in text, text
    assert degraded["state"] == "degraded"
    assert HEADERS in degraded["last_error"] and OAUTH in degraded["last_error"]
    assert refused["_meta"]["mcpd/outage"]["state"] == "open"
    assert opened["state"] == "open"
    assert HEADERS in opened["last_error"] and OAUTH in opened["last_error"]


async def test_a_secret_a_server_asks_for_as_a_scope_reaches_no_view_of_the_login(
    tmp_path: Path, collector: Collector
) -> None:
    with trio.fail_after(LIMIT):
        async with refusing(tmp_path, collector) as (agent, seen):
            scoped = await agent.call("mcp__echo__scope")
            (login_state,) = (await agent.result("mcpd/auth/status"))["servers"]
            row = row_of(await agent.result("mcpd/status"))
            seen += texts_of([scoped, login_state, row])
    assert login_state["client_id"] == row["auth"]["client_id"] == f"client-{HEADERS}"
    assert scoped["_meta"]["mcpd/outage"]["state"] == "needs_login"
    assert row["state"] == login_state["state"] == "needs_login"
    for why in (scoped["content"][0]["text"], login_state["needs_login"], row["last_error"]):
        assert "asks for more permissions" in why and HEADERS in why and OAUTH in why, why


async def _raw_reply(path: str, line: bytes) -> bytes:
    stream = await trio.open_unix_socket(path)
    buf = b""
    async with stream:
        await stream.send_all(line)
        while b"\n" not in buf:
            buf += await stream.receive_some(1 << 16)
    return buf


async def test_a_result_without_a_secret_is_spliced_as_it_came(tmp_path: Path) -> None:
    from tests.support.hostile.leaky_server import PLAIN

    # The guard has a secret to look for, which this result does not hold.
    servers = {
        "leaky": {"command": sys.executable, "args": [LEAKY]},
        "other": {"command": "true", "env": {"API_TOKEN": STOLEN}, "enabled": False},
    }
    cfg = make_config(tmp_path, servers)
    call = {"name": "mcp__leaky__plain", "arguments": {}, "_meta": META}
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call}
            line = await _raw_reply(daemon.socket_path, json.dumps(body).encode() + b"\n")
    # The result's bytes after its first brace, as the server spaced them (a modern
    # agent's reply gets its resultType put in front).
    assert PLAIN[1:] in line


async def test_the_endpoint_token_is_masked_for_an_agent_over_http(tmp_path: Path) -> None:
    from mcpd.local.state.endpoint_token import token_path, write_token
    from tests.support.clients.daemon_http import (
        MCP,
        auth,
        header_dict,
        http,
        modern,
        modern_headers,
    )

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    token = write_token(token_path(str(state)))
    servers = {"leaky": {"command": sys.executable, "args": [LEAKY], "env": {"LEAK": token}}}
    cfg = make_config(tmp_path, servers, http_listen="127.0.0.1:0", state_dir=str(state))
    marker = "[secret of the HTTP endpoint's token]"
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port = daemon.agent_server.endpoint.port
            headers = {**MCP, **auth(token), **header_dict(modern_headers("tools/list"))}
            listed = await http(
                port, "POST", "/mcp", headers, json.dumps(modern(1, "tools/list")).encode()
            )
            params = {"name": "mcp__leaky__leak", "arguments": {}, "_meta": META}
            body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
            headers = {
                **MCP,
                **auth(token),
                **header_dict(modern_headers("tools/call", "mcp__leaky__leak")),
            }
            called = await http(port, "POST", "/mcp", headers, json.dumps(body).encode())
    assert token not in listed.body.decode() and token not in called.body.decode()
    (tool,) = [t for t in listed.json()["result"]["tools"] if t["name"] == "mcp__leaky__leak"]
    assert tool["description"].endswith(f"repeats {marker}")
    text = called.body.decode()
    assert f"the key is {marker}" in text, text


async def test_prompts_resources_completions_and_requests_to_agents_are_masked(
    tmp_path: Path, collector: Collector
) -> None:
    servers: dict[str, Any] = {
        "other": {"command": "true", "env": {"API_TOKEN": STOLEN}, "enabled": False},
        "leaky": {"command": sys.executable, "args": [LEAKY], "env": {"LEAK": STOLEN}},
    }
    cfg = make_config(tmp_path, servers)
    seen: list[str] = []
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon, connect(daemon.socket_path, modern=False) as agent:
            hello = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "legacy-agent", "version": "0"},
            }
            await agent.result("initialize", hello)
            await agent.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            (prompt,) = (await agent.result("prompts/list"))["prompts"]
            (resource,) = (await agent.result("resources/list"))["resources"]
            got = await agent.result("prompts/get", {"name": prompt["name"], "arguments": {}})
            read = await agent.result("resources/read", {"uri": resource["uri"]})
            ref = {"type": "ref/prompt", "name": prompt["name"]}
            completed = await agent.result(
                "completion/complete", {"ref": ref, "argument": {"name": "who", "value": ""}}
            )
            async with trio.open_nursery() as nursery:
                answered: list[dict[str, Any]] = []

                async def call() -> None:
                    answered.append(await agent.call("mcp__leaky__ask"))

                nursery.start_soon(call)
                (asked,) = await agent.wait_unmatched(1)
                reply = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}
                await agent.send_raw(json.dumps(reply).encode() + b"\n")
            status = await agent.result("mcpd/status")
            seen += texts_of([prompt, resource, got, read, completed, asked, answered, status])
            seen.append(status_text(status))
    seen += collector.texts
    assert OTHERS in prompt["description"] and OTHERS in resource["description"]
    assert got["messages"][0]["content"]["text"] == f"hello {OTHERS}"
    assert read["contents"][0]["text"] == f"the key: {OTHERS}"
    assert completed["completion"]["values"] == [OTHERS, "other"]
    assert asked["method"] == "elicitation/create"
    assert asked["params"]["message"] == f"[mcpd] The server 'leaky' asks:\n> confirm {OTHERS}"
    (row,) = [r for r in status["servers"] if r["alias"] == "leaky"]
    assert row["server_info"]["title"] == f"by {OTHERS}"
    forms = [STOLEN, json.dumps(STOLEN)[1:-1]]
    assert [form for text in seen for form in forms if form in text] == []


async def test_redact_patterns_masks_credential_formats_of_the_servers_it_is_on_for(
    tmp_path: Path,
) -> None:
    aws = "AKIAIOSFODNN7EXAMPLE"
    leaky = {"command": sys.executable, "args": [LEAKY], "env": {"LEAK": aws}}
    servers = {"on": {**leaky, "redact_patterns": True}, "off": leaky}
    cfg = make_config(tmp_path, servers)
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            on = await agent.call("mcp__on__leak")
            off = await agent.call("mcp__off__leak")
            rows = {r["alias"]: r for r in (await agent.result("mcpd/status"))["servers"]}
    assert on["content"][0]["text"] == "the key is [secret: AWS access key id]"
    assert off["content"][0]["text"] == f"the key is {aws}"
    assert rows["on"]["secrets_masked"]["format: AWS access key id"] >= 1
    assert rows["off"]["secrets_masked"] == {}


async def test_a_secret_padded_across_mcpds_cuts_shows_none_of_its_beginning_in_any_view(
    tmp_path: Path, collector: Collector
) -> None:
    # The server's own secret, padded so that the stderr line kept and the stdout line
    # quoted each end one character short of it.
    servers = {"leaky": {"command": sys.executable, "args": [PADDING], "env": {"API_KEY": SECRET}}}
    cfg = make_config(tmp_path, servers, state_dir=str(tmp_path / "state"))
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon, connect(daemon.socket_path) as agent:
            assert [t["name"] for t in await agent.tools()] == ["mcp__leaky__crash"]
            await collector.wait_for("leaky", "stderr")
            # Once it ended, its stderr's last lines show in status too.
            seen = texts_of(await agent.call("mcp__leaky__crash"))
            await collector.wait_for("leaky", "outage")
            status = await agent.result("mcpd/status")
    seen += [*texts_of(status), status_text(status), *collector.texts]
    assert any("skipped a stdout line" in t for t in collector.texts)
    assert [(b, t) for t in seen for b in beginnings(t)] == []
    assert MARKER in row_of(status)["stderr"][0]
    assert row_of(status)["secrets_masked"][WHOSE] >= 1
    assert ("leaky", "secret_masked") in collector.events
