"""A modern agent's retry of a call whose 2026-07-28 server answered ``input_required``,
in a running daemon: it is that call's next round, as a legacy agent's answers going
to the server are. An ``ask`` rule asks once, a rate counts the call once, and the
server gets its own requestState back. Only a real continuation passes for one: a
requestState replayed, forged or altered, brought in another profile, for another
tool or other arguments (arguments a server's reader could take for others among
them), from another process (over HTTP, where the agent's own retry
may come on another connection), or after a reload that denies the tool, is refused
and the server is not called again."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.policy.decision.gate import READ_HERE
from tests.support.clients.agent import META, Agent, connect
from tests.support.clients.daemon_http import CURL, Reply, modern_headers, post
from tests.support.daemons.policy import text
from tests.support.daemons.rounds import ASK, LIMIT, NAME, Rounds, rounds_daemon

ASKS = {**META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
APPROVE = {"action": "accept", "content": {"decision": "approve"}}
ASKED = [{"tools": ["s/ask"], "action": "ask", "reason": "names need a person"}]
RATED = [{"tools": ["s/ask"], "action": "allow", "rate": "1/min"}]
PARAMS: dict[str, Any] = {"name": ASK, "arguments": {"who": "me"}, "_meta": ASKS}
SERVERS_STATE = "state-\u00e9-1"
DONE = f"hello mallory ({SERVERS_STATE})"


async def call(agent: Agent, params: dict[str, Any]) -> dict[str, Any]:
    reply = await agent.rpc("tools/call", params)
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


async def asked_for_a_name(
    agent: Agent, rules: list[dict[str, Any]], params: dict[str, Any] = PARAMS
) -> dict[str, Any]:
    """The call of ``params`` as far as the server's question (approved first under
    ``ASKED``): the retry that answers it."""
    first = await call(agent, params)
    if rules is ASKED:
        assert first["requestState"].startswith("mcpd-ask:")
        [key] = first["inputRequests"]
        answer = {"inputResponses": {key: APPROVE}, "requestState": first["requestState"]}
        first = await call(agent, {**params, **answer})
    assert first["resultType"] == "input_required", first
    assert list(first["inputRequests"]) == ["login"]
    return {**params, "inputResponses": {"login": NAME}, "requestState": first["requestState"]}


async def modern_call(setup: Rounds, rules: list[dict[str, Any]]) -> dict[str, Any]:
    async with connect(setup.daemon.socket_path) as agent:
        retry = await asked_for_a_name(agent, rules)
        return await call(agent, retry)


async def legacy_call(setup: Rounds, rules: list[dict[str, Any]]) -> dict[str, Any]:
    got: list[dict[str, Any]] = []
    async with setup.agent() as legacy, trio.open_nursery() as nursery:

        async def calling() -> None:
            got.append(await legacy.call(ASK, {"who": "me"}))

        nursery.start_soon(calling)
        questions = 2 if rules is ASKED else 1  # the approval, then the name
        for n in range(1, questions + 1):
            legacy.answer_held((await legacy.wait_asked(n))[n - 1])
    [result] = got
    return result


@pytest.mark.parametrize("era", [modern_call, legacy_call], ids=["modern", "legacy"])
@pytest.mark.parametrize("rules", [ASKED, RATED], ids=["ask", "rate"])
async def test_an_agents_answers_to_its_server_go_on_with_the_call_in_either_era(
    tmp_path: Path, rules: list[dict[str, Any]], era: Any
) -> None:
    """The call's approval and its rate stand for its rounds, whichever era its agent
    speaks; the next call is a call of its own."""
    with trio.fail_after(LIMIT):
        async with rounds_daemon(tmp_path, rules) as setup:
            result = await era(setup, rules)
            assert text(result) == DONE  # the server had its own state back
            reached = setup.reached()
            assert len(reached) == 2 and reached[1]["requestState"] == SERVERS_STATE
            records = await setup.records()
            assert records[-1].outcome == "ok"
            assert records[-1].decision == ("approved" if rules is ASKED else "allow")
            async with connect(setup.daemon.socket_path) as agent:
                again = await call(agent, PARAMS)
            if rules is RATED:
                assert again["isError"] is True and "at most 1 call a minute" in text(again)
            else:
                assert again["requestState"].startswith("mcpd-ask:")


async def refused(setup: Rounds, agent: Agent, retry: dict[str, Any], said: str) -> None:
    reached = len(setup.reached())
    reply = await agent.rpc("tools/call", retry)
    assert "error" in reply, reply
    assert said in reply["error"]["message"]
    assert len(setup.reached()) == reached  # the server was not called again


async def test_a_retry_used_up_forged_or_altered_is_refused(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with (
            rounds_daemon(tmp_path, RATED) as setup,
            connect(setup.daemon.socket_path) as agent,
        ):
            retry = await asked_for_a_name(agent, RATED)
            token = retry["requestState"]
            assert SERVERS_STATE not in token  # the server's state is carried in mcpd's
            nonce, _, _carried = token.partition(".")
            forged = {**retry, "requestState": "mcpd-round:" + "A" * 24}
            await refused(setup, agent, forged, "names no call mcpd continues")
            altered = {**retry, "requestState": nonce + ".c3RhdGUtMg=="}
            await refused(setup, agent, altered, "was altered")
            # What decoding would skip (characters of no alphabet, or after the padding).
            appended = {**retry, "requestState": token + "!!"}
            await refused(setup, agent, appended, "was altered")
            assert text(await call(agent, retry)) == DONE
            await refused(setup, agent, retry, "names no call mcpd continues")


async def test_a_servers_state_read_out_of_a_token_or_answers_without_one_continue_nothing(
    tmp_path: Path,
) -> None:
    """The server's state rides in mcpd's token, where anyone who sees the token can read
    it: sent as it is, by the token's owner or another, any number of times, it answers
    nothing the server asked: the call goes to the server without it or its answers, as
    a call of its own, and is asked again. The token itself still continues the call,
    once."""
    with trio.fail_after(LIMIT):
        async with (
            rounds_daemon(tmp_path, RATED) as setup,
            connect(setup.daemon.socket_path) as agent,
            connect(setup.daemon.socket_path) as other,
        ):
            retry = await asked_for_a_name(agent, RATED)
            carried = retry["requestState"].partition(".")[2]
            read_out = base64.urlsafe_b64decode(carried).decode()
            assert json.loads(read_out) == SERVERS_STATE
            unwrapped = {**retry, "requestState": json.loads(read_out)}
            bare = {k: v for k, v in retry.items() if k != "requestState"}
            for who, params in ((other, unwrapped), (other, unwrapped), (agent, unwrapped)):
                await continues_nothing(setup, who, params)
            # (The agent's one call a minute is spent: whether it goes on or not, it
            # carries no state; answers alone going on is the unit tests'.)
            reached = len(setup.reached())
            await agent.rpc("tools/call", bare)
            assert all("requestState" not in sent for sent in setup.reached()[reached:])
            assert text(await call(agent, retry)) == DONE


async def continues_nothing(setup: Rounds, agent: Agent, params: dict[str, Any]) -> None:
    """``params`` is a call of its own: under the rules anew (its agent's one call a
    minute may be spent), and if it reaches the server, without state or answers, so
    the server asks again what it needs."""
    reached = len(setup.reached())
    again = await call(agent, params)
    sent = setup.reached()[reached:]
    assert all("requestState" not in s and "inputResponses" not in s for s in sent), sent
    if sent:
        assert again["resultType"] == "input_required", again
    else:
        assert again["_meta"]["mcpd/policy"]["decision"] == "limited", again


async def test_a_legacy_agents_own_round_fields_never_reach_its_server(tmp_path: Path) -> None:
    """A legacy agent has no rounds of its own to continue: what it writes under their
    names is not sent on, and its call is asked what the server asks like any other."""
    with trio.fail_after(LIMIT):
        async with rounds_daemon(tmp_path, RATED) as setup:
            forged = {"name": ASK, "arguments": {"who": "me"}, "inputResponses": {"login": NAME}}
            forged["requestState"] = SERVERS_STATE
            async with setup.agent() as legacy:
                legacy.hold = False  # its user gives the name when asked
                reply = await legacy.rpc("tools/call", forged)
            assert text(reply["result"]) == DONE
            assert len(legacy.asked) == 1
            first, answered = setup.reached()
            assert "requestState" not in first and "inputResponses" not in first
            assert answered["requestState"] == SERVERS_STATE


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"arguments": {"who": "root"}}, "continues a call with other arguments"),
        ({"name": "mcp__s__other"}, "continues a call of 'mcp__s__ask'"),
    ],
)
async def test_a_retry_for_another_call_is_refused_and_leaves_the_round_to_its_own(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    with trio.fail_after(LIMIT):
        async with (
            rounds_daemon(tmp_path, ASKED) as setup,
            connect(setup.daemon.socket_path) as agent,
        ):
            retry = await asked_for_a_name(agent, ASKED)
            await refused(setup, agent, {**retry, **change}, said)
            assert text(await call(agent, retry)) == DONE


def written(rid: int, params: dict[str, Any], arguments: bytes) -> bytes:
    """A tools/call line of ``params`` whose arguments are ``arguments``, byte for byte."""
    line = json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {**params, "arguments": 0}}
    )
    return line.replace('"arguments": 0', '"arguments": ' + arguments.decode()).encode() + b"\n"


async def retried(agent: Agent, retry: dict[str, Any], arguments: bytes) -> dict[str, Any]:
    """The reply to ``retry`` with ``arguments`` as written."""
    rid = 1000 + len(agent.unmatched)
    await agent.send_raw(written(rid, retry, arguments))
    reply = (await agent.wait_unmatched(len(agent.unmatched) + 1))[-1]
    assert reply["id"] == rid
    return reply


APPROVED: dict[str, Any] = {**PARAMS, "arguments": {"who": "me", "amount": 1.5}}


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (b'{"who":"root","who":"me","amount":1.5}', "give the key 'who' more than once"),
        (b'{"who":"me","amount":1.5,"who":"root"}', "give the key 'who' more than once"),
        (b'{"who":"me","amount":1.50000000000000000001}', "1.50000000000000000001 is read as 1.5"),
        (b'{"who":"me","amount":1.5,"amount":1.5}', "give the key 'amount' more than once"),
        (b'{"who":"me","amount":1.50}', "continues a call with other arguments"),
    ],
    ids=["key-twice-first", "key-twice-last", "rounded", "same-key-twice", "respelled-number"],
)
async def test_a_retry_whose_arguments_read_otherwise_than_those_approved_is_refused(
    tmp_path: Path, arguments: bytes, said: str
) -> None:
    """A person approved ``{"who": "me", "amount": 1.5}``: a retry that a reader of
    the server's could take for other arguments is refused as the first round would
    have been, unsent, and the round is left to the retry that brings them as shown."""
    with trio.fail_after(LIMIT):
        async with (
            rounds_daemon(tmp_path, ASKED) as setup,
            connect(setup.daemon.socket_path) as agent,
        ):
            retry = await asked_for_a_name(agent, ASKED, APPROVED)
            reply = await retried(agent, retry, arguments)
            assert said in reply["error"]["message"], reply
            assert len(setup.reached()) == 1
            # Spelled otherwise, in another order, as an SDK may encode them again.
            again = b'{ "amount" : 1.5,\t"who" : "\\u006de" }'
            done = await retried(agent, retry, again)
            assert text(done["result"]) == DONE
            [_, sent] = setup.reached()
            assert sent["arguments"] == {"who": "me", "amount": 1.5}
            reply = await retried(agent, retry, again)
            assert "names no call mcpd continues" in reply["error"]["message"]
            assert len(setup.reached()) == 2


LONG = b'{"who":"me","pad":"' + b"x" * READ_HERE + b'"}'


@pytest.mark.parametrize(
    ("rules", "arguments", "respelled"),
    [
        (RATED, b'{"who":"root","who":"me"}', b'{"who":"me","who":"root"}'),
        (ASKED, LONG, LONG.replace(b",", b", ")),
    ],
    ids=["key-twice-allowed", "long"],
)
async def test_a_retry_continues_arguments_not_read_as_shown_only_as_the_same_bytes(
    tmp_path: Path, rules: list[dict[str, Any]], arguments: bytes, respelled: bytes
) -> None:
    """Arguments no person is shown (a call the rules allow) that readers read
    otherwise, or too long to read where the retry is taken, continue only as the very
    bytes the server was sent."""
    with trio.fail_after(LIMIT):
        async with (
            rounds_daemon(tmp_path, rules) as setup,
            connect(setup.daemon.socket_path) as agent,
        ):
            first = (await retried(agent, PARAMS, arguments))["result"]
            if rules is ASKED:
                [key] = first["inputRequests"]
                answer = {"inputResponses": {key: APPROVE}, "requestState": first["requestState"]}
                first = (await retried(agent, {**PARAMS, **answer}, arguments))["result"]
            assert first["resultType"] == "input_required", first
            retry = {**PARAMS, "inputResponses": {"login": NAME}}
            retry["requestState"] = first["requestState"]
            reply = await retried(agent, retry, respelled)
            assert "continues a call with other arguments" in reply["error"]["message"]
            assert len(setup.reached()) == 1
            assert text((await retried(agent, retry, arguments))["result"]) == DONE


async def test_a_retry_in_another_profile_is_refused(tmp_path: Path) -> None:
    with trio.fail_after(LIMIT):
        async with rounds_daemon(tmp_path, RATED) as setup:
            await setup.reload(RATED, "[profiles.other]", 'servers = ["s"]')
            async with (
                connect(setup.daemon.socket_path) as agent,
                connect(setup.daemon.socket_path) as other,
            ):
                retry = await asked_for_a_name(agent, RATED)
                await other.result("mcpd/useProfile", {"profile": "other"})
                await refused(setup, other, retry, "continues a call in the profile 'default'")
                assert text(await call(agent, retry)) == DONE


async def test_a_retry_after_a_reload_that_denies_the_tool_is_refused_unsent(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with (
            rounds_daemon(tmp_path, ASKED) as setup,
            connect(setup.daemon.socket_path) as agent,
        ):
            retry = await asked_for_a_name(agent, ASKED)
            await setup.reload([{"tools": ["s/ask"], "action": "deny", "reason": "no names"}])
            result = await call(agent, retry)
            assert result["isError"] is True
            assert "policy changed while the call to 'mcp__s__ask' waited" in text(result)
            assert len(setup.reached()) == 1


# -- over HTTP, where each request may come on a connection of its own --


def answer_of(reply: Reply) -> dict[str, Any]:
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        return reply.events()[-1]
    found: dict[str, Any] = reply.json()
    return found


async def post_here(sock: str, params: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 tools/call from this process on a connection of its own."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    head = [
        "POST /mcp HTTP/1.0",
        "Host: mcpd",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(body)}",
        *modern_headers("tools/call", params["name"]),
    ]
    stream = await trio.open_unix_socket(sock)
    async with stream:
        await stream.send_all(("\r\n".join(head) + "\r\n\r\n" + body).encode())
        raw = b""
        while chunk := await stream.receive_some(1 << 16):
            raw += chunk
    return answer_of(Reply(raw))


@pytest.mark.skipif(CURL is None, reason="needs curl, another process")
async def test_over_http_a_retry_on_another_connection_goes_on_and_another_process_is_refused(
    tmp_path: Path,
) -> None:
    params = {"name": ASK, "arguments": {"who": "me"}, "_meta": ASKS}
    with trio.fail_after(LIMIT):
        async with rounds_daemon(tmp_path, RATED) as setup:
            sock = setup.daemon.socket_path
            first = (await post_here(sock, params))["result"]
            assert first["resultType"] == "input_required"
            retry = {**params, "inputResponses": {"login": NAME}}
            retry["requestState"] = first["requestState"]
            body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": retry}
            # curl is another process: another agent, as rates count agents.
            theirs = answer_of(await post(sock, body, *modern_headers("tools/call", ASK)))
            assert "continues another agent's call" in theirs["error"]["message"]
            assert len(setup.reached()) == 1
            done = (await post_here(sock, retry))["result"]
            assert done["resultType"] == "complete" and text(done) == DONE
