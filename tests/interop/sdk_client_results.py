"""The official SDK client as an agent that declares no capabilities, through
`mcpd bridge`: it calls tools and prints what it got of each.

usage: python sdk_client_results.py MODE TOOLS_JSON [--tasks] [--list] -- BRIDGE_COMMAND [ARG...]
MODE is the client's (auto: 2026-07-28; legacy: the handshake); TOOLS_JSON a list of
tool names. With --tasks the client takes task handles (the tasks extension, as a
claim of the SDK's): it asks tasks/get for the task until it is done, and the call's
result is the result the task ended with. With --list it lists the tools first.
Prints one JSON object: the protocol version, and for each tool whether its result is
an error, its texts and its _meta; with --list also ``listed``, each listed tool's
output schema by name, and for each tool its result's structured content.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import ConfigDict, Field

EXT = "io.modelcontextprotocol/tasks"


class TaskHandle(types.Result):
    result_type: Literal["task"] = "task"
    task_id: str


class GetTaskParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[GetTaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: GetTaskParams
    name_param = "taskId"


class TaskState(types.Result):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    result: dict[str, Any] | None = Field(default=None)


async def finish(handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
    for _ in range(100):
        request = GetTask(params=GetTaskParams(task_id=handle.task_id))
        state = await ctx.session.send_request(request, TaskState)
        if state.status in ("completed", "failed") and state.result is not None:
            return types.CallToolResult.model_validate(state.result)
        await anyio.sleep(0.05)
    raise RuntimeError(f"task {handle.task_id} never ended")


class Tasks(ClientExtension):
    identifier = EXT

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=finish),)


async def main() -> None:
    mode, tools = sys.argv[1], json.loads(sys.argv[2])
    flags = sys.argv[: sys.argv.index("--")]
    extensions = [Tasks()] if "--tasks" in flags else []
    command = sys.argv[sys.argv.index("--") + 1 :]
    params = StdioServerParameters(command=command[0], args=command[1:])
    seen: dict[str, Any] = {}
    async with Client(params, mode=mode, extensions=extensions) as client:  # type: ignore[arg-type]
        seen["version"] = client.session.protocol_version
        if "--list" in flags:
            listed = (await client.list_tools()).tools
            seen["listed"] = {t.name: t.output_schema for t in listed}
        for tool in tools:
            result = await client.call_tool(tool, {})
            seen[tool] = {
                "is_error": result.is_error,
                "texts": [c.text for c in result.content if c.type == "text"],
                "meta": result.meta,
            }
            if "--list" in flags:
                seen[tool]["structured"] = result.structured_content
    print(json.dumps(seen))


anyio.run(main)
