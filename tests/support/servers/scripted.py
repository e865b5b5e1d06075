"""A stdio MCP server whose misbehaviour is chosen on the command line, for tests.

Plain stdlib so it starts fast; each flag turns on one behaviour a real server has
been seen to have (or one that tests need to provoke).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

MODERN = "2026-07-28"

p = argparse.ArgumentParser()
p.add_argument(
    "--era", choices=["both", "modern", "legacy", "legacy-silent", "legacy-dies"], default="both"
)
p.add_argument("--tools", type=int, default=3)
p.add_argument("--names", help="comma-separated tool names instead of tool0..N")
p.add_argument("--page-size", type=int, default=0)
p.add_argument(
    "--new-descriptions", action="store_true", help="descriptions change with every tools/list"
)
p.add_argument("--empty-first-cursor", action="store_true")
p.add_argument("--repeat-cursor", action="store_true")
p.add_argument("--garbage", action="store_true", help="print non-JSON lines between messages")
p.add_argument("--bom", action="store_true", help="start stdout with a UTF-8 byte order mark")
p.add_argument(
    "--malformed-reply",
    choices=["utf8", "deep", "json", "request"],
    help="answer tools/call with a line that cannot be decoded (request: first send a "
    "broken request of the server's own under the call's id, then the answer)",
)
p.add_argument("--noise", help="a line of plain text written before each message")
p.add_argument("--deaf", action="store_true", help="never read stdin")
p.add_argument("--notify-before", action="store_true", help="notifications before each response")
p.add_argument("--trickle", action="store_true", help="write responses a few bytes at a time")
p.add_argument("--die-on-call", action="store_true")
p.add_argument(
    "--last-words",
    help="with --die-on-call: a helper writes this to stderr just after the server exits "
    "(a traceback's last line that is still in flight as the exit is seen)",
)
p.add_argument(
    "--die-saying",
    help="with --die-on-call: these lines (separated by newlines) on stderr as it dies",
)
p.add_argument("--die-status", type=int, default=3, help="with --die-on-call: its exit status")
p.add_argument(
    "--fork-until-refused",
    action="store_true",
    help="with --die-on-call: first start sleeping children until a fork fails",
)
p.add_argument("--hang-on-call", action="store_true")
p.add_argument("--slow", type=float, default=0.0, help="seconds before answering tools/call")
p.add_argument("--big", type=int, default=0, help="size of the text tools/call returns")
p.add_argument(
    "--id-last", action="store_true", help="write results as {result, jsonrpc, id} (TS SDK order)"
)
p.add_argument("--grandchild", action="store_true", help="spawn a child holding stdout open")
p.add_argument(
    "--setsid-helper",
    help="fork a helper that calls setsid() (leaving the process group) and sleeps; "
    "its pid is written to this file",
)
p.add_argument(
    "--bare-helper",
    help="as --setsid-helper, through a second fork and with its environment cleared "
    "(no start mark); its pid is written to this file",
)
p.add_argument("--ignore-sigterm", action="store_true")
p.add_argument("--linger", action="store_true", help="keep running after stdin EOF")
p.add_argument("--close-stdout-on-call", action="store_true")
p.add_argument("--pid-file")
p.add_argument("--stderr-banner", default="scripted server starting")
p.add_argument("--start-delay", type=float, default=0.0)
p.add_argument(
    "--initialize-error", type=int, default=-32022, help="the error code --era modern answers"
)
p.add_argument("--ping-first", action="store_true", help="send a ping request after initialize")
p.add_argument(
    "--unsupported-version",
    action="store_true",
    help="answer the first discover with -32022 listing the real version",
)
p.add_argument("--log-file", help="append every line received on stdin to this file")
p.add_argument(
    "--ask-first",
    action="store_true",
    help="prompts/get and resources/read ask the user's name first, as the tool ask does",
)
p.add_argument(
    "--ask-params",
    help="the params of the name question, as JSON in place of a well-formed form "
    "(null: the question has no params at all)",
)
p.add_argument(
    "--listen-end",
    choices=["graceful", "empty", "cancel"],
    help="offer tools.listChanged; end each subscriptions/listen this way "
    "(graceful: the final result with the subscription id in _meta; empty: without it)",
)
p.add_argument(
    "--progress",
    type=int,
    default=0,
    help="send this many progress notifications before each tools/call answer",
)
p.add_argument(
    "--discover-error", type=int, default=-32601, help="the error code --era legacy answers"
)
p.add_argument(
    "--malformed-tool", action="store_true", help="list a tool whose name is not a string"
)
p.add_argument("--instructions", default="scripted", help="what the server tells models")
p.add_argument("--extra-tools", help="a JSON array of tool definitions listed after the others")
p.add_argument("--prompts", type=int, default=0, help="offer and list this many prompts")
p.add_argument(
    "--templates", type=int, default=0, help="offer resources, listing this many templates"
)
p.add_argument(
    "--long-description",
    type=int,
    default=0,
    help="tool0's description is this many bytes of three-byte characters (too big for argv)",
)
p.add_argument("--long-instructions", type=int, default=0, help="instructions of this many bytes")
p.add_argument("--utf8", action="store_true", help="write non-ASCII text as is, not escaped")
p.add_argument(
    "--out-of-range",
    action="store_true",
    help="prompts/get and resources/read results, and tools linked and long, hold a number "
    "no double holds (1e400)",
)
args = p.parse_args()
# Written in place of this string: Python's json writes no number past a double's range.
OUT_OF_RANGE = "<1e400>"

out_lock = threading.Lock()
state = {"era": None, "discover_count": 0, "lists": 0, "bom": args.bom}


def write(obj: dict) -> None:
    text = json.dumps(obj, ensure_ascii=not args.utf8)
    if args.out_of_range:
        text = text.replace(json.dumps(OUT_OF_RANGE), "1e400")
    data = (text + "\n").encode()
    with out_lock:
        if state["bom"]:
            state["bom"] = False
            data = b"\xef\xbb\xbf" + data
        if args.garbage:
            sys.stdout.buffer.write(b"** scripted server says hello **\n")
        if args.noise:
            sys.stdout.buffer.write(args.noise.encode() + b"\n")
        if args.trickle:
            for i in range(0, len(data), 7):
                sys.stdout.buffer.write(data[i : i + 7])
                sys.stdout.buffer.flush()
                time.sleep(0.001)
        else:
            sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def out_of_range() -> dict:
    return {"_meta": {"n": OUT_OF_RANGE}} if args.out_of_range else {}


def out_of_range_result(rid, name: str, arguments: dict) -> None:
    """A link (``linked``) or a text past any budget (``long``) beside structured content
    holding a number no double holds; with ``in_content``, the block holds one too."""
    link = {"type": "resource_link", "uri": "file:///a", "name": "a"}
    block = link if name == "linked" else {"type": "text", "text": "x" * 20000}
    if arguments.get("in_content"):
        block["_meta"] = {"n": OUT_OF_RANGE}
    result(rid, {"content": [block], "structuredContent": {"c": OUT_OF_RANGE}})


def result(rid, res: dict) -> None:
    if state["era"] == "modern":
        res.setdefault("resultType", "complete")
    if args.id_last:
        write({"result": res, "jsonrpc": "2.0", "id": rid})
    else:
        write({"jsonrpc": "2.0", "id": rid, "result": res})


def error(rid, code: int, message: str, data=None) -> None:
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    write({"jsonrpc": "2.0", "id": rid, "error": err})


def capabilities() -> dict:
    caps: dict = {"tools": {"listChanged": True} if args.listen_end else {}}
    if args.prompts:
        caps["prompts"] = {}
    if args.templates:
        caps["resources"] = {}
    if args.prompts or args.templates:
        caps["completions"] = {}
    return caps


def instructions() -> str:
    return "i" * args.long_instructions if args.long_instructions else args.instructions


def tool_defs() -> list[dict]:
    names = args.names.split(",") if args.names else [f"tool{i}" for i in range(args.tools)]
    tools = [
        {
            "name": name,
            "description": f"test tool {i}"
            + (f" (list {state['lists']})" if args.new_descriptions else ""),
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "annotations": {"readOnlyHint": True},
        }
        for i, name in enumerate(names)
    ]
    if args.long_description and tools:
        tools[0]["description"] = "\u20ac" * (args.long_description // 3)
    if args.malformed_tool:
        tools.insert(1, {"name": 42, "inputSchema": {"type": "object"}})
    if args.extra_tools:
        tools += json.loads(args.extra_tools)
    return tools


def list_tools(rid, params: dict) -> None:
    if params.get("cursor") is None:
        state["lists"] += 1
    list_page(rid, params, "tools", tool_defs())


def list_page(rid, params: dict, key: str, tools: list[dict]) -> None:
    if not args.page_size:
        result(rid, {key: tools})
        return
    cursor = params.get("cursor")
    if cursor is None:
        start = 0
    elif cursor == "" and args.empty_first_cursor:
        start = args.page_size
    elif args.repeat_cursor:
        start = 0
    else:
        start = int(cursor)
    page = tools[start : start + args.page_size]
    res: dict = {key: page}
    nxt = start + args.page_size
    if nxt < len(tools):
        res["nextCursor"] = "" if (start == 0 and args.empty_first_cursor) else str(nxt)
        if args.repeat_cursor:
            res["nextCursor"] = "again"
    result(rid, res)


def listen(rid, params: dict) -> None:
    """Acknowledge a subscription, then end it shortly after, the way chosen."""
    tag = {"io.modelcontextprotocol/subscriptionId": rid}
    honoured = (
        {"toolsListChanged": True}
        if params.get("notifications", {}).get("toolsListChanged")
        else {}
    )
    write(
        {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": tag, "notifications": honoured},
        }
    )

    def end() -> None:
        time.sleep(0.2)
        if args.listen_end == "graceful":
            result(rid, {"resultType": "complete", "_meta": tag})
        elif args.listen_end == "empty":
            result(rid, {})
        else:
            write(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": rid, "reason": "server shutting the stream"},
                }
            )

    threading.Thread(target=end, daemon=True).start()


def ask(rid, params: dict) -> None:
    """A tool that needs the user's name first (2026-07-28 input_required)."""
    if not asked_name(rid, params):
        name = params["inputResponses"].get("login", {}).get("content", {}).get("name", "?")
        state = params.get("requestState")
        result(rid, {"content": [{"type": "text", "text": f"hello {name} ({state})"}]})


