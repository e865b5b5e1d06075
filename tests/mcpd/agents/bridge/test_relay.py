"""`mcpd bridge`: a stdio MCP server for hosts that can only spawn commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
import trio.testing

from mcpd.agents.bridge.relay import Bridge
from protocol.jsonrpc import messages as rpc
from tests.support.clients.agent import make_config, running
from tests.support.clients.bridge import BridgeProcess
from tests.support.system.full_queue import full_queue
from tests.support.system.procs import scripted

BRIDGE = [sys.executable, "-m", "mcpd", "bridge"]


async def start_bridge(sock: Path) -> BridgeProcess:
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "mcpd", "bridge", "--socket", str(sock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    return BridgeProcess(proc)


def server(*flags: str) -> dict[str, Any]:
    command, args = scripted(*flags)
    return {"command": command, "args": list(args)}


async def test_bridge_survives_the_daemon_stopping_and_coming_back(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"s": server()})
    sock = Path(cfg.socket_path())
    with trio.fail_after(60):
        bridge = await start_bridge(sock)
        try:
            async with running(cfg):
                init = await bridge.ask(
                    1,
                    "initialize",
                    {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "host", "version": "1"},
                    },
                )
                assert init["result"]["serverInfo"]["name"] == "mcpd"
                await bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                tools = await bridge.ask(2, "tools/list")
                assert len(tools["result"]["tools"]) == 3
            down = await bridge.ask(3, "tools/list")
            assert "mcpd is not running" in down["error"]["message"]
            async with running(cfg):
                # The legacy session is set up again behind the host's back.
                called = await bridge.ask(
                    4, "tools/call", {"name": "mcp__s__tool0", "arguments": {"text": "back"}}
                )
                assert called["result"]["content"][0]["text"] == "tool0:back"
        finally:
            assert bridge.proc.stdin is not None
            await bridge.proc.stdin.aclose()
            assert await bridge.proc.wait() == 0


async def test_calls_in_flight_when_the_daemon_stops_are_said_to_have_maybe_run(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"slow": server("--slow", "30")})
    sock = Path(cfg.socket_path())
    with trio.fail_after(60):
        bridge = await start_bridge(sock)
        async with running(cfg) as daemon:
            await bridge.send(
                {
                    "jsonrpc": "2.0",
                    "id": "long",
                    "method": "tools/call",
                    "params": {
                        "name": "mcp__slow__tool0",
                        "arguments": {},
                        "_meta": {
                            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientCapabilities": {},
                        },
                    },
                }
            )
            while daemon.supervisor.servers["slow"].inflight == 0:
                await trio.sleep(0.01)
        reply = await bridge.receive()
        assert reply["id"] == "long"
        # The daemon answers it as it stops, once (the bridge adds no answer of its
        # own); the call may have run: the host is not told to try it again.
        assert reply["result"]["isError"] is True
        said = reply["result"]["content"][0]["text"]
        assert said.startswith("mcpd is stopping") and "whether it ran is not known" in said
        assert "try again" not in said
        assert bridge.proc.stdin is not None
        await bridge.proc.stdin.aclose()
        assert await bridge.proc.wait() == 0


async def test_a_host_that_closes_stdin_at_once_still_gets_every_answer(tmp_path: Path) -> None:
    # A script that pipes its requests in and closes stdin (`printf ... | mcpd bridge`).
    cfg = make_config(tmp_path, {"s": server()})
    sock = Path(cfg.socket_path())
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "host", "version": "1"},
    }
    call = {"name": "mcp__s__tool0", "arguments": {"text": "piped"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call},
    ]
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    alone = [{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {**call, "_meta": meta}}]
    with trio.fail_after(60):
        async with running(cfg):
            for requests in (lines, alone):
                piped = b"".join(json.dumps(m).encode() + b"\n" for m in requests)
                done = await trio.run_process(
                    [sys.executable, "-m", "mcpd", "bridge", "--socket", str(sock)],
                    stdin=piped,
                    capture_stdout=True,
                )
                replies = [json.loads(line) for line in done.stdout.splitlines()]
                by_id = {r["id"]: r for r in replies}
                assert len(by_id) == len(replies)
                assert sorted(by_id) == [m["id"] for m in requests if "id" in m]
                assert by_id[3]["result"]["content"][0]["text"] == "tool0:piped"


async def test_a_profile_the_daemon_does_not_have_answers_errors_and_exits_78(
    tmp_path: Path,
) -> None:
    cfg = make_config(tmp_path, {"s": server()})
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with trio.fail_after(60):
        async with running(cfg):
            done = await trio.run_process(
                [*BRIDGE, "--socket", cfg.socket_path(), "--profile", "nosuch"],
                stdin=json.dumps(request).encode() + b"\n",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    (reply,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert "no profile named 'nosuch'" in reply["error"]["message"]
    assert done.returncode == 78, done.stderr


async def test_a_piped_batch_is_answered_before_the_bridge_goes(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"s": server()})
    init = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "h"}}
    batch = [
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        batch,
    ]
    with trio.fail_after(60):
        async with running(cfg):
            done = await trio.run_process(
                [*BRIDGE, "--socket", cfg.socket_path()],
                stdin=b"".join(json.dumps(m).encode() + b"\n" for m in lines),
                capture_stdout=True,
            )
    first, answers = (json.loads(line) for line in done.stdout.splitlines())
    assert first["id"] == 1
    assert sorted(a["id"] for a in answers) == [2, 3]


async def test_status_counts_a_bridge_and_not_the_status_command_itself(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, {"s": server()})
    sock = Path(cfg.socket_path())

    async def status() -> dict[str, Any]:
        asked = await trio.run_process(
            [sys.executable, "-m", "mcpd", "status", "--json", "--socket", str(sock)],
            capture_stdout=True,
        )
        return json.loads(asked.stdout)  # type: ignore[no-any-return]

    def agents(seen: dict[str, Any]) -> tuple[int, int]:
        rows = {p["name"]: p["agents"] for p in seen["profiles"]}
        return seen["daemon"]["connections"], rows["default"]

    with trio.fail_after(60):
        async with running(cfg):
            assert agents(await status()) == (0, 0)
            bridge = await start_bridge(sock)
            try:
                init = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "host", "version": "1"},
                }
                assert "result" in await bridge.ask(1, "initialize", init)
                assert agents(await status()) == (1, 1)
            finally:
                assert bridge.proc.stdin is not None
                await bridge.proc.stdin.aclose()
                assert await bridge.proc.wait() == 0


async def test_a_batch_sent_while_the_daemon_is_down_gets_an_error_for_each_request(
    tmp_path: Path,
) -> None:
    """A single request got its error; a batch got nothing, and its host waited for
    answers that never came."""
    batch = [
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "three", "method": "tools/list"},
    ]
    with trio.fail_after(30):
        done = await trio.run_process(
            [*BRIDGE, "--socket", str(tmp_path / "nobody.sock")],
            stdin=json.dumps(batch).encode() + b"\n",
            capture_stdout=True,
        )
    (answers,) = (json.loads(line) for line in done.stdout.splitlines())
    assert [a["id"] for a in answers] == [2, "three"]
    assert all("mcpd is not running" in a["error"]["message"] for a in answers)


async def test_a_stderr_nobody_reads_costs_the_bridge_its_notes_not_its_answers(
    tmp_path: Path,
) -> None:
    """The host closed the bridge's stderr (a log reader that died) while no daemon
    answers: each request still gets its error, and the bridge ends as it would."""
    requests = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/list"}).encode() + b"\n"
        for i in (1, 2)
    )
    read, write = os.pipe()
    os.close(read)
    try:
        with trio.fail_after(30):
            done = await trio.run_process(
                [*BRIDGE, "--socket", str(tmp_path / "nobody.sock")],
                stdin=requests,
                capture_stdout=True,
                stderr=write,
                check=False,
            )
    finally:
        os.close(write)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2]
    assert all("mcpd is not running" in a["error"]["message"] for a in answers)
    assert done.returncode == 0


async def test_a_full_listen_queue_is_said_as_such_not_taken_for_another_user(
    tmp_path: Path,
) -> None:
    sock = tmp_path / "mcpd.sock"
    host_out, bridge_in = trio.testing.memory_stream_pair()
    bridge_out, host_in = trio.testing.memory_stream_pair()
    bridge = Bridge(str(sock), bridge_in, bridge_out, connect_wait=0.2)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    answer = b""
    with full_queue(sock), trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bridge.run)
            await host_out.send_all(json.dumps(request).encode() + b"\n")
            while not answer.endswith(b"\n"):
                answer += await host_in.receive_some()
            await host_out.aclose()
    message = json.loads(answer)["error"]["message"]
    assert str(sock) in message and "listen queue stayed full" in message
    assert "uid" not in message and bridge.untrusted is None


async def test_a_line_over_the_daemons_own_limit_is_answered_and_the_rest_go_on(
    tmp_path: Path,
) -> None:
    """The daemon takes lines of at most 65536 bytes: a host's longer request is answered
    under its id with its size and that limit, and the host's call in flight and the
    requests after it are answered as if it had not been sent."""
    cfg = make_config(tmp_path, {"slow": server("--slow", "1")}, max_line_bytes=65536)
    sock = Path(cfg.socket_path())
    with trio.fail_after(60):
        bridge = await start_bridge(sock)
        async with running(cfg):
            greeting = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "host", "version": "1"},
            }
            await bridge.ask(1, "initialize", greeting)
            await bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"name": "mcp__slow__tool0", "arguments": {"text": "kept"}}
            await bridge.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            big = {"name": "mcp__slow__tool0", "arguments": {"text": "x" * 100_000}}
            await bridge.send({"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": big})
            await bridge.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}})
            replies = {}
            while len(replies) < 3:
                reply = await bridge.receive()
                replies[reply.get("id")] = reply
            assert bridge.proc.stdin is not None
            await bridge.proc.stdin.aclose()
            assert await bridge.proc.wait() == 0
    assert set(replies) == {2, 3, 77}, replies
    said = replies[77]["error"]["message"]
    assert "over the 65536 byte limit" in said and "it was not sent" in said, said
    assert replies[2]["result"]["content"][0]["text"] == "tool0:kept", replies[2]
    assert replies[3]["result"]["tools"], replies[3]


async def test_a_request_whose_id_is_an_integer_past_64_bits_is_refused(tmp_path: Path) -> None:
    """Under a null id, never echoed; the next requests are answered, those at either
    end of what an id may be too."""
    cfg = make_config(tmp_path, {"s": server()})
    with trio.fail_after(60):
        bridge = await start_bridge(Path(cfg.socket_path()))
        async with running(cfg):
            greeting = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "host", "version": "1"},
            }
            await bridge.ask(1, "initialize", greeting)
            await bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"name": "mcp__s__tool0", "arguments": {"text": "x"}}
            for method, params in (("ping", {}), ("tools/call", call)):
                huge = {"jsonrpc": "2.0", "id": 10**4000, "method": method, "params": params}
                await bridge.send(huge)
                refused = await bridge.receive()
                assert refused["id"] is None, refused
                assert refused["error"]["code"] == rpc.INVALID_REQUEST
                assert "an integer of 4001 digits" in refused["error"]["message"]
                for taken in (rpc.MAX_INT_ID, rpc.MIN_INT_ID):
                    reply = await bridge.ask(taken, method, params)
                    assert "result" in reply, reply
            assert bridge.proc.stdin is not None
            await bridge.proc.stdin.aclose()
            assert await bridge.proc.wait() == 0


def test_ctrl_c_ends_the_bridge_quietly_with_130(tmp_path: Path) -> None:
    # The interrupt reaches the bridge inside its nursery, so it comes wrapped in an
    # exception group: it must still be the quiet 130 of every other command.
    proc = subprocess.Popen(
        [*BRIDGE, "--socket", str(tmp_path / "none.sock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    # An answer shows the bridge is relaying, past start-up, waiting on its stdin.
    proc.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}\n')
    proc.stdin.flush()
    assert "mcpd is not running" in json.loads(proc.stdout.readline())["error"]["message"]
    proc.send_signal(signal.SIGINT)
    # Its stdin stays open: the interrupt, not the end of input, is what ends it.
    try:
        assert proc.wait(timeout=20) == 130
    finally:
        proc.stdin.close()
    assert proc.stderr is not None
    said = proc.stderr.read().decode()
    assert "Traceback" not in said and "KeyboardInterrupt" not in said
