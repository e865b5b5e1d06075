"""The tools/call fast path and the general path give an agent the same bytes.

2,000 randomized calls (sizes around the budget, unicode, escapes, large numbers,
nested ``_meta``, progress tokens, odd formatting, bad arguments, unknown tools) go
through one daemon twice, once with the fast path off; what each agent reads, and
what each server was sent (the mirror tool echoes it), must be equal as JSON. The
servers: a stdio one of each era and a 2026-07-28 one over HTTP (JSON bodies, and SSE
when a call has a progress token), whose mirror shows its request headers too.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.jsonrpc import splice
from tests.support.clients.agent import MODERN, make_config, running
from tests.support.http_servers.serving import Responder, SeenRequest, event, serve_http
from tests.support.parts.splicing import record_spliced_requests
from tests.support.system.procs import scripted

CALLS = 1000  # per agent; two agents (one modern, one legacy)
BUDGET = 2000
TEXT = 'ab "\\/\n\t\x01\u2028é😀\u00a0<>&'


def text(rng: random.Random) -> str:
    n = rng.choice([0, 1, 5, 40, BUDGET // 2, BUDGET - 60, BUDGET + 50, 4000])
    return "".join(rng.choice(TEXT) for _ in range(n))


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([0, -1, 2**53 + 1, 2**63 - 1, -(2**63), 10**30])
    if kind == 1:
        return rng.choice([0.1, -2.5e-300, 1.7976931348623157e308, 3.0])
    if kind == 2:
        return rng.choice([True, False, None])
    if kind in (3, 4, 5):
        return text(rng) if rng.random() < 0.3 else "".join(rng.choice(TEXT) for _ in range(8))
    if kind in (6, 7):
        return {f"k{i}{rng.choice(TEXT)}": value(rng, depth + 1) for i in range(rng.randrange(4))}
    return [value(rng, depth + 1) for _ in range(rng.randrange(4))]


def call_line(rng: random.Random, rid: Any, modern: bool, token: str | int | None) -> bytes:
    name = rng.choices(
        ["mcp__m__mirror", "mcp__l__mirror", "mcp__h__mirror", "mcp__m__nope"], [7, 7, 7, 1]
    )[0]
    params: dict[str, Any] = {"name": name}
    shape = rng.random()
    if shape < 0.85:
        args = {"text": text(rng), "n": value(rng), "deep": value(rng)}
        if rng.random() < 0.1:
            args["fail"] = True
        params["arguments"] = args
    elif shape < 0.92:
        params["arguments"] = None
    elif shape < 0.96:
        params["arguments"] = rng.choice([[1, 2], "text", 3])  # not an object: refused
    meta: dict[str, Any] = {}
    if modern:
        meta["io.modelcontextprotocol/protocolVersion"] = MODERN
        meta["io.modelcontextprotocol/clientCapabilities"] = {}
    if token is not None:
        meta["progressToken"] = token
    if rng.random() < 0.4:
        meta["com.example/trace"] = {"span": value(rng), "tags": [value(rng)]}
    if meta:
        params["_meta"] = meta
    envelope: list[tuple[str, Any]] = [
        ("jsonrpc", "2.0"),
        ("id", rid),
        ("method", "tools/call"),
        ("params", params),
    ]
    rng.shuffle(envelope)
    spacing = rng.choice([(",", ":"), (", ", ": "), (" ,", " : ")])
    return json.dumps(dict(envelope), ensure_ascii=rng.random() < 0.5, separators=spacing).encode()


def plan(seed: int, modern: bool) -> list[bytes]:
    rng = random.Random(seed)
    lines = []
    for i in range(CALLS):
        rid: Any = rng.choice([i, f"call-{i}-é", 2**62 + i, -i - 1])
        token = rng.choice([None, None, f"tok-{i}", 10**6 + i])
        lines.append(call_line(rng, rid, modern, token))
    return lines


async def run_agent(path: str, lines: list[bytes], modern: bool) -> list[Any]:
    """Every line the agent reads, decoded, with the calls pipelined 16 at a time."""
    stream = await trio.open_unix_socket(path)
    got: list[Any] = []
    buf = b""

    async def read_until(count: int) -> None:
        nonlocal buf
        while sum(1 for m in got if "id" in m) < count:
            data = await stream.receive_some(1 << 16)
            assert data, "the daemon closed the connection"
            buf += data
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                got.append(json.loads(line))

    async with stream:
        if not modern:
            hello = {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}},
            }
            await stream.send_all(json.dumps(hello).encode() + b"\n")
            await read_until(1)
            got.clear()
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await stream.send_all(json.dumps(note).encode() + b"\n")
        for start in range(0, len(lines), 16):
            batch = lines[start : start + 16]
            await stream.send_all(b"".join(line + b"\n" for line in batch))
            await read_until(start + len(batch))
    return got


def by_call(messages: list[Any]) -> dict[str, Any]:
    """Replies by id, progress notifications by token (each call has its own)."""
    out: dict[str, Any] = {}
    for msg in messages:
        if "id" in msg:
            key = f"reply {msg['id']!r}"
            assert key not in out, f"two replies to {msg['id']!r}"
            out[key] = msg
        else:
            token = msg["params"]["progressToken"]
            out.setdefault(f"progress {token!r}", []).append(msg)
    return out


async def both_agents(path: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:

        async def one(modern: bool) -> None:
            got = await run_agent(path, plan(7 if modern else 8, modern), modern)
            seen["modern" if modern else "legacy"] = by_call(got)

        nursery.start_soon(one, True)
        nursery.start_soon(one, False)
    return seen


MIRROR_TOOL = {"name": "mirror", "inputSchema": {"type": "object"}}
SEEN_HEADERS = ("mcp-method", "mcp-name", "mcp-protocol-version", "content-type")


async def http_mirror(req: SeenRequest, respond: Responder) -> None:
    """A 2026-07-28 server over HTTP with the scripted server's mirror tool."""
    msg = req.message
    rid, params = msg.get("id"), msg.get("params") or {}
    if rid is None:
        await respond.reply(202)
        return
    value: dict[str, Any]
    if msg["method"] == "server/discover":
        value = {"supportedVersions": [MODERN], "capabilities": {"tools": {}}, "ttlMs": 0}
    elif msg["method"] == "tools/list":
        value = {"tools": [MIRROR_TOOL], "ttlMs": 600_000}
    else:
        seen = dict(params, _meta=dict(params.get("_meta") or {}))
        token = seen["_meta"].get("progressToken")
        if token is not None:
            seen["_meta"]["progressToken"] = "(a token)"
        seen["headers"] = {k: req.header(k) for k in SEEN_HEADERS}
        text = json.dumps(seen, sort_keys=True, ensure_ascii=False)
        arguments = params.get("arguments") or {}
        value = {"content": [{"type": "text", "text": text}], "structuredContent": arguments}
        if arguments.get("fail"):
            value["isError"] = True
        if token is not None:
            note = {"progressToken": token, "progress": 1, "total": 1, "message": "step 1"}
            progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": note}
            reply = {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", **value}}
            await respond.sse(event(progress), event(reply))
            return
    await respond.json({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", **value}})


def mirrored(text: str) -> dict[str, Any]:
    """What a mirror tool was sent, or {} for a cut or another text."""
    try:
        seen = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return seen if isinstance(seen, dict) else {}


async def test_fast_and_general_paths_give_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cmd, args = scripted("--names", "mirror", "--progress", "2")
    legacy_cmd, legacy_args = scripted("--names", "mirror", "--progress", "1", "--era", "legacy")
    async with serve_http(http_mirror) as web:
        await compare_paths(tmp_path, monkeypatch, cmd, args, legacy_cmd, legacy_args, web.url())


async def compare_paths(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cmd: str,
    args: tuple[str, ...],
    legacy_cmd: str,
    legacy_args: tuple[str, ...],
    web: str,
) -> None:
    cfg = make_config(
        tmp_path,
        {
            "m": {"command": cmd, "args": list(args)},
            "l": {"command": legacy_cmd, "args": list(legacy_args)},
            "h": {"url": web},
        },
        result_budget_chars=BUDGET,
        health_interval=0,
    )
    spliced = {"decoded": 0, "replies": 0, "http": 0}
    decode, reply = splice.decode_call, splice.reply
    body = splice.SplicedCall.body

    def counting_decode(line: bytes) -> Any:
        call = decode(line)
        spliced["decoded"] += call is not None
        return call

    def counting_reply(agent_id: Any, result: Any) -> Any:
        spliced["replies"] += 1
        return reply(agent_id, result)

    def counting_body(call: splice.SplicedCall, rid: int) -> Any:
        spliced["http"] += 1
        return body(call, rid)

    monkeypatch.setattr(splice, "decode_call", counting_decode)
    monkeypatch.setattr(splice, "reply", counting_reply)
    monkeypatch.setattr(splice.SplicedCall, "body", counting_body)
    requests = record_spliced_requests(monkeypatch)
    with trio.fail_after(120):
        async with running(cfg) as daemon:
            quick = await both_agents(daemon.socket_path)
        took = dict(spliced, requests=len(requests))
        took["tokens"] = sum(token is not None for token in requests)
        async with running(cfg, splice=False) as daemon:
            general = await both_agents(daemon.socket_path)
    # The splice really ran, both ways (ASCII lines without a CR; calls with nothing of
    # the agent's own in _meta; results that pass as they came), and only the first time.
    assert took["decoded"] > 500 and took["requests"] > 400 and took["replies"] > 500, took
    assert took["tokens"] > 100, took  # progress tokens are spliced too
    assert took["http"] > 200, took  # HTTP request bodies too
    assert dict(spliced, requests=len(requests)).items() <= took.items(), (spliced, requests)
    for era in ("modern", "legacy"):
        assert len([k for k in quick[era] if k.startswith("reply")]) == CALLS
        assert quick[era].keys() == general[era].keys()
        for key, reply in quick[era].items():
            assert reply == general[era][key], f"{era} {key} differs"
    replies = [v for era in quick.values() for k, v in era.items() if k.startswith("reply")]
    # The plan reaches every outcome: results, cut results, tool errors, refusals.
    texts = [r["result"]["content"][-1]["text"] for r in replies if "result" in r]
    assert any("more characters were cut" in t for t in texts)
    assert any(r.get("result", {}).get("isError") for r in replies)
    assert any("error" in r for r in replies)
    assert any('"com.example/trace"' in t for t in texts)
    assert any(k.startswith("progress") for era in quick.values() for k in era)
    # Over HTTP, with its headers, whether the call took an SSE stream or a JSON body.
    seen = [m for m in map(mirrored, texts) if "headers" in m]
    assert any("progressToken" in m["_meta"] for m in seen)
    assert any("progressToken" not in m["_meta"] for m in seen)
    assert all(m["headers"]["mcp-name"] == "mirror" for m in seen)