def asked_name(rid, params: dict) -> bool:
    """Whether the request is answered with input_required, asking the user's name
    (it brings no answers yet)."""
    if params.get("inputResponses") is None:
        question: dict = {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "GitHub user?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                },
            },
        }
        if args.ask_params is not None:
            question["params"] = json.loads(args.ask_params)
            if question["params"] is None:
                del question["params"]
        result(
            rid,
            {
                "resultType": "input_required",
                "requestState": "state-\u00e9-1",
                "inputRequests": {"login": question},
            },
        )
        return True
    return False


def malformed_reply(rid) -> None:
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode()
    body = {
        "utf8": b',"result":{"content":[{"type":"text","text":"bad \xff\xfe"}]}}',
        "deep": b',"result":{"structuredContent":' + b'{"a":[' * 5000 + b"1" + b"]}" * 5000 + b"}}",
        "json": b',"result":{"content":[{"type":"text","text":"x"}],"isError":nope}}',
        "request": b',"method":"sampling/createMessage","params":{"note":"\xff"}}',
    }[args.malformed_reply]
    with out_lock:
        sys.stdout.buffer.write(head + body + b"\n")
        sys.stdout.buffer.flush()


def fork_until_refused() -> None:
    """Children that sleep until the server's group is killed, as many as it may start."""
    try:
        while os.fork() != 0:
            pass
    except OSError:
        return
    time.sleep(60)
    os._exit(0)


