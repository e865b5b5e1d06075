"""What the conformance suite's server scenarios expect of a server, on the official
Python SDK: the server behind mcpd when the suite tests mcpd as a server.

usage: python conformance_server.py stdio | http PORT

The npm package of the suite ships no reference server, so this one does what the
scenarios for resources, prompts, completion, elicitation, sampling and
input_required ask (the scenarios' own descriptions say what that is). The
elicitation and sampling tools ask mid-call, which the 2025 era allows; the
input_required tools answer with InputRequiredResult, which the 2026 era uses.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.message import ServerMessageMetadata

app = MCPServer("conformance-reference")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


# -- resources --


@app.resource("test://static-text", name="static-text", description="A static text resource")
def static_text() -> str:
    return "This is the content of the static text resource."


@app.resource(
    "test://static-binary",
    name="static-binary",
    description="A static binary resource",
    mime_type="image/png",
)
def static_binary() -> bytes:
    return PNG


@app.resource(
    "test://watched-resource", name="watched-resource", description="A resource to subscribe to"
)
def watched() -> str:
    return "watched"


@app.resource(
    "test://template/{id}/data",
    name="template-data",
    description="Data for an id",
    mime_type="application/json",
)
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


async def _accept(ctx: Any, params: Any) -> types.EmptyResult:
    return types.EmptyResult()


# Legacy clients subscribe with resources/subscribe; the SDK serves it when asked to.
app._lowlevel_server.add_request_handler(
    "resources/subscribe", types.SubscribeRequestParams, _accept
)
app._lowlevel_server.add_request_handler(
    "resources/unsubscribe", types.UnsubscribeRequestParams, _accept
)


# -- prompts and completion --


@app.prompt(description="A prompt without arguments")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@app.prompt(description="A prompt with two arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@app.prompt(description="A prompt that embeds a resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[dict[str, Any]]:
    resource = {
        "uri": resourceUri,
        "mimeType": "text/plain",
        "text": "Embedded resource content for testing.",
    }
    return [
        {"role": "user", "content": {"type": "resource", "resource": resource}},
        {"role": "user", "content": "Please process the embedded resource above."},
    ]


@app.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list[dict[str, Any]]:
    image = {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
    return [
        {"role": "user", "content": image},
        {"role": "user", "content": "Please analyze the image above."},
    ]


@app.prompt(description="A prompt that needs input first")
async def test_input_required_result_prompt(ctx: Context) -> Any:
    asked = {"user_context": _elicit("What context should the prompt use?", "context")}
    got = await ask_back(ctx, asked)
    if isinstance(got, types.InputRequiredResult):
        return got
    return f"Prompt with context: {_content(got['user_context']).get('context', '')}"


@app.completion()
async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
    values = [v for v in ("testValue1", "testValue2", "test") if v.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), has_more=False)


# -- asking the client: mid-call in the 2025 era, input_required in the 2026 era --


def _elicit(message: str, field: str, kind: str = "string") -> dict[str, Any]:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return _form(message, schema)


def _form(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


def _sample(text: str, tokens: int) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": text}}
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [message], "maxTokens": tokens},
    }


ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}
_REQUESTS: dict[str, tuple[Any, Any]] = {
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult),
}


def _modern(ctx: Context) -> bool:
    return (ctx.protocol_version or "") >= "2026-07-28"


def _ask(requests: dict[str, Any], state: str | None = None) -> types.InputRequiredResult:
    return types.InputRequiredResult.model_validate(
        {"inputRequests": requests, **({"requestState": state} if state else {})}
    )


async def ask_back(
    ctx: Context, requests: dict[str, Any], state: str | None = None
) -> dict[str, Any] | types.InputRequiredResult:
    """Every answer by key, or (2026 era, not all answered yet) the input_required
    that asks for them. In the 2025 era each request is sent on the call's stream."""
    if _modern(ctx):
        answers = ctx.input_responses or {}
        if all(key in answers for key in requests) and ctx.request_state == state:
            return {key: _dump(answers[key]) for key in requests}
        return _ask(requests, state)
    got: dict[str, Any] = {}
    scoped = ServerMessageMetadata(related_request_id=ctx.request_context.request_id)
    for key, request in requests.items():
        request_type, result_type = _REQUESTS[request["method"]]
        sent = request_type.model_validate(request)
        answer = await ctx.session.send_request(sent, result_type, metadata=scoped)
        got[key] = _dump(answer)
    return got


def _dump(answer: Any) -> dict[str, Any]:
    data = (
        answer.model_dump(by_alias=True, exclude_none=True)
        if hasattr(answer, "model_dump")
        else answer
    )
    return data if isinstance(data, dict) else {}


def _content(answer: dict[str, Any]) -> dict[str, Any]:
    content = answer.get("content")
    return content if isinstance(content, dict) else {}


@app.tool()
async def test_sampling(prompt: str, ctx: Context) -> Any:
    """Ask the client's model."""
    got = await ask_back(ctx, {"llm": _sample(prompt, 100)})
    if isinstance(got, types.InputRequiredResult):
        return got
    return f"LLM response: {_content(got['llm']).get('text', '')}"


