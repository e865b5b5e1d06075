"""mcpd as the client under test of the official conformance suite's client mode.

usage: python conformance_driver.py [--era auto|legacy|modern] [--elicit] SERVER_URL

The harness appends the scenario's mock server URL as the last argument and names the
scenario in ``MCP_CONFORMANCE_SCENARIO`` (with ``MCP_CONFORMANCE_CONTEXT`` for the
scenarios that hand out tool arguments or credentials). The ``auth/`` scenarios are
driven by ``tests.support.oauth.conformance``: a login with ``mcpd auth login`` whenever the server
needs one. The driver starts mcpd's daemon in this
process with that URL as its only server, waits until the daemon had its first
attempt at the server, then does what the scenario asks through the daemon's Unix
socket, as an agent would. It prints one JSON line with what it saw (for the tests to
read back from the harness's ``stdout.txt``) and exits 0 when the daemon behaved.

With ``--elicit`` the agent declares the elicitation capability and answers the input
requests of ``input_required`` results itself, retrying through the daemon.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.clients.agent import Agent, connect, make_config, running  # noqa: E402
from tests.support.hosts.wiretap import WireTap, wiretap  # noqa: E402
from tests.support.oauth.conformance import drive_auth  # noqa: E402

ALIAS = "conf"
PREFIX = f"mcp__{ALIAS}__"
TIMEOUT = 25.0
AUTH_TIMEOUT = 60.0

Summary = dict[str, Any]
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"


def text_of(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict))


async def list_own_tools(agent: Agent) -> dict[str, dict[str, Any]]:
    """The scenario server's tools as mcpd lists them, by the server's own name."""
    return {
        t["name"][len(PREFIX) :]: t for t in await agent.tools() if t["name"].startswith(PREFIX)
    }


async def call(agent: Agent, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await agent.call(PREFIX + tool, arguments)
    return {
        "tool": tool,
        "isError": result.get("isError", False),
        "resultType": result.get("resultType"),
        "text": text_of(result),
        "meta": result.get("_meta"),
    }


async def tools_call(agent: Agent, out: Summary) -> None:
    out["tools"] = sorted(await list_own_tools(agent))
    out["calls"] = [await call(agent, "add_numbers", {"a": 5, "b": 3})]


async def list_only(agent: Agent, out: Summary) -> None:
    out["tools"] = sorted(await list_own_tools(agent))


async def call_every_tool(agent: Agent, out: Summary) -> None:
    tools = await list_own_tools(agent)
    out["tools"] = sorted(tools)
    out["calls"] = [await call(agent, n, sample_arguments(tools[n])) for n in sorted(tools)]


async def use_everything(agent: Agent, out: Summary) -> None:
    """Every tool, then every resource read and every prompt got, through mcpd."""
    await call_every_tool(agent, out)
    resources = (await agent.result("resources/list"))["resources"]
    reads = [await agent.rpc("resources/read", {"uri": r["uri"]}) for r in resources]
    out["reads"] = [r["uri"] for r, got in zip(resources, reads, strict=True) if "result" in got]
    prompts = (await agent.result("prompts/list"))["prompts"]
    gets = [await agent.rpc("prompts/get", {"name": p["name"]}) for p in prompts]
    out["prompts"] = [p["name"] for p, got in zip(prompts, gets, strict=True) if "result" in got]


def sample_arguments(tool: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy a flat schema's required string/number/boolean properties."""
    schema = tool.get("inputSchema") or {}
    props = schema.get("properties") or {}
    samples = {"string": "us-west1", "integer": 1, "number": 1.5, "boolean": True}
    return {
        name: samples.get(props.get(name, {}).get("type"), "x")
        for name in schema.get("required") or []
    }


async def custom_headers(agent: Agent, out: Summary) -> None:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    out["tools"] = sorted(await list_own_tools(agent))
    out["calls"] = [
        await call(agent, item["name"], item.get("arguments") or {})
        for item in context.get("toolCalls", [])
    ]


async def schema_echo(agent: Agent, out: Summary) -> None:
    tools = await list_own_tools(agent)
    out["tools"] = sorted(tools)
    schema = tools["json_schema_2020_12_tool"]["inputSchema"]
    out["calls"] = [await call(agent, "json_schema_echo", {"schema": schema})]


async def request_state(agent: Agent, out: Summary) -> None:
    out["tools"] = sorted(await list_own_tools(agent))
    # The unrelated call sits between the rounds of the others, as the scenario intends.
    order = ["test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state"]
    order.append("test_mrtr_no_result_type")
    out["calls"] = [await call(agent, name, {}) for name in order]


def fill(schema: dict[str, Any]) -> dict[str, Any]:
    """Content for an elicitation form: a plain value of each property's type."""
    values = {"boolean": True, "string": "mcpd", "integer": 1, "number": 1.0}
    props = schema.get("properties") or {}
    return {name: values.get(prop.get("type"), "mcpd") for name, prop in props.items()}