def call_tool(rid, params: dict) -> None:
    if args.die_on_call:
        if args.fork_until_refused:
            fork_until_refused()
        print(args.die_saying or "dying on purpose", file=sys.stderr, flush=True)
        if args.last_words and os.fork() == 0:
            os.close(1)
            time.sleep(0.1)
            os.write(2, args.last_words.encode() + b"\n")
            os._exit(0)
        os._exit(args.die_status)
    if args.hang_on_call:
        return
    if args.close_stdout_on_call:
        sys.stdout.close()
        os.close(1)
        return
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if args.malformed_reply:
        malformed_reply(rid)
        if args.malformed_reply != "request":
            return

    def answer() -> None:
        if args.slow:
            time.sleep(args.slow)
        if name == "rpc_error":
            code = arguments.get("code", -32602)
            said = arguments.get("message", "invalid arguments for rpc_error")
            error(rid, code, said, arguments.get("data"))
            return
        if name == "typed":  # a result whose resultType the arguments choose
            text = [{"type": "text", "text": "typed"}]
            result(rid, {"resultType": arguments.get("kind"), "content": text})
            return
        if name == "fail":
            result(rid, {"content": [{"type": "text", "text": "it failed"}], "isError": True})
            return
        if name == "ask":
            ask(rid, params)
            return
        token = (params.get("_meta") or {}).get("progressToken")
        for i in range(args.progress if token is not None else 0):
            write(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {
                        "progressToken": token,
                        "progress": i + 1,
                        "total": args.progress,
                        "message": f"step {i + 1}",
                    },
                }
            )
        if name == "mirror":
            # What the server was sent, so a test can see the request as well as the
            # reply; the token is mcpd's own per call, so only its presence is shown.
            seen = dict(params, _meta=dict(params.get("_meta") or {}))
            if "progressToken" in seen["_meta"]:
                seen["_meta"]["progressToken"] = "(a token)"
            text = json.dumps(seen, sort_keys=True, ensure_ascii=False)
            res = {"content": [{"type": "text", "text": text}], "structuredContent": arguments}
            if arguments.get("fail"):
                res["isError"] = True
            result(rid, res)
            return
        if args.out_of_range and name in ("linked", "long"):
            out_of_range_result(rid, name, arguments)
            return
        big = args.big and arguments.get("big", True)
        text = "x" * args.big if big else f"{name}:{arguments.get('text', '')}"
        result(rid, {"content": [{"type": "text", "text": text}]})

    if args.slow:
        threading.Thread(target=answer, daemon=True).start()
    else:
        answer()


