"""Paged lists for agents: opaque cursors, each page after the last, and a cursor an agent
made up (or kept past a shorter list) refused as invalid params, naming the cursor (the
start of it, for one longer than any mcpd makes)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import trio

from mcpd.agents.paging import decode_cursor, encode_cursor, page
from protocol import jsonrpc as rpc
from protocol.visible import quote
from tests.support.agent import connect, make_config, running

ITEMS = list(range(7))


def test_pages_follow_each_other_to_the_end() -> None:
    seen: list[int] = []
    cursor: object = None
    pages = 0
    while True:
        chunk, cursor = page(ITEMS, cursor, 3)
        seen += chunk
        pages += 1
        if cursor is None:
            break
    assert seen == ITEMS and pages == 3


def test_size_zero_is_the_whole_list_in_one_page() -> None:
    assert page(ITEMS, None, 0) == (ITEMS, None)
    assert page([], None, 0) == ([], None)
    assert page([], None, 5) == ([], None)


def test_a_cursor_that_is_not_a_string_starts_at_the_first_page() -> None:
    assert page(ITEMS, 3, 2)[0] == [0, 1]


def test_a_cursor_at_the_end_is_an_empty_last_page() -> None:
    assert page(ITEMS, encode_cursor(7), 3) == ([], None)


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not base64!",
        b64("mcpd:8"),  # past the list
        b64("mcpd:-1"),
        b64("other:1"),
        b64("mcpd:x"),
        b64("mcpd:" + "9" * 5000),  # more digits than int() reads
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_a_cursor_mcpd_did_not_make_is_invalid_params(cursor: str) -> None:
    with pytest.raises(rpc.RPCError) as info:
        decode_cursor(cursor, len(ITEMS))
    assert info.value.code == rpc.INVALID_PARAMS
    assert info.value.message == f"Invalid cursor {quote(cursor, 64)}"


@pytest.mark.parametrize("method", ["tools/list", "prompts/list", "resources/list"])
async def test_a_long_cursor_is_refused_quoting_its_start_not_all_of_it(
    tmp_path: Path, method: str
) -> None:
    cursor = "A" * 2_000_000
    with trio.fail_after(60):
        async with (
            running(make_config(tmp_path, {})) as daemon,
            connect(daemon.socket_path) as agent,
        ):
            await agent.initialize()
            reply = await agent.rpc_text(method, {"cursor": cursor})
    error = json.loads(reply)["error"]
    assert error["code"] == rpc.INVALID_PARAMS
    assert error["message"] == f'Invalid cursor "{"A" * 64}" (and {2_000_000 - 64} more characters)'
    assert len(reply) < 300


def test_a_cursor_is_opaque_and_round_trips() -> None:
    for offset in (0, 4, 7):
        cursor = encode_cursor(offset)
        assert cursor != str(offset)
        assert decode_cursor(cursor, 7) == offset
