"""A small MCP server runtime for the bundled demo servers and for test servers.

A ``DemoServer`` holds tools (a name, a JSON Schema for the arguments, an async
handler) and answers MCP requests of both eras; ``stdio.py`` and ``http.py`` carry
those requests over a byte stream or Streamable HTTP. The era rules themselves
(``_meta`` checks, discover, initialize) live in ``protocol.mcp.serving``.

    server = DemoServer("echo")

    @server.tool("Say it back.", object_schema({"text": {"type": "string"}}, ["text"]))
    async def echo(args: rpc.JsonObject, ctx: ToolContext) -> str:
        await ctx.progress(1, 1)
        return string_argument(args, "text")

    run(server)  # from .main: stdio, or --http HOST:PORT [--ready-file F]

Tools can be added and removed while the server runs. ``tools/list_changed`` then
goes to modern clients with a ``subscriptions/listen`` open, and to legacy ones on
stdio or on their session's GET stream; cursors from before the change are refused.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, NoReturn, TypeAlias

import msgspec
import trio
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp.serving import AgentSession, RequestContext

from .arguments import check_demo_arguments

log = logging.getLogger("mcpd.demo")

Notify: TypeAlias = Callable[[bytes], Awaitable[None]]
"""Sends one encoded notification on the stream that carries the request's response."""

ToolOutput: TypeAlias = str | mcp.CallToolResult
ToolHandler: TypeAlias = Callable[[rpc.JsonObject, "ToolContext"], Awaitable[ToolOutput]]


class ToolError(Exception):
    """Raise from a handler to fail the call with exactly this text (``isError``)."""


@dataclass(frozen=True)
class ToolDef(rpc.Late):
    name: str
    description: str
    input_schema: Mapping[str, rpc.Json]
    handler: ToolHandler
    annotations: Mapping[str, rpc.Json] | None = None
    title: str | None = None

    def wire(self) -> mcp.Tool:
        return mcp.Tool(
            name=self.name,
            title=self.title if self.title is not None else UNSET,
            description=self.description,
            inputSchema=Raw(msgspec.json.encode(self.input_schema)),
            annotations=dict(self.annotations) if self.annotations is not None else UNSET,
        )