def handle(msg: dict) -> None:
    method = msg.get("method")
    rid = msg.get("id")
    params = msg.get("params") or {}
    if rid is None:
        return
    if args.notify_before:
        write(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": f"about to answer {rid}"},
            }
        )
    if method == "server/discover":
        if args.era in ("legacy-silent",):
            return
        if args.era == "legacy-dies":
            os._exit(1)
        if args.era == "legacy":
            error(rid, args.discover_error, "Method not found")
            return
        state["discover_count"] += 1
        if args.unsupported_version and state["discover_count"] == 1:
            error(
                rid,
                -32022,
                "Unsupported protocol version",
                {"supported": [MODERN], "requested": "x"},
            )
            return
        state["era"] = "modern"
        result(
            rid,
            {
                "supportedVersions": [MODERN],
                "capabilities": capabilities(),
                "ttlMs": 0,
                "cacheScope": "private",
                "instructions": instructions(),
            },
        )
    elif method == "initialize":
        if args.era == "modern":
            code = args.initialize_error
            error(rid, code, "modern only", {"supported": [MODERN]} if code == -32022 else None)
            return
        state["era"] = "legacy"
        asked = params.get("protocolVersion")
        version = asked if asked in ("2025-11-25", "2025-06-18", "2025-03-26") else "2025-11-25"
        result(
            rid,
            {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "1"},
            },
        )
        if args.ping_first:
            write({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
    elif method == "tools/list":
        list_tools(rid, params)
    elif method == "prompts/list" and args.prompts:
        prompts = [{"name": f"prompt{i}", "description": "a prompt"} for i in range(args.prompts)]
        list_page(rid, params, "prompts", prompts)
    elif method == "resources/list" and args.templates:
        result(rid, {"resources": []})
    elif method == "resources/templates/list" and args.templates:
        templates = [
            {"uriTemplate": f"test://t{i}/{{x}}", "name": f"t{i}"} for i in range(args.templates)
        ]
        list_page(rid, params, "resourceTemplates", templates)
    elif method in ("prompts/get", "resources/read") and args.ask_first and asked_name(rid, params):
        pass
    elif method == "prompts/get" and args.prompts:
        text = f"{params.get('name')}: {json.dumps(params.get('arguments') or {})}"
        message = {"role": "user", "content": {"type": "text", "text": text}}
        result(rid, {"messages": [message], **out_of_range()})
    elif method == "resources/read" and args.templates:
        uri = params.get("uri")
        content = {"uri": uri, "mimeType": "text/plain", "text": f"read {uri}"}
        result(rid, {"contents": [content], **out_of_range()})
    elif method == "completion/complete" and (args.prompts or args.templates):
        value = (params.get("argument") or {}).get("value", "")
        result(rid, {"completion": {"values": [value + "1", value + "2"], "hasMore": False}})
    elif method == "tools/call":
        call_tool(rid, params)
    elif method == "ping":
        result(rid, {})
    elif method == "subscriptions/listen" and args.listen_end:
        listen(rid, params)
    else:
        error(rid, -32601, f"Method not found: {method}")


def pid_record(pid: int) -> str:
    """Its pid and PID namespace (``tests.support.system.procs.pid_record``)."""
    return f"{pid} {os.readlink('/proc/self/ns/pid')}"


def start_setsid_helper(pid_file: str) -> None:
    """A daemonizing helper: its own session, none of the server's pipes."""
    if os.fork() != 0:
        return
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    with open(pid_file + ".tmp", "w") as f:
        f.write(pid_record(os.getpid()))
    os.rename(pid_file + ".tmp", pid_file)
    time.sleep(600)
    os._exit(0)


# The bare helper: a program of its own, so that nothing of the server's environment
# reaches it.
BARE = (
    "import os, sys, time\n"
    "path = sys.argv[1]\n"
    "with open(path + '.tmp', 'w') as f:\n"
    "    f.write(f\"{os.getpid()} {os.readlink('/proc/self/ns/pid')}\")\n"
    "os.rename(path + '.tmp', path)\n"
    "time.sleep(600)\n"
)


def start_bare_helper(pid_file: str) -> None:
    """A helper in a session of its own, its parent gone, without the start mark."""
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.execve(sys.executable, [sys.executable, "-c", BARE, pid_file], {})


def main() -> None:
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.pid_file:
        with open(args.pid_file + ".tmp", "w") as f:
            f.write(pid_record(os.getpid()))
        os.rename(args.pid_file + ".tmp", args.pid_file)
    if args.grandchild:
        child = subprocess.Popen(["sleep", "600"], stdout=sys.stdout, stderr=subprocess.DEVNULL)
        with open(args.pid_file + ".child" if args.pid_file else os.devnull, "w") as f:
            f.write(pid_record(child.pid))
    if args.setsid_helper:
        start_setsid_helper(args.setsid_helper)
    if args.bare_helper:
        start_bare_helper(args.bare_helper)
    print(args.stderr_banner, file=sys.stderr, flush=True)
    if args.start_delay:
        time.sleep(args.start_delay)
    while args.deaf:
        time.sleep(60)
    log = open(args.log_file, "ab", buffering=0) if args.log_file else None  # noqa: SIM115
    for line in sys.stdin.buffer:
        line = line.strip()
        if not line:
            continue
        if log is not None:
            log.write(line + b"\n")
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("method") == "notifications/cancelled":
            print(f"cancelled {msg.get('params')}", file=sys.stderr, flush=True)
            continue
        if isinstance(msg, dict) and "method" not in msg:
            print(f"client answered {msg}", file=sys.stderr, flush=True)
            continue
        handle(msg)
    if args.linger:
        print("stdin closed, lingering", file=sys.stderr, flush=True)
        while True:
            time.sleep(60)
    print("stdin closed, exiting", file=sys.stderr, flush=True)


main()
