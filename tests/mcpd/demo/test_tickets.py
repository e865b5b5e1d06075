"""The tickets demo server's own logic in process: searching by words and status, a
ticket shown whole, new tickets, and what bad calls get."""

from __future__ import annotations

import json
from typing import Any

import pytest
from msgspec import Raw

from mcpd.demo import tickets
from mcpd.demo.runtime import DemoServer
from protocol.jsonrpc import messages as rpc
from tests.support.clients.demo import meta


class Calls:
    """One server, its state kept between calls, and the notifications it sent."""

    def __init__(self) -> None:
        self.server: DemoServer = tickets.build_tickets()
        self.sent: list[dict[str, Any]] = []

    async def _notify(self, message: bytes) -> None:
        self.sent.append(json.loads(message))

    async def result(self, tool: str, **m: Any) -> dict[str, Any]:
        arguments = m.pop("arguments")
        params = {"name": tool, "arguments": arguments, "_meta": meta(**m)}
        req = rpc.Request(1, "tools/call", Raw(json.dumps(params).encode()))
        reply = await self.server.handle(self.server.new_session(), req, self._notify)
        return dict(json.loads(reply.message)["result"])

    async def text(self, tool: str, **arguments: Any) -> str:
        result = await self.result(tool, arguments=arguments)
        return str(result["content"][0]["text"])


def ids(text: str) -> list[str]:
    return [line.split(" ")[0] for line in text.splitlines()]


async def test_search_finds_tickets_holding_every_word_in_title_or_body() -> None:
    calls = Calls()
    assert ids(await calls.text("search", query="PAGE")) == ["T-1", "T-4"]
    assert ids(await calls.text("search", query="page grey")) == ["T-4"]
    assert await calls.text("search", query="backup") == (
        "T-5 [open, high] Nightly backup failed twice"
    )


async def test_an_empty_query_lists_all_and_a_status_narrows() -> None:
    calls = Calls()
    assert ids(await calls.text("search", query="")) == ["T-1", "T-2", "T-3", "T-4", "T-5"]
    assert ids(await calls.text("search", query="", status="closed")) == ["T-2"]
    assert "T-2" not in ids(await calls.text("search", query="", status="open"))


async def test_no_match_says_so_quoting_the_query() -> None:
    assert await Calls().text("search", query="zebra") == "No tickets match 'zebra'."


async def test_search_reports_progress_only_when_asked() -> None:
    calls = Calls()
    await calls.result("search", arguments={"query": "dark"})
    assert calls.sent == []
    await calls.result("search", arguments={"query": "dark"}, progressToken="p")
    assert [n["params"] for n in calls.sent] == [
        {"progressToken": "p", "progress": 5, "total": 5, "message": "searched 5 tickets"}
    ]


async def test_a_ticket_is_shown_whole_with_its_fields() -> None:
    result = await Calls().result("get_ticket", arguments={"id": "T-2"})
    assert result["content"][0]["text"] == (
        "T-2 [closed, normal] Export to CSV drops the header row\n\nSeen in 2.3 and 2.4."
    )
    assert result["structuredContent"] == {
        "id": "T-2",
        "title": "Export to CSV drops the header row",
        "body": "Seen in 2.3 and 2.4.",
        "status": "closed",
        "priority": "normal",
    }


async def test_an_unknown_ticket_is_a_tool_error() -> None:
    result = await Calls().result("get_ticket", arguments={"id": "T-99"})
    assert (result["isError"], result["content"][0]["text"]) == (True, "No ticket 'T-99'")


async def test_a_new_ticket_gets_the_next_id_and_can_be_found() -> None:
    calls = Calls()
    assert await calls.text("create_ticket", title="Printer on fire", priority="high") == (
        "Created T-6 [open, high] Printer on fire"
    )
    assert await calls.text("create_ticket", title="Second") == (
        "Created T-7 [open, normal] Second"
    )
    assert ids(await calls.text("search", query="printer")) == ["T-6"]
    # Each server starts from the seed: state is not shared between builds.
    assert "T-6" not in ids(await Calls().text("search", query=""))


@pytest.mark.parametrize(
    ("tool", "arguments", "problem"),
    [
        ("create_ticket", {"title": ""}, "argument 'title' must have at least 1 characters"),
        (
            "create_ticket",
            {"title": "x", "priority": "urgent"},
            "argument 'priority' must be one of",
        ),
        ("search", {"query": "x", "status": "pending"}, "argument 'status' must be one of"),
        ("get_ticket", {}, "missing required argument 'id'"),
    ],
)
async def test_bad_arguments_are_refused_before_the_tool_runs(
    tool: str, arguments: dict[str, Any], problem: str
) -> None:
    result = await Calls().result(tool, arguments=arguments)
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith(f"Invalid arguments for {tool}: {problem}")
