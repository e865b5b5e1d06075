"""MCP types beyond tools: prompts, resources, completions, what servers ask of
clients, and the tasks extension (``io.modelcontextprotocol/tasks``).

As in ``protocol.mcp.core``, whatever mcpd passes through without looking inside stays
``msgspec.Raw``: prompt arguments, schemas, icons, a completion's values, a task's
result. What mcpd must rewrite (names, URIs) is typed.
"""

from __future__ import annotations

from typing import Final

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ..jsonrpc.messages import JsonObject
from .core import Meta

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
TASK: Final = "task"  # the resultType the tasks extension adds
# The statuses of a task that has ended: nothing more comes of it.
TASK_ENDED: Final = frozenset({"completed", "failed", "cancelled"})
# Requests a server may send a legacy client, and the client capability each needs.
ASK_METHODS: Final = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


class PromptArgument(msgspec.Struct, omit_defaults=True):
    name: str
    title: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    required: bool | UnsetType | None = UNSET


class Prompt(msgspec.Struct, omit_defaults=True):
    name: str
    title: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    arguments: list[PromptArgument] | UnsetType | None = UNSET
    icons: Raw | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(name="_meta", default=UNSET)


class Resource(msgspec.Struct, omit_defaults=True):
    uri: str
    name: str | UnsetType = UNSET
    title: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    mimeType: str | UnsetType | None = UNSET
    size: int | UnsetType | None = UNSET
    annotations: Raw | UnsetType = UNSET
    icons: Raw | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(name="_meta", default=UNSET)


class ResourceTemplate(msgspec.Struct, omit_defaults=True):
    uriTemplate: str
    name: str | UnsetType = UNSET
    title: str | UnsetType | None = UNSET
    description: str | UnsetType | None = UNSET
    mimeType: str | UnsetType | None = UNSET
    annotations: Raw | UnsetType = UNSET
    icons: Raw | UnsetType = UNSET
    meta: Meta | UnsetType | None = msgspec.field(name="_meta", default=UNSET)


class ListPage(msgspec.Struct, omit_defaults=True):
    """One page of prompts/list, resources/list or resources/templates/list."""

    prompts: list[Raw] | UnsetType = UNSET
    resources: list[Raw] | UnsetType = UNSET
    resourceTemplates: list[Raw] | UnsetType = UNSET
    nextCursor: str | UnsetType | None = UNSET
    ttlMs: Raw | UnsetType = UNSET  # as written: ``core.ttl_of``
    resultType: str | UnsetType | None = UNSET


class GetPromptParams(msgspec.Struct, omit_defaults=True):
    name: str
    arguments: Raw | UnsetType = UNSET
    inputResponses: Raw | UnsetType = UNSET
    requestState: Raw | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class ReadResourceParams(msgspec.Struct, omit_defaults=True):
    uri: str
    inputResponses: Raw | UnsetType = UNSET
    requestState: Raw | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class SubscribeParams(msgspec.Struct, omit_defaults=True):
    uri: str
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class CompletionRef(msgspec.Struct, omit_defaults=True):
    type: str
    name: str | UnsetType = UNSET
    uri: str | UnsetType = UNSET


class CompleteParams(msgspec.Struct, omit_defaults=True):
    ref: CompletionRef
    argument: Raw
    context: Raw | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class TaskParams(msgspec.Struct, omit_defaults=True):
    """tasks/get, tasks/update and tasks/cancel: the task, and for update the answers."""

    taskId: str
    inputResponses: Raw | UnsetType = UNSET
    meta: Meta | UnsetType = msgspec.field(name="_meta", default=UNSET)


class ResultHead(msgspec.Struct):
    """Enough of any result to see what kind it is."""

    resultType: str | UnsetType | None = UNSET
    taskId: object = UNSET
    inputRequests: dict[str, object] | UnsetType | None = UNSET
    requestState: Raw | UnsetType = UNSET
    ttlMs: Raw | UnsetType = UNSET  # a task's, as written: ``core.ttl_of``

    @property
    def kind(self) -> str:
        # An absent resultType means complete (legacy servers never send one).
        return self.resultType if isinstance(self.resultType, str) else "complete"


def needs(method: str) -> str | None:
    """The client capability a server request needs (None: not one mcpd relays)."""
    return ASK_METHODS.get(method)


def declares(capabilities: JsonObject | None, method: str, params: object = None) -> bool:
    """Whether ``capabilities`` cover a server's ``method`` request (with ``params``).

    Elicitation distinguishes its modes: ``{}`` (or ``form`` alone) is form mode only,
    so a URL-mode request needs ``elicitation.url``.
    """
    need = needs(method)
    if need is None or not capabilities:
        return False
    cap = capabilities.get(need)
    if not isinstance(cap, dict):
        return False
    if method == "elicitation/create" and isinstance(params, dict):
        mode = params.get("mode", "form")
        if mode == "url":
            return isinstance(cap.get("url"), dict)
        if cap and "form" not in cap:
            return False
    return True


def answerable(requests: object, capabilities: JsonObject | None) -> bool:
    """Whether an agent that declared ``capabilities`` can fulfil every one of an
    ``input_required``'s ``requests``: each a request it ``declares``, elicitation in
    the mode the request asks for. Not when it declared nothing, nor when ``requests``
    is not an object of requests."""
    if not capabilities or not isinstance(requests, dict):
        return False
    return all(
        isinstance(r, dict)
        and isinstance(r.get("method"), str)
        and declares(capabilities, r["method"], r.get("params"))
        for r in requests.values()
    )


def asks_nothing(requests: object, state: object) -> bool:
    """Whether an ``input_required`` with ``requests`` and ``state`` asks the client
    nothing and only hands back a ``requestState`` to call again with (a server shedding
    load does): a retry that needs no capability, and carries no ``inputResponses``."""
    return isinstance(state, Raw) and (requests is UNSET or requests is None or requests == {})


def has_tasks(capabilities: JsonObject | None) -> bool:
    extensions = capabilities.get("extensions") if capabilities else None
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def unfit_request(method: str, params: object) -> str | None:
    """What makes a server's ``method`` request (one of ``ASK_METHODS``) with ``params``
    (decoded; None: absent) unfit to put before an agent, in words that follow "whose";
    None when it has
    what its method requires. An elicitation needs its message and, in form mode, the
    form; in URL mode, the URL and the id its completion is told by. A sampling request
    needs the messages and the most tokens to sample. Only roots/list may come without
    params."""
    if params is None:
        return None if method == "roots/list" else "params are missing"
    if not isinstance(params, dict):
        return "params are not an object"
    if method == "elicitation/create":
        mode = params.get("mode", "form")
        need: tuple[tuple[str, type, str], ...] = (("message", str, "a string"),)
        if mode == "form":
            need += (("requestedSchema", dict, "an object"),)
        elif mode == "url":
            need += (("url", str, "a string"), ("elicitationId", str, "a string"))
        else:
            return "mode is neither 'form' nor 'url'"
    elif method == "sampling/createMessage":
        need = (("messages", list, "an array"), ("maxTokens", int, "an integer"))
    else:
        return None
    for key, kind, shown in need:
        value = params.get(key)
        if value is None:
            return f"params have no {key}"
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"{key} is not {shown}"
    return None