def object_schema(
    properties: Mapping[str, rpc.JsonObject], required: Sequence[str] = ()
) -> rpc.JsonObject:
    """An ``inputSchema`` that accepts exactly these properties."""
    schema: rpc.JsonObject = {
        "type": "object",
        "properties": dict[str, rpc.Json](properties),
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list[rpc.Json](required)
    return schema


class ToolContext:
    """What a handler may use besides its arguments."""

    def __init__(
        self, server: DemoServer, request: RequestContext, request_id: rpc.Id, notify: Notify
    ) -> None:
        self.server = server
        self.request = request
        self.request_id = request_id
        self._notify = notify

    @property
    def progress_token(self) -> str | int | None:
        return self.request.progress_token

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress, if the client asked for it with a ``progressToken``."""
        token = self.progress_token
        if token is None:
            return
        params = mcp.ProgressParams(
            progressToken=token,
            progress=progress,
            total=total if total is not None else UNSET,
            message=message if message is not None else UNSET,
        )
        await self._notify(rpc.encode_notification("notifications/progress", params))


class Reply(NamedTuple):
    """An encoded response, and its error code when it is an error (HTTP maps it)."""

    message: bytes
    error_code: int | None = None


class _Empty(msgspec.Struct):
    pass


class _ListenFilter(msgspec.Struct):
    toolsListChanged: bool = False


class _ListenParams(msgspec.Struct):
    notifications: _ListenFilter = msgspec.field(default_factory=_ListenFilter)


class _SubscriptionParams(msgspec.Struct, omit_defaults=True):
    meta: mcp.Meta = msgspec.field(name="_meta")
    notifications: dict[str, bool] | UnsetType = UNSET


class DemoServer:
    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        tools: Iterable[ToolDef] = (),
        page_size: int | None = None,
        instructions: str | None = None,
    ) -> None:
        self.info = mcp.Implementation(name=name, version=version)
        self.instructions = instructions
        self.page_size = page_size
        self.capabilities: rpc.JsonObject = {"tools": {"listChanged": True}}
        self._tools: dict[str, ToolDef] = {t.name: t for t in tools}
        # Part of every cursor, so a cursor from before a change is refused, not misread.
        self._generation = 0
        self._changed = trio.Event()

    # --- the tool table -----------------------------------------------------------

    @property
    def tools(self) -> list[ToolDef]:
        return list(self._tools.values())

    def tool(
        self,
        description: str,
        input_schema: Mapping[str, rpc.Json] | None = None,
        *,
        name: str | None = None,
        annotations: Mapping[str, rpc.Json] | None = None,
        title: str | None = None,
    ) -> Callable[[ToolHandler], ToolHandler]:
        """Decorator: register the handler as a tool named after the function."""

        def register(handler: ToolHandler) -> ToolHandler:
            # A callable object (a partial, an instance) has no __name__ its type declares.
            tool_name = name if name is not None else getattr(handler, "__name__", "")
            schema = input_schema if input_schema is not None else object_schema({})
            self.add_tool(ToolDef(tool_name, description, schema, handler, annotations, title))
            return handler

        return register

    def add_tool(self, tool: ToolDef) -> None:
        """Add or replace a tool; listeners hear about it."""
        self._tools[tool.name] = tool
        self._tools_changed()

    def _tools_changed(self) -> None:
        self._generation += 1
        fired, self._changed = self._changed, trio.Event()
        fired.set()

    async def announce_tool_changes(
        self,
        notify: Notify,
        subscription_id: rpc.Id | None = None,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> NoReturn:
        """Send ``notifications/tools/list_changed`` after every change from now on.

        Changes that come quicker than the client reads are announced once.
        """
        seen = self._changed
        task_status.started()
        params: _SubscriptionParams | UnsetType = UNSET
        if subscription_id is not None:
            params = _SubscriptionParams(meta={mcp.KEY_SUBSCRIPTION_ID: subscription_id})
        message = rpc.encode_notification("notifications/tools/list_changed", params)
        while True:
            await seen.wait()
            seen = self._changed
            await notify(message)

    # --- requests -----------------------------------------------------------------

    def new_session(self) -> AgentSession:
        """Lifecycle state for one connection (stdio) or one legacy HTTP session."""
        return AgentSession(self.info, self.capabilities, self.instructions)

    async def handle(
        self,
        session: AgentSession,
        req: rpc.Request,
        notify: Notify,
        ctx: RequestContext | None = None,
    ) -> Reply:
        """Answer one request. ``ctx`` is passed when the transport already made it."""
        try:
            result = await self._dispatch(session, req, notify, ctx)
            return Reply(rpc.encode_result(req.id, result))
        except rpc.RPCError as exc:
            return Reply(rpc.encode_error_object(req.id, exc.to_object()), exc.code)
        except rpc.InvalidParams as exc:
            code = rpc.INVALID_PARAMS
            return Reply(rpc.encode_error(req.id, code, f"Invalid params: {exc}"), code)
        except Exception:
            # A bug here (say, a result that cannot be encoded) fails this request only.
            log.exception("%s failed", req.method)
            code = rpc.INTERNAL_ERROR
            return Reply(rpc.encode_error(req.id, code, "Internal error"), code)

    async def _dispatch(
        self,
        session: AgentSession,
        req: rpc.Request,
        notify: Notify,
        ctx: RequestContext | None,
    ) -> msgspec.Struct:
        if req.method == "initialize":
            return session.initialize(req.params)
        if ctx is None:
            ctx = session.context(req)
        modern = ctx.era == "modern"
        match req.method:
            case "tools/list":
                return session.complete(ctx, self._list(req.params), cacheable=True)
            case "tools/call":
                return session.complete(ctx, await self._call(ctx, req, notify))
            case "server/discover" if modern:
                return session.discover(ctx)
            case "subscriptions/listen" if modern:
                await self._listen(req, notify)
            case "ping" if not modern:
                return _Empty()
        raise rpc.RPCError(rpc.METHOD_NOT_FOUND, "Method not found", req.method)

    def _list(self, params: Raw | None) -> mcp.ListToolsResult:
        p = rpc.decode_as(params, mcp.ListParams)
        tools = self.tools
        start = 0 if p.cursor is UNSET or p.cursor is None else self._offset(p.cursor)
        end = len(tools) if self.page_size is None else start + self.page_size
        more = end < len(tools)
        return mcp.ListToolsResult(
            tools=[t.wire() for t in tools[start:end]],
            nextCursor=self._cursor(end) if more else UNSET,
        )

    def _cursor(self, offset: int) -> str:
        raw = f"{self._generation}:{offset}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def _offset(self, cursor: str) -> int:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            generation, offset = (int(part) for part in raw.decode().split(":"))
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise rpc.RPCError(rpc.INVALID_PARAMS, f"Invalid cursor: {cursor!r}") from None
        if generation != self._generation:
            raise rpc.RPCError(
                rpc.INVALID_PARAMS, "Cursor expired: the tool list changed; list from the start"
            )
        if not 0 < offset <= len(self._tools):
            raise rpc.RPCError(rpc.INVALID_PARAMS, f"Invalid cursor: {cursor!r}")
        return offset

    async def _call(
        self, ctx: RequestContext, req: rpc.Request, notify: Notify
    ) -> mcp.CallToolResult:
        p = rpc.decode_as(req.params, mcp.CallToolParams)
        tool = self._tools.get(p.name)
        if tool is None:
            raise rpc.RPCError(rpc.INVALID_PARAMS, f"Unknown tool: {p.name}")
        args: rpc.Json = {}
        if p.arguments is not UNSET:
            args = msgspec.json.decode(p.arguments)
        if args is None:
            args = {}
        problem = check_demo_arguments(tool.input_schema, args)
        if problem is not None:
            return mcp.text_result(f"Invalid arguments for {tool.name}: {problem}", is_error=True)
        assert isinstance(args, dict)  # anything else is a problem the check names
        try:
            out = await tool.handler(args, ToolContext(self, ctx, req.id, notify))
        except ToolError as exc:
            return mcp.text_result(str(exc), is_error=True)
        except Exception as exc:
            log.exception("tool %s failed", tool.name)
            message = f"{tool.name} failed: {type(exc).__name__}: {exc}"
            return mcp.text_result(message, is_error=True)
        return mcp.text_result(out) if isinstance(out, str) else out

    async def _listen(self, req: rpc.Request, notify: Notify) -> NoReturn:
        # The subscription lasts until the client cancels it (stdio) or hangs up (HTTP).
        p = rpc.decode_as(req.params, _ListenParams)
        honoured = {"toolsListChanged": True} if p.notifications.toolsListChanged else {}
        ack = _SubscriptionParams(meta={mcp.KEY_SUBSCRIPTION_ID: req.id}, notifications=honoured)
        async with trio.open_nursery() as nursery:
            if honoured:
                await nursery.start(self.announce_tool_changes, notify, req.id)
            await notify(rpc.encode_notification("notifications/subscriptions/acknowledged", ack))
            await trio.sleep_forever()
        raise AssertionError("unreachable")
