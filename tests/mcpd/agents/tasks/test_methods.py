"""``tasks/get``, ``tasks/update`` and ``tasks/cancel`` from an agent (``TaskMethods``),
before any server is asked: refused to an agent that did not declare the tasks
extension on the request (saying which capability it needs), and for a task that is
not the agent's or params without a task."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from msgspec import Raw

from mcpd.agents.agent import Agent
from mcpd.agents.tasks.methods import TaskMethods
from mcpd.agents.tasks.table import Tasks
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import DaemonConfig, NamingConfig
from mcpd.registry.gating.gate import ListGate
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.all_servers import AllServers
from mcpd.servers.shared import AgentKey
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import features
from protocol.mcp.serving import RequestContext

TASKS = {"extensions": {features.TASKS_EXTENSION: {}}}
OWNER = AgentKey()


def methods() -> TaskMethods:
    catalog = Catalog(NamingConfig(), ListGate())
    config = parse_config({"servers": {"notes": {"command": "x"}}}, env={})
    servers = AllServers(Supervisor(config, catalog), catalog)
    return TaskMethods(Tasks(servers, lambda: 1 << 20, DaemonConfig))


def request(method: str, params: Any) -> rpc.Request:
    return rpc.Request(1, method, Raw(json.dumps(params).encode()))


def modern(capabilities: dict[str, Any]) -> RequestContext:
    return RequestContext("modern", "2026-07-28", {}, capabilities)


async def answer(ctx: RequestContext | None, method: str = "tasks/get", params: Any = None) -> Any:
    req = request(method, {"taskId": "t-1"} if params is None else params)
    return await methods().answer(cast(Agent, None), req, ctx, OWNER, None)


@pytest.mark.parametrize(
    "ctx",
    [
        None,
        RequestContext("legacy", "2025-11-25", {}, TASKS),
        modern({}),
        modern({"extensions": {}}),
        modern({"extensions": {features.TASKS_EXTENSION: True}}),
        modern({"extensions": [features.TASKS_EXTENSION]}),
    ],
    ids=["no-context", "legacy", "no-extensions", "other-extensions", "not-an-object", "a-list"],
)
@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_without_the_tasks_extension_the_capability_needed_is_named(
    ctx: RequestContext | None, method: str
) -> None:
    with pytest.raises(rpc.RPCError) as info:
        await answer(ctx, method)
    assert info.value.code == rpc.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert info.value.message == f"{method} needs the {features.TASKS_EXTENSION} extension"
    assert info.value.data == {
        "requiredCapabilities": {"extensions": {features.TASKS_EXTENSION: {}}}
    }


async def test_a_task_the_agent_has_none_of_is_unknown() -> None:
    with pytest.raises(rpc.RPCError) as info:
        await answer(modern(TASKS), "tasks/get", {"taskId": "nope"})
    assert (info.value.code, info.value.message) == (rpc.INVALID_PARAMS, "Unknown task 'nope'")


@pytest.mark.parametrize("params", [{}, {"taskId": 5}, [1]])
async def test_params_without_a_task_are_invalid(params: Any) -> None:
    with pytest.raises(rpc.InvalidParams):
        await answer(modern(TASKS), "tasks/cancel", params)