@app.tool()
async def test_elicitation(message: str, ctx: Context) -> Any:
    """Ask the user for a username and an email address."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    got = await ask_back(ctx, {"user": _form(message, schema)})
    if isinstance(got, types.InputRequiredResult):
        return got
    user = got["user"]
    return f"User response: action={user.get('action')}, content={user.get('content')}"


@app.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> Any:
    """Ask with a default for every primitive type."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {
                "type": "string",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "default": True},
        },
    }
    got = await ask_back(ctx, {"details": _form("Please review your details", schema)})
    if isinstance(got, types.InputRequiredResult):
        return got
    d = got["details"]
    return f"Elicitation completed: action={d.get('action')}, content={d.get('content')}"


@app.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> Any:
    """Ask with every kind of enum."""
    options = [("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [{"const": c, "title": t} for c, t in options],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "items": {"anyOf": [{"const": c, "title": t} for c, t in options]},
            },
        },
    }
    got = await ask_back(ctx, {"choice": _form("Choose", schema)})
    if isinstance(got, types.InputRequiredResult):
        return got
    c = got["choice"]
    return f"Elicitation completed: action={c.get('action')}, content={c.get('content')}"


@app.tool()
async def test_input_required_result_elicitation(ctx: Context) -> Any:
    """Ask the user's name, then greet them."""
    got = await ask_back(ctx, {"user_name": _elicit("What is your name?", "name")})
    if isinstance(got, types.InputRequiredResult):
        return got
    return f"Hello, {_content(got['user_name']).get('name', '')}!"


@app.tool()
async def test_input_required_result_sampling(ctx: Context) -> Any:
    """Ask the model for the capital of France."""
    got = await ask_back(ctx, {"capital_question": _sample("What is the capital of France?", 100)})
    if isinstance(got, types.InputRequiredResult):
        return got
    return f"The model said: {_content(got['capital_question']).get('text', '')}"


@app.tool()
async def test_input_required_result_list_roots(ctx: Context) -> Any:
    """Ask for the client's roots."""
    got = await ask_back(ctx, {"client_roots": ROOTS})
    if isinstance(got, types.InputRequiredResult):
        return got
    roots = got["client_roots"].get("roots", [])
    return "roots: " + ", ".join(str(r.get("uri")) for r in roots)


@app.tool()
async def test_input_required_result_request_state(ctx: Context) -> Any:
    """Confirm, carrying state between the rounds."""
    got = await ask_back(ctx, {"confirm": _elicit("Please confirm", "ok", "boolean")}, "round-1")
    if isinstance(got, types.InputRequiredResult):
        return got
    return "state-ok: confirmed"


@app.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> Any:
    """Ask for a name, a greeting and the roots at once."""
    wanted = {
        "user_name": _elicit("What is your name?", "name"),
        "greeting": _sample("Generate a greeting", 50),
        "client_roots": ROOTS,
    }
    got = await ask_back(ctx, wanted, "all")
    if isinstance(got, types.InputRequiredResult):
        return got
    return f"All inputs received: {_content(got['user_name']).get('name', '')}"


@app.tool()
async def test_input_required_result_multi_round(ctx: Context) -> Any:
    """Two questions, one round each."""
    step1 = {"step1": _elicit("Step 1: What is your name?", "name")}
    step2 = {"step2": _elicit("Step 2: What is your favorite color?", "color")}
    if not _modern(ctx):
        await ask_back(ctx, step1)
        got = await ask_back(ctx, step2)
        assert isinstance(got, dict)
        return f"Done: favourite colour {_content(got['step2']).get('color', '')}"
    answers = ctx.input_responses or {}
    if ctx.request_state == "round-2" and "step2" in answers:
        return f"Done: favourite colour {_content(_dump(answers['step2'])).get('color', '')}"
    if ctx.request_state == "round-1" and "step1" in answers:
        return _ask(step2, "round-2")
    return _ask(step1, "round-1")


@app.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> Any:
    """State the SDK seals; a tampered one is refused before this runs."""
    got = await ask_back(ctx, {"confirm": _elicit("Please confirm", "ok", "boolean")}, "sealed")
    if isinstance(got, types.InputRequiredResult):
        return got
    return "state-ok"


@app.tool()
async def test_input_required_result_capabilities(ctx: Context) -> Any:
    """Ask only for what the client declared it can give."""
    caps = ctx.client_capabilities
    wanted: dict[str, Any] = {}
    if caps is not None and caps.sampling is not None:
        wanted["greeting"] = _sample("Generate a greeting", 50)
    if caps is not None and caps.elicitation is not None:
        wanted["user_name"] = _elicit("What is your name?", "name")
    if caps is not None and caps.roots is not None:
        wanted["client_roots"] = ROOTS
    if not wanted:
        return "capabilities respected: nothing to ask"
    got = await ask_back(ctx, wanted)
    if isinstance(got, types.InputRequiredResult):
        return got
    return "capabilities respected"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        app.run("stdio")
    else:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