class ElicitingAgent:
    """An agent with the elicitation capability that answers input requests itself."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    async def send(self, params: dict[str, Any]) -> dict[str, Any]:
        meta = {CAPABILITIES: {"elicitation": {}}}
        return await self.agent.result("tools/call", {**params, "_meta": meta})  # type: ignore[no-any-return]

    async def first_round(self, tool: str) -> tuple[dict[str, Any], dict[str, Any]]:
        params = {"name": PREFIX + tool, "arguments": {}}
        return params, await self.send(params)

    async def answer(self, params: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """Retry once with an answer to every input request (and the state, if any)."""
        responses = {}
        for key, req in (result.get("inputRequests") or {}).items():
            schema = (req.get("params") or {}).get("requestedSchema") or {}
            responses[key] = {"action": "accept", "content": fill(schema)}
        retry = {**params, "inputResponses": responses}
        if "requestState" in result:
            retry["requestState"] = result["requestState"]
        return await self.send(retry)


def outcome(tool: str, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    last = rounds[-1]
    return {
        "tool": tool,
        "rounds": [r.get("resultType") for r in rounds],
        "isError": last.get("isError", False),
        "resultType": last.get("resultType"),
        "text": text_of(last),
        "meta": last.get("_meta"),
    }


async def request_state_answered(agent: Agent, out: Summary) -> None:
    out["tools"] = sorted(await list_own_tools(agent))
    eliciting = ElicitingAgent(agent)
    calls = []
    params, first = await eliciting.first_round("test_mrtr_echo_state")
    # An unrelated call between the rounds must carry nothing of them.
    _, unrelated = await eliciting.first_round("test_mrtr_unrelated")
    calls.append(outcome("test_mrtr_unrelated", [unrelated]))
    calls.append(outcome("test_mrtr_echo_state", [first, await eliciting.answer(params, first)]))
    params, first = await eliciting.first_round("test_mrtr_no_state")
    calls.append(outcome("test_mrtr_no_state", [first, await eliciting.answer(params, first)]))
    _, plain = await eliciting.first_round("test_mrtr_no_result_type")
    calls.append(outcome("test_mrtr_no_result_type", [plain]))
    out["calls"] = calls


SCENARIOS: dict[str, Callable[[Agent, Summary], Awaitable[None]]] = {
    "tools_call": tools_call,
    "request-metadata": list_only,
    "http-standard-headers": use_everything,
    "http-custom-headers": custom_headers,
    "http-invalid-tool-headers": call_every_tool,
    "json-schema-ref-no-deref": list_only,
    "json-schema-2020-12-preservation": schema_echo,
    "sep-2322-client-request-state": request_state,
    "initialize": list_only,
    "sse-retry": call_every_tool,
    "elicitation-sep1034-client-defaults": call_every_tool,
}


async def drive(url: str, scenario: str, era: str) -> Summary:
    if scenario.startswith("auth/"):
        return await drive_authorization(url, scenario)
    action = SCENARIOS.get(scenario)
    if action is None:
        raise SystemExit(f"conformance_driver: no action for scenario {scenario!r}")
    out: Summary = {"scenario": scenario}
    target = urlsplit(url)
    assert target.port is not None, url
    with tempfile.TemporaryDirectory(prefix="mcpd-conf-") as tmp:
        try:
            with trio.fail_after(TIMEOUT):
                async with wiretap(target.port) as tap:
                    try:
                        await run_daemon(tap.url(target.path or "/"), era, Path(tmp), action, out)
                    finally:
                        out["wire"] = wire_summary(tap)
        except trio.TooSlowError:
            out["ok"] = False
            out["error"] = f"the scenario did not finish within {TIMEOUT:g} s"
    return out


async def drive_authorization(url: str, scenario: str) -> Summary:
    """The authorization scenarios (``tests.support.oauth.conformance``): no wire tap in
    between, since the resource the server's metadata names must be the URL mcpd was given."""
    with tempfile.TemporaryDirectory(prefix="mcpd-conf-") as tmp:
        with trio.move_on_after(AUTH_TIMEOUT):
            return await drive_auth(url, scenario, Path(tmp), TIMEOUT)
    return {"scenario": scenario, "ok": False, "error": f"not done within {AUTH_TIMEOUT:g} s"}


def wire_summary(tap: WireTap) -> list[dict[str, Any]]:
    """What went over the wire, one entry per HTTP request."""
    return [
        {
            "http": req.method,
            "method": req.rpc_method,
            "session": req.headers.get("mcp-session-id"),
            "version": req.headers.get("mcp-protocol-version"),
        }
        for req in tap.requests
    ]


async def run_daemon(
    url: str,
    era: str,
    tmp: Path,
    action: Callable[[Agent, Summary], Awaitable[None]],
    out: Summary,
) -> None:
    config = make_config(tmp, {ALIAS: {"url": url, "era": era}}, startup_deadline=TIMEOUT)
    async with running(config) as daemon:
        async with connect(daemon.socket_path) as agent:
            server = (await agent.result("mcpd/status"))["servers"][0]
            keys = ("state", "era", "protocol_version", "last_error", "dropped_tools")
            out["server"] = {k: server.get(k) for k in keys}
            if server["state"] != "ready":
                out["ok"] = False
                return
            await action(agent, out)
        out["ok"] = True


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="mcpd under the conformance harness")
    parser.add_argument("--era", choices=["auto", "modern", "legacy"], default="auto")
    parser.add_argument("--elicit", action="store_true", help="the agent answers elicitation")
    parser.add_argument("url")
    args = parser.parse_args(argv)
    if args.elicit:
        SCENARIOS["sep-2322-client-request-state"] = request_state_answered
    logging.basicConfig(
        level=os.environ.get("MCPD_DRIVER_LOG_LEVEL", "INFO"),
        stream=sys.stderr,
        format="%(name)s %(levelname)s %(message)s",
    )
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    summary = trio.run(drive, args.url, scenario, args.era)
    print(json.dumps(summary), flush=True)
    return 0 if summary.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
