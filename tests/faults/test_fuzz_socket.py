"""Hypothesis drives the agent socket of a running daemon: each example is one connection
sending a generated mix of requests (every method, odd ids and params), notifications,
responses, invalid requests and garbage. Every request must be answered exactly once
under its id, every line that could not be read once under a null id, nothing else
answered; the daemon must stay up and within its memory bound throughout.

The examples are derandomized and bounded, so the run is the same in CI every time.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from protocol.jsonrpc.messages import MAX_ID_LENGTH, MAX_INT_ID, MIN_INT_ID
from tests.support.daemons.fault_harness import META, Case, run_case

EXAMPLES = 400
HTTP_START = re.compile(rb"[A-Z]{1,7}(?: |\Z)")

# Methods that hold a request open or change the daemon are left out: a subscription
# is answered only when it ends, and reload is tested elsewhere.
METHODS = st.sampled_from(
    [
        "ping",
        "tools/list",
        "tools/call",
        "server/discover",
        "initialize",
        "mcpd/status",
        "resources/list",
        "no/such/method",
        "",
    ]
) | st.text(max_size=12).filter(lambda m: m not in ("subscriptions/listen", "mcpd/reload"))
TOOL_NAMES = st.sampled_from(["mcp__steady__echo", "mcp__steady__nope", "", "mcp__x__y"]) | st.text(
    max_size=30
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)


@st.composite
def params(draw: st.DrawFn, method: str) -> Any:
    choice = draw(st.sampled_from(["meta", "meta", "none", "json", "call"]))
    if choice == "none":
        return None
    if choice == "json":
        return draw(JSON)
    p: dict[str, Any] = {"_meta": dict(META)} if draw(st.booleans()) or choice == "meta" else {}
    if method == "tools/call" or choice == "call":
        p["name"] = draw(TOOL_NAMES)
        p["arguments"] = draw(
            st.one_of(st.fixed_dictionaries({"text": st.text(max_size=20)}), JSON)
        )
    if method == "initialize":
        p.update(
            protocolVersion=draw(st.sampled_from(["2025-11-25", "2025-03-26", "1999-01-01"])),
            capabilities={},
            clientInfo={"name": "fuzz", "version": "0"},
        )
    if method == "tools/list" and draw(st.booleans()):
        p["cursor"] = draw(st.text(max_size=12))
    return p


@st.composite
def lines(draw: st.DrawFn) -> list[tuple[bytes, Any]]:
    """(line, expected reply id) pairs; ``...`` means no reply is due."""
    out: list[tuple[bytes, Any]] = []
    for n in range(draw(st.integers(1, 12))):
        kind = draw(
            st.sampled_from(
                ["request"] * 5 + ["notification", "response", "bad_request", "bad_id", "garbage"]
            )
        )
        rid: Any = draw(
            st.sampled_from(
                [n, f"id-{n}", 10**30 + n, -(10**20) - n, f"é-{n}", f"{'x' * 2000}{n}", str(n)]
            )
        )
        # An id past its bounds (a long string, an integer past 64 bits) is refused under
        # a null id: it is neither kept nor echoed.
        too_long = isinstance(rid, str) and len(rid) > MAX_ID_LENGTH
        too_big = isinstance(rid, int) and not MIN_INT_ID <= rid <= MAX_INT_ID
        due = None if too_long or too_big else rid
        method = draw(METHODS)
        if kind == "request":
            msg = {"jsonrpc": "2.0", "id": rid, "method": method}
            p = draw(params(method))
            if p is not None:
                msg["params"] = p
            out.append((json.dumps(msg).encode(), due))
        elif kind == "notification":
            method = draw(
                st.sampled_from(["notifications/initialized", "notifications/cancelled", "x/y"])
            )
            note = {"jsonrpc": "2.0", "method": method, "params": {"requestId": "nobody"}}
            out.append((json.dumps(note).encode(), ...))
        elif kind == "response":
            answer = {"jsonrpc": "2.0", "id": rid, "result": draw(JSON)}
            out.append((json.dumps(answer).encode(), ...))
        elif kind == "bad_request":
            bad = {"jsonrpc": draw(st.sampled_from(["1.0", 2, None])), "id": rid, "method": method}
            if draw(st.booleans()):
                bad = {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": draw(st.one_of(st.integers(), st.none())),
                }
            out.append((json.dumps(bad).encode(), due))
        elif kind == "bad_id":
            bad_id = draw(st.sampled_from([1.5, True, None, [1], {"a": 1}]))
            msg = {"jsonrpc": "2.0", "id": bad_id, "method": method}
            out.append((json.dumps(msg).encode(), None))
        else:
            junk = draw(st.binary(min_size=1, max_size=200)).replace(b"\n", b" ")
            if not _object(junk) and junk.strip():
                out.append((junk, None))
    return out


def _object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except (ValueError, UnicodeDecodeError):
        return False


async def fuzz(case: Case) -> None:
    examples = 0

    async def one(batch: list[tuple[bytes, Any]]) -> None:
        nonlocal examples
        examples += 1
        async with case.agent() as a:
            for _, rid in batch:
                if rid is None:
                    a.expect_null()
                elif rid is not ...:
                    a.expect(rid)
            await a.send_line(b"\n".join(line for line, _ in batch) + b"\n")
            await a.settle(timeout=5)
            for line, rid in batch:
                if rid is not None and rid is not ...:
                    got = a.replies.get(json.dumps(rid))
                    assert got == 1, f"{got} replies to {line[:200]!r}"

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(lines())
    def example(batch: list[tuple[bytes, Any]]) -> None:
        # A connection that opens with "GET " (say) is HTTP on this socket, by design.
        assume(batch and HTTP_START.match(batch[0][0][:8]) is None)
        trio.from_thread.run(one, batch)

    # Hypothesis runs in a thread of its own; each example runs back here in trio.
    await trio.to_thread.run_sync(example)
    case.note = f"{examples} examples"


@pytest.mark.timeout(300)
async def test_fuzz_the_agent_socket() -> None:
    await run_case(
        "fuzz",
        "hypothesis on the socket API",
        fuzz,
        servers=lambda pids: {},
        rss_bound_mib=32,
        timeout=240,
    )
