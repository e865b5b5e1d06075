"""The bench's routing floor routes as it claims: a floor that passed lines through
unchanged, or lost ids, would make the figures beside mcpd's say nothing."""

from __future__ import annotations

import json
from typing import Any

from bench.splicer import Splice


def call(rid: Any, name: str, text: str = "x") -> bytes:
    params = {"name": name, "arguments": {"text": text}, "_meta": {"k": 1}}
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    ).encode()


def answer(rid: int, result: Any = None, error: Any = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
    if error is not None:
        body["error"] = error
    else:
        body["result"] = result
    return json.dumps(body).encode()


def test_a_known_name_goes_to_the_server_under_its_own_name_and_id() -> None:
    splice = Splice({"mcp__echo__echo": "echo"})
    out = splice.upstream(call("agent-7", "mcp__echo__echo", 'a "b"'))
    assert out is not None
    sent = json.loads(out)
    assert sent["params"]["name"] == "echo"
    assert sent["params"]["arguments"] == {"text": 'a "b"'}
    assert sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert isinstance(sent["id"], int)
    back = splice.downstream(answer(sent["id"], {"content": []}))
    assert json.loads(back or b"") == {"jsonrpc": "2.0", "id": "agent-7", "result": {"content": []}}


def test_an_error_goes_back_under_the_agents_id_and_other_lines_pass_unchanged() -> None:
    splice = Splice({"t": "t"})
    sent = json.loads(splice.upstream(call(3, "t")) or b"")
    err = {"code": -32602, "message": "no"}
    assert json.loads(splice.downstream(answer(sent["id"], error=err)) or b"")["id"] == 3
    other = call(4, "unknown")
    assert splice.upstream(other) == other
    listing = b'{"jsonrpc":"2.0","id":9,"method":"tools/list"}'
    assert splice.upstream(listing) == listing
    stray = answer(12345, {})
    assert splice.downstream(stray) == stray


def test_the_gate_holds_calls_beyond_it_until_an_answer_frees_a_slot() -> None:
    splice = Splice({"t": "t"}, gate=2)
    outs = [splice.upstream(call(i, "t")) for i in range(4)]
    assert [o is not None for o in outs] == [True, True, False, False]
    first = json.loads(outs[0] or b"")
    splice.downstream(answer(first["id"], {}))
    assert len(splice.released) == 1
    assert json.loads(splice.released[0])["id"] == first["id"] + 2
