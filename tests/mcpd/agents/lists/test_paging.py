"""Paged lists for agents: opaque cursors, each page after the last; a cursor kept past
a change to the list refused, saying the list changed, rather than skipping or repeating
items; and a cursor an agent made up refused as invalid params, quoting it cut short."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import trio

from mcpd.agents.lists.paging import decode_cursor, encode_cursor, list_digest, page_of
from protocol.jsonrpc import messages as rpc
from protocol.shown.visible import quote
from tests.support.clients.agent import connect, make_config, running

ITEMS = [f"tool{i}" for i in range(7)]


def key(item: str) -> bytes:
    return item.partition(" ")[0].encode()  # the name, as a tool's key is


DIGEST = list_digest([key(i) for i in ITEMS])


def walk(pages: list[list[str]], size: int) -> list[str]:
    """Page through a list that is ``pages[n]`` when page ``n`` is asked for."""
    seen: list[str] = []
    cursor: object = None
    for items in pages:
        chunk, cursor = page_of(items, cursor, size, key)
        seen += chunk
        if cursor is None:
            break
    return seen


def test_pages_follow_each_other_to_the_end() -> None:
    assert walk([ITEMS] * 3, 3) == ITEMS
    assert walk([ITEMS] * 7, 1) == ITEMS


def test_size_zero_is_the_whole_list_in_one_page() -> None:
    assert page_of(ITEMS, None, 0, key) == (ITEMS, None)
    assert page_of([], None, 0, key) == ([], None)
    assert page_of([], None, 5, key) == ([], None)


def test_a_cursor_that_is_not_a_string_starts_at_the_first_page() -> None:
    assert page_of(ITEMS, 3, 2, key)[0] == ["tool0", "tool1"]


def test_a_cursor_at_the_end_is_an_empty_last_page() -> None:
    assert page_of(ITEMS, encode_cursor(7, DIGEST), 3, key) == ([], None)


@pytest.mark.parametrize(
    "changed",
    [
        ["tool", *ITEMS],  # one added before the cursor
        ITEMS[1:],  # one removed before it
        [*ITEMS[:4], "tool3b", *ITEMS[4:]],  # one added after it
        [ITEMS[1], ITEMS[0], *ITEMS[2:]],  # the same items in another order
    ],
)
def test_a_cursor_into_a_list_that_changed_is_refused_saying_so(changed: list[str]) -> None:
    first, cursor = page_of(ITEMS, None, 3, key)
    assert first == ITEMS[:3] and isinstance(cursor, str)
    with pytest.raises(rpc.RPCError) as info:
        page_of(changed, cursor, 3, key)
    assert info.value.code == rpc.INVALID_PARAMS
    assert "list that has changed since" in info.value.message
    assert "list again without a cursor" in info.value.message
    # Starting again gives the new list whole.
    assert walk([changed] * 4, 3) == changed


def test_an_item_changed_in_place_keeps_the_cursor_good() -> None:
    _, cursor = page_of(ITEMS, None, 3, key)
    marked = [f"{item} (unavailable)" for item in ITEMS]
    chunk, _ = page_of(marked, cursor, 3, key)
    assert chunk == marked[3:6]


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not base64!",
        b64(f"mcpd:8:{DIGEST}"),  # past the list
        b64(f"mcpd:-1:{DIGEST}"),
        b64(f"other:1:{DIGEST}"),
        b64(f"mcpd:x:{DIGEST}"),
        b64("mcpd:1"),  # no digest
        b64(f"mcpd:1:{DIGEST}:more"),
        b64(f"mcpd:1:{DIGEST}00"),
        b64(f"mcpd:{'9' * 5000}:{DIGEST}"),  # more digits than int() reads
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_a_cursor_mcpd_did_not_make_is_invalid_params(cursor: str) -> None:
    with pytest.raises(rpc.RPCError) as info:
        decode_cursor(cursor, len(ITEMS), DIGEST)
    assert info.value.code == rpc.INVALID_PARAMS
    assert info.value.message == f"Invalid cursor {quote(cursor, 64)}"


def test_a_forged_cursor_is_refused_even_where_the_list_is_one_page() -> None:
    with pytest.raises(rpc.RPCError) as info:
        page_of(ITEMS, b64("mcpd:3"), 0, key)
    assert info.value.code == rpc.INVALID_PARAMS


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
        cursor = encode_cursor(offset, DIGEST)
        assert cursor != str(offset)
        assert decode_cursor(cursor, 7, DIGEST) == offset
