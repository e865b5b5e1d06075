"""A secret a server spells with escapes no JSON encoder writes (every character a
``\\uXXXX``) is in none of its bytes, but plain in what mcpd decodes of them: wherever
mcpd writes such a value again for an agent (a result whose links it rewrites or whose
text it cuts, a task handle, a progress report, a log message's logger, a listed item,
a prompt, a read, a completion) it is masked and counted, as one the server sent plain
is. A result mcpd passes on as it came reaches the agent as the server's bytes. One
spelled as an HTML-safe encoder writes it (Go's, Gson's) is found in the bytes as they
came: masked in a result passed on, its ``structuredContent`` and ``_meta``, and an
error's data."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

from protocol.shown.visible import quote
from tests.support.clients.agent import META, Agent, connect, make_config, running
from tests.support.hostile.escaping_server import HTML_SAFE, LEAK_ENV, SPELLING_ENV, spelled

ESCAPING = str(Path(__file__).parents[3] / "support" / "hostile" / "escaping_server.py")
LIMIT = 60
# Another server's secret, as if the escaping server had stolen it: with a quote and a
# slash, which JSON and mcpd's quotes of a server's words escape.
SECRET = 'stolen-Se"cret/0123456789'
FORMS = (SECRET, quote(SECRET)[1:-1])
WHOSE = "servers.other.env.API_TOKEN"
MARKER = f"[secret of {WHOSE}]"
TASKS = {
    **META,
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
}


@contextlib.asynccontextmanager
async def escaping(
    tmp: Path, spelling: str = "every", modern: bool = False
) -> AsyncIterator[tuple[Agent, Agent]]:
    """A modern and a legacy agent of a daemon whose server ``esc`` spells the secret
    with escapes (``spelling``; ``modern``: speaking 2026-07-28, else legacy). A second
    server offers resources too, so the URI of a link ``esc`` hands out is one of mcpd's
    (``mcpd://esc/...``)."""
    env = {LEAK_ENV: SECRET, SPELLING_ENV: spelling, **({"MODERN": "1"} if modern else {})}
    servers: dict[str, Any] = {
        "esc": {"command": sys.executable, "args": [ESCAPING], "env": env},
        "quiet": {"command": sys.executable, "args": [ESCAPING]},
        "other": {"command": "true", "env": {"API_TOKEN": SECRET}, "enabled": False},
    }
    cfg = make_config(tmp, servers, result_budget_chars=100)
    with trio.fail_after(LIMIT):
        async with (
            running(cfg) as daemon,
            connect(daemon.socket_path) as modern,
            connect(daemon.socket_path, modern=False) as legacy,
        ):
            hello = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "legacy-agent", "version": "0"},
            }
            await legacy.result("initialize", hello)
            await legacy.send_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            yield modern, legacy


async def masked(agent: Agent) -> int:
    """How many secrets mcpd masked in what ``esc`` sent, as ``mcpd status`` says."""
    rows = {r["alias"]: r for r in (await agent.result("mcpd/status"))["servers"]}
    return rows["esc"]["secrets_masked"].get(WHOSE, 0)  # type: ignore[no-any-return]


def strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def holds_none(*seen: object) -> None:
    """No string of what an agent got holds the secret, as it is or as quoted."""
    shown = [s for value in seen for s in strings(value)]
    assert [s for s in shown for form in FORMS if form in s] == []


async def test_a_result_whose_links_mcpd_rewrites_is_masked_and_one_passed_on_is_as_sent(
    tmp_path: Path,
) -> None:
    async with escaping(tmp_path) as (modern, legacy):
        before = await masked(modern)
        got = [await agent.call("mcp__esc__link") for agent in (modern, legacy)]
        after = await masked(modern)
        plain = await legacy.rpc_text("tools/call", {"name": "mcp__esc__plain", "arguments": {}})
    holds_none(got)
    for result in got:
        link, text = result["content"]
        assert link["uri"] == "mcpd://esc/file:///doc"  # rewritten: the result was written again
        assert link["name"] == text["text"] == result["structuredContent"]["v"] == MARKER
    assert after - before == 6
    # Not written again: the server's bytes, escapes and all (the agent reads the secret
    # out of them, as mcpd did not).
    assert f'"text": "{spelled(SECRET)}"'.encode() in plain


async def test_one_spelled_as_html_safe_encoders_write_it_is_masked_as_it_came(
    tmp_path: Path,
) -> None:
    async with escaping(tmp_path, "html") as (modern, legacy):
        before = await masked(modern)
        got: list[Any] = []
        for agent in (modern, legacy):
            got += [await agent.call("mcp__esc__plain"), await agent.call("mcp__esc__meta")]
            failed = await agent.rpc("tools/call", {"name": "mcp__esc__fails", "arguments": {}})
            got.append(failed["error"])
        counted = await masked(modern) - before
        plain = await legacy.rpc_text("tools/call", {"name": "mcp__esc__plain", "arguments": {}})
    holds_none(got)
    assert spelled(SECRET, HTML_SAFE).encode() not in plain
    for plain_result, meta_result, error in zip(got[::3], got[1::3], got[2::3], strict=True):
        assert plain_result["content"][0]["text"] == MARKER
        assert meta_result["structuredContent"] == {"v": MARKER}
        assert meta_result["_meta"]["k"] == MARKER
        assert error["data"] == {"k": MARKER}
    assert counted == 2 * (1 + 2 + 1)


