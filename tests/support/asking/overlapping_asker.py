"""A legacy stdio MCP server that asks about one call twice at once: a question for the
user, then, while that is still open, a sample of the model or the workspace roots.

Tools:

- ``ask_twice`` (``second``: ``sampling`` or ``roots``; ``after_hold``: wait for a
  ``hold`` call to arrive before the second request) answers with what came back to
  both requests, as JSON ``{"form": ..., "second": ...}`` (each a result or an error);
- ``hold`` is answered once the second request of ``ask_twice`` came back;
- ``ask_after_cancel`` (``topic``; ``after_report``: wait for a ``report`` call to
  arrive first) reports progress as it starts, then, once it has read that the call
  was cancelled, asks the user about the topic, as a server that reads a cancel only
  between its steps does; it never answers the call;
- ``report`` reports progress as it starts, and is answered with what came back to
  that question, once it did;
- ``quick`` is answered at once, once the server has read a cancel;
  ``ask_after_cancel`` with ``after_quick`` (a count) asks only once that many were
  answered;
- ``ask_once`` asks the user and answers with what came back.

Its one prompt, ``confirm``, asks the user before it is given.

Plain stdlib, so it starts fast; every call runs in a thread of its own.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

PROMPT = "the private prompt of the agent that called ask_twice"

_out = threading.Lock()
_answers: dict[Any, dict[str, Any]] = {}
_answered = threading.Condition()
_held = threading.Event()  # a hold call arrived
_second_back = threading.Event()  # the second request of ask_twice came back
_cancelled: set[Any] = set()  # ids of calls the client cancelled
_reported = threading.Event()  # a report call arrived
_late: list[Any] = []  # what came back to ask_after_cancel's question
_late_back = threading.Event()
_quick: list[Any] = []  # quick calls answered


def send(obj: dict[str, Any]) -> None:
    with _out:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def result(rid: Any, text: str) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})


def ask(rid: str, method: str, params: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def came_back(rid: str) -> Any:
    with _answered:
        _answered.wait_for(lambda: rid in _answers)
        msg = _answers[rid]
    return msg.get("result", msg.get("error"))


def ask_twice(rid: Any, arguments: dict[str, Any]) -> None:
    form = f"form-{rid}"
    second = f"second-{rid}"
    ask(form, "elicitation/create", {"message": "Go on?", "requestedSchema": {"type": "object"}})
    if arguments.get("after_hold"):
        _held.wait()
    if arguments.get("second") == "roots":
        ask(second, "roots/list", {})
    else:
        message = {"role": "user", "content": {"type": "text", "text": PROMPT}}
        ask(second, "sampling/createMessage", {"messages": [message], "maxTokens": 10})
    second_answer = came_back(second)
    _second_back.set()
    result(rid, json.dumps({"form": came_back(form), "second": second_answer}))


def confirm(rid: Any) -> None:
    ask(f"form-{rid}", "elicitation/create", {"message": "Give it?", "requestedSchema": {}})
    answer = json.dumps(came_back(f"form-{rid}"))
    message = {"role": "user", "content": {"type": "text", "text": answer}}
    send({"jsonrpc": "2.0", "id": rid, "result": {"messages": [message]}})


def ask_after_cancel(rid: Any, arguments: dict[str, Any], token: Any) -> None:
    if token is not None:
        progress = {"progressToken": token, "progress": 0}
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    if arguments.get("after_report"):
        _reported.wait()
    with _answered:
        _answered.wait_for(lambda: rid in _cancelled)
        _answered.wait_for(lambda: len(_quick) >= arguments.get("after_quick", 0))
    message = f"Publish the draft about {arguments.get('topic')}?"
    ask(f"late-{rid}", "elicitation/create", {"message": message, "requestedSchema": {}})
    _late.append(came_back(f"late-{rid}"))
    _late_back.set()


def report(rid: Any, token: Any) -> None:
    if token is not None:
        progress = {"progressToken": token, "progress": 0}
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    _reported.set()
    _late_back.wait()
    result(rid, json.dumps(_late[-1]))


def ask_once(rid: Any) -> None:
    ask(f"once-{rid}", "elicitation/create", {"message": "Go on?", "requestedSchema": {}})
    result(rid, json.dumps(came_back(f"once-{rid}")))


def quick(rid: Any) -> None:
    with _answered:
        _answered.wait_for(lambda: bool(_cancelled))
        result(rid, "quick")
        _quick.append(rid)
        _answered.notify_all()


def hold(rid: Any) -> None:
    _held.set()
    _second_back.wait()
    result(rid, "held")


TOOLS = [
    {"name": "ask_twice", "description": "asks twice at once", "inputSchema": {"type": "object"}},
    {"name": "hold", "description": "waits for ask_twice", "inputSchema": {"type": "object"}},
    {"name": "ask_after_cancel", "description": "asks late", "inputSchema": {"type": "object"}},
    {"name": "report", "description": "what came back late", "inputSchema": {"type": "object"}},
    {"name": "ask_once", "description": "asks once", "inputSchema": {"type": "object"}},
    {"name": "quick", "description": "answers at once", "inputSchema": {"type": "object"}},
]


def handle(msg: dict[str, Any]) -> None:
    method = msg.get("method")
    rid = msg.get("id")
    params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
    if method is None and rid is not None:
        with _answered:
            _answers[rid] = msg
            _answered.notify_all()
    elif method == "notifications/cancelled":
        with _answered:
            _cancelled.add(params.get("requestId"))
            _answered.notify_all()
    elif rid is None:
        return
    elif method == "initialize":
        info = {"name": "overlapping-asker", "version": "1"}
        caps = {"tools": {}, "prompts": {}}
        reply = {"protocolVersion": "2025-06-18", "capabilities": caps, "serverInfo": info}
        send({"jsonrpc": "2.0", "id": rid, "result": reply})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "prompts/list":
        prompts = [{"name": "confirm", "description": "asks first"}]
        send({"jsonrpc": "2.0", "id": rid, "result": {"prompts": prompts}})
    elif method == "prompts/get":
        threading.Thread(target=confirm, args=(rid,), daemon=True).start()
    elif method == "tools/call" and params.get("name") == "ask_twice":
        arguments = params.get("arguments") or {}
        threading.Thread(target=ask_twice, args=(rid, arguments), daemon=True).start()
    elif method == "tools/call" and params.get("name") == "hold":
        threading.Thread(target=hold, args=(rid,), daemon=True).start()
    elif method == "tools/call" and params.get("name") == "ask_after_cancel":
        arguments = params.get("arguments") or {}
        token = (params.get("_meta") or {}).get("progressToken")
        threading.Thread(target=ask_after_cancel, args=(rid, arguments, token), daemon=True).start()
    elif method == "tools/call" and params.get("name") == "quick":
        threading.Thread(target=quick, args=(rid,), daemon=True).start()
    elif method == "tools/call" and params.get("name") in ("report", "ask_once"):
        token = (params.get("_meta") or {}).get("progressToken")
        work, args = (
            (report, (rid, token)) if params.get("name") == "report" else (ask_once, (rid,))
        )
        threading.Thread(target=work, args=args, daemon=True).start()
    else:
        error = {"code": -32601, "message": str(method)}
        send({"jsonrpc": "2.0", "id": rid, "error": error})


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            handle(json.loads(line))


main()
