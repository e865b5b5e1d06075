"""A 2026-07-28 stdio server that answers ``input_required`` in the two ways a client
must retry without being given anything to answer, and the one it never stops.

- tool ``busy``, prompt ``busy`` and resource ``shed://now``: each request is answered
  with a ``requestState`` alone (the server sheds load) until it has been sent back
  ``--busy`` times; then it completes, saying how many times it came back and whether
  any retry carried ``inputResponses``;
- tool ``endless``: every request, answered or not, asks an elicitation again, with a
  ``requestState`` that counts the rounds;
- tool ``heavy``, prompt ``heavy`` and resource template ``heavy://{size}``: a request
  with no state is answered with a ``requestState`` alone, a string whose JSON is
  ``size`` bytes (the call's or the prompt's argument, or the URI's); a retry completes,
  saying how many bytes of state it brought back.

With ``--gate PATH`` (a named pipe), the first request of tool ``busy`` (one with no
state) is answered only once whoever opened that pipe for writing has closed it: the
open tells that the request is here, and the close lets it be answered.
"""

from __future__ import annotations

import argparse
import json
import sys

MODERN = "2026-07-28"
FRESH = {"ttlMs": 0, "cacheScope": "private"}  # nothing of it is to be cached
p = argparse.ArgumentParser()
p.add_argument("--busy", type=int, default=3, help="retries a busy request needs")
p.add_argument("--gate", help="a named pipe the first call of busy waits on")
args = p.parse_args()


def write(rid: object, result: dict) -> None:
    line = {"jsonrpc": "2.0", "id": rid, "result": result}
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def shed(params: dict) -> tuple[dict | None, str]:
    """The input_required that sheds a request again, or None with how it came back."""
    state = params.get("requestState")
    if state is None and args.gate and params.get("name") == "busy":
        with open(args.gate) as gate:
            gate.read()
    back = int(state.removeprefix("shed-")) if isinstance(state, str) else 0
    if back < args.busy:
        return {"resultType": "input_required", "requestState": f"shed-{back + 1}"}, ""
    carried = "with" if "inputResponses" in params else "without"
    return None, f"served after {back} retries, {carried} inputResponses"


def endless(params: dict) -> dict:
    state = params.get("requestState")
    n = int(state) + 1 if isinstance(state, str) else 1
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    asked = {"mode": "form", "message": f"round {n}", "requestedSchema": schema}
    return {
        "resultType": "input_required",
        "inputRequests": {f"k{n}": {"method": "elicitation/create", "params": asked}},
        "requestState": str(n),
    }


def heavy(method: str, params: dict) -> dict:
    state = params.get("requestState")
    if isinstance(state, str):
        said = f"brought back {len(json.dumps(state))} bytes of state"
        if method == "prompts/get":
            return complete({"messages": [{"role": "user", "content": text(said)}]})
        if method == "resources/read":
            return complete({"contents": [{"uri": params["uri"], "text": said}]})
        return complete({"content": [text(said)]})
    if method == "resources/read":
        size = int(params["uri"].removeprefix("heavy://"))
    else:
        size = int(params.get("arguments", {}).get("size", 2))
    return {"resultType": "input_required", "requestState": "x" * (size - 2)}


def text(said: str) -> dict:
    return {"type": "text", "text": said}


def complete(result: dict) -> dict:
    return {"resultType": "complete", **result}


def handle(method: str, params: dict) -> dict | None:
    if method == "server/discover":
        caps = {"tools": {}, "prompts": {}, "resources": {}}
        return complete({"supportedVersions": [MODERN], "capabilities": caps, **FRESH})
    if method == "tools/list":
        schema = {"type": "object"}
        tools = [{"name": n, "inputSchema": schema} for n in ("busy", "endless", "heavy")]
        return complete({"tools": tools, **FRESH})
    if method == "prompts/list":
        heavy_prompt = {"name": "heavy", "arguments": [{"name": "size"}]}
        return complete({"prompts": [{"name": "busy"}, heavy_prompt], **FRESH})
    if method == "resources/list":
        listed = [{"uri": "shed://now", "name": "now"}]
        return complete({"resources": listed, **FRESH})
    if method == "resources/templates/list":
        template = {"uriTemplate": "heavy://{size}", "name": "heavy"}
        return complete({"resourceTemplates": [template], **FRESH})
    if method == "tools/call" and params.get("name") == "endless":
        return endless(params)
    if params.get("name") == "heavy" or str(params.get("uri")).startswith("heavy://"):
        return heavy(method, params)
    if method in ("tools/call", "prompts/get", "resources/read"):
        again, said = shed(params)
        if again is not None:
            return again
        if method == "tools/call":
            return complete({"content": [{"type": "text", "text": said}]})
        if method == "prompts/get":
            said_to = {"role": "user", "content": {"type": "text", "text": said}}
            return complete({"messages": [said_to]})
        return complete({"contents": [{"uri": "shed://now", "text": said}]})
    if method == "ping":
        return complete({})
    return None


for line in sys.stdin:
    msg = json.loads(line)
    rid = msg.get("id")
    if rid is None or "method" not in msg:
        continue
    result = handle(msg["method"], msg.get("params") or {})
    if result is None:
        error = {"code": -32601, "message": f"Method not found: {msg['method']}"}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}) + "\n")
        sys.stdout.flush()
    else:
        write(rid, result)