async def test_a_result_cut_to_the_budget_is_masked(tmp_path: Path) -> None:
    async with escaping(tmp_path) as (modern, legacy):
        before = await masked(modern)
        got = [await agent.call("mcp__esc__long") for agent in (modern, legacy)]
        counted = await masked(modern) - before
    holds_none(got)
    for result in got:
        cut, note = result["content"]
        assert cut["text"].startswith(f"{MARKER} xxx")
        assert note["text"].startswith("[mcpd: ")
    assert counted == 2


async def test_a_task_handle_mcpd_names_the_task_in_is_masked(tmp_path: Path) -> None:
    async with escaping(tmp_path, modern=True) as (modern, _):
        before = await masked(modern)
        params = {"name": "mcp__esc__task", "arguments": {}, "_meta": TASKS}
        handle = (await modern.rpc("tools/call", params))["result"]
        counted = await masked(modern) - before
    holds_none(handle)
    assert handle["resultType"] == "task" and handle["taskId"] == "esc:t-1"
    assert handle["statusMessage"] == MARKER
    assert counted == 1


async def test_a_result_told_in_mcpds_words_is_masked(tmp_path: Path) -> None:
    async with escaping(tmp_path, modern=True) as (modern, _):
        odd = await modern.call("mcp__esc__odd")
    holds_none(odd)
    assert odd["isError"] is True
    assert odd["content"][0]["text"].endswith(f'unknown resultType "{MARKER}".')


async def test_a_legacy_servers_result_type_holding_a_secret_is_left_out(
    tmp_path: Path,
) -> None:
    async with escaping(tmp_path) as (modern, legacy):
        got = [await agent.call("mcp__esc__odd") for agent in (modern, legacy)]
    holds_none(*got)
    assert got == [{"resultType": "complete", "content": []}, {"content": []}]


async def test_a_progress_report_is_masked(tmp_path: Path) -> None:
    async with escaping(tmp_path) as (modern, _):
        before = await masked(modern)
        params = {"name": "mcp__esc__progress", "arguments": {}, "_meta": {"progressToken": 7}}
        result = await modern.result("tools/call", params)
        (report,) = await modern.wait_notifications(1)
        counted = await masked(modern) - before
    holds_none(report)
    assert result["content"][0]["text"] == "reported"
    assert report["method"] == "notifications/progress"
    assert report["params"] == {"progressToken": 7, "progress": 1, "total": 2, "message": MARKER}
    assert counted == 1


async def test_a_log_message_and_a_request_to_the_agent_are_masked(tmp_path: Path) -> None:
    async with escaping(tmp_path) as (_, legacy):
        await legacy.result("logging/setLevel", {"level": "debug"})
        await legacy.call("mcp__esc__log")
        (said,) = await legacy.wait_notifications(1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(legacy.call, "mcp__esc__ask")
            (asked,) = await legacy.wait_unmatched(1)
            reply = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}
            await legacy.send_raw(json.dumps(reply).encode() + b"\n")
    holds_none(said, asked)
    assert said["params"]["logger"] == f"esc/{MARKER}"
    assert asked["params"]["message"].endswith(f"> {MARKER}")


async def test_what_is_listed_is_masked(tmp_path: Path) -> None:
    async with escaping(tmp_path) as (modern, legacy):
        listed = {
            "tools": await legacy.tools(),
            "prompts": (await modern.result("prompts/list"))["prompts"],
            "resources": (await modern.result("resources/list"))["resources"],
            "templates": (await modern.result("resources/templates/list"))["resourceTemplates"],
        }
    holds_none(listed)
    said = {
        kind: {item["description"] for item in items if item["_meta"]["mcpd/server"] == "esc"}
        for kind, items in listed.items()
    }
    assert said == {
        "tools": {f"[esc] says {MARKER}"},
        "prompts": {f"[esc] greets {MARKER}"},
        "resources": {f"[esc] {MARKER}"},
        "templates": {f"[esc] holds {MARKER}"},
    }


async def test_a_prompt_a_read_and_a_completion_are_masked(tmp_path: Path) -> None:
    async with escaping(tmp_path) as (modern, legacy):
        got: dict[str, Any] = {}
        for era, agent in (("modern", modern), ("legacy", legacy)):
            prompt = {"name": "mcp__esc__greet", "arguments": {}}
            got[f"{era} prompt"] = await agent.result("prompts/get", prompt)
            got[f"{era} read"] = await agent.result(
                "resources/read", {"uri": "mcpd://esc/esc://doc"}
            )
            got[f"{era} missing"] = await agent.rpc(
                "resources/read", {"uri": "mcpd://esc/esc://gone"}
            )
        ref = {"type": "ref/prompt", "name": "mcp__esc__greet"}
        argument = {"name": "who", "value": ""}
        got["completion"] = await modern.result(
            "completion/complete", {"ref": ref, "argument": argument}
        )
    holds_none(got)
    for era in ("modern", "legacy"):
        text, link = (m["content"] for m in got[f"{era} prompt"]["messages"])
        assert text["text"] == link["name"] == MARKER
        assert got[f"{era} read"]["contents"][0]["text"] == MARKER
        assert got[f"{era} missing"]["error"]["data"]["k"] == MARKER
    assert got["completion"]["completion"]["values"] == [MARKER]
