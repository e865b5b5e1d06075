"""A hostile stdio server tries, one attack per test, what a compromised package would:
the keys mcpd keeps, another server's secret, the user's SSH key, mcpd's socket,
mcpd itself, files outside its grants, the network, the machine's processes and
memory. Each attack fails; its ordinary tool keeps answering, mcpd keeps running and
the other server is the same process, never restarted. Where it is safe to, the same
attack is made by a server without a sandbox too, to show what the sandbox stopped."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.support.daemons.sandboxed import (
    ENDPOINT_TOKEN,
    OAUTH_TOKEN,
    RUNTIME,
    SECRET,
    SSH_KEY,
    agent_of,
    call,
    hostile,
    serving,
    steady,
    text,
    untouched,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)


async def test_the_endpoint_token_and_the_oauth_store_are_out_of_reach(tmp_path: Path) -> None:
    servers = {"hostile": hostile(), "steady": steady(), "open": hostile(sandbox="off")}
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady", "open")
            before = await d.status()
            token, store = (
                tmp_path / "state" / "token",
                tmp_path / "state" / "oauth" / "tickets.json",
            )
            for path, secret in ((token, ENDPOINT_TOKEN), (store, OAUTH_TOKEN)):
                got = await call(agent, "hostile", "read_file", path=str(path))
                assert got.startswith("refused: FileNotFoundError"), got
                # Without a sandbox the same call reads it: what the sandbox stopped.
                assert secret in await call(agent, "open", "read_file", path=str(path))
            got = await call(agent, "hostile", "read_file", path=str(tmp_path / "mcpd.toml"))
            assert got.startswith("refused: PermissionError"), got  # covered by /dev/null
            # Its own home, in the state directory, is its own to use.
            home = before["hostile"]["sandbox"]["home"]
            assert home.startswith(str(tmp_path / "state"))
            wrote = await call(agent, "hostile", "write_file", path=f"{home}/notes", text="mine")
            assert wrote.startswith("ok:"), wrote
            assert await call(agent, "hostile", "read_file", path=f"{home}/notes") == "ok: mine"
            other = before["open"]["sandbox"]["home"]
            got = await call(agent, "hostile", "read_file", path=f"{other}/anything")
            assert got.startswith("refused:"), got
            await untouched(d, agent, before)


async def test_a_config_named_relatively_is_out_of_reach_too(tmp_path: Path) -> None:
    secret = "steady-env-secret-5d1e"  # another server's env, written in the config
    servers = {
        "hostile": hostile(),
        "steady": {**steady(), "env": {"STEADY_TOKEN": secret}},
        "open": hostile(sandbox="off"),
    }
    with serving(tmp_path, servers, cwd=tmp_path) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady", "open")
            before = await d.status()
            config = str(tmp_path / "mcpd.toml")
            got = await call(agent, "hostile", "read_file", path=config)
            assert got.startswith("refused: PermissionError"), got
            # Read without a sandbox (what reaches the agent has the secret masked).
            got = await call(agent, "open", "read_file", path=config)
            assert got.startswith("ok: [daemon]") and secret not in got, got
            await untouched(d, agent, before)


async def test_another_servers_header_secret_is_not_in_its_reach(tmp_path: Path) -> None:
    servers = {"hostile": hostile(inherit_env=True), "steady": steady()}
    servers["open"] = hostile(sandbox="off")
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady", "open")
            before = await d.status()
            # Not inherited, not even with inherit_env = true: the config resolves it
            # for the tickets server alone.
            got = await call(agent, "hostile", "getenv", name="TICKETS_TOKEN")
            assert got.startswith("refused: KeyError"), got
            # Nor readable from mcpd's environment or any other process's.
            got = await call(agent, "hostile", "scan_environ", needle=SECRET)
            assert got.startswith("refused: LookupError"), got
            got = await call(agent, "open", "scan_environ", needle=SECRET)
            assert got.startswith("ok: found"), got
            await untouched(d, agent, before)


async def test_a_planted_ssh_key_of_the_users_home_is_hidden(tmp_path: Path) -> None:
    servers = {"hostile": hostile(), "steady": steady(), "open": hostile(sandbox="off")}
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady", "open")
            before = await d.status()
            key = d.home / ".ssh" / "id_ed25519"
            got = await call(agent, "hostile", "read_file", path=str(key))
            assert got.startswith("refused: FileNotFoundError"), got
            assert await call(agent, "open", "read_file", path=str(key)) == f"ok: {SSH_KEY}"
            await untouched(d, agent, before)


async def test_mcpds_socket_refuses_a_servers_process(tmp_path: Path) -> None:
    # The one without a sandbox too: the socket knows its servers by their processes.
    servers = {"hostile": hostile(), "steady": steady(), "open": hostile(sandbox="off")}
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady", "open")
            before = await d.status()
            for alias in ("hostile", "open"):
                got = await call(agent, alias, "ask_reload", socket=d.socket)
                assert got.startswith("refused: PermissionError"), got
                assert f"a process of the server '{alias}' may not use this socket" in got
                assert f"a process of the server {alias} (pid " in await d.logged(
                    f"a process of the server {alias} (pid "
                )
            log = d.log()
            assert not any(f"reload{s}" in log for s in ("ed:", " rejected", " failed")), log
            await untouched(d, agent, before)


async def test_a_profile_lets_a_server_in_but_never_as_the_owner(tmp_path: Path) -> None:
    profile = '[profiles.helpers]\nservers = ["steady"]\nallow_servers = ["hostile"]\n'
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}, profile) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            before = await d.status()
            got = await call(agent, "hostile", "ask_reload", socket=d.socket)
            assert got.startswith("refused: PermissionError"), got
            # Held to the profile that let it in, it may not act on the whole daemon.
            assert "mcpd/reload acts on the whole daemon" in got, got
            assert "held to the profile 'helpers'" in got, got
            await untouched(d, agent, before)


async def test_mcpd_cannot_be_killed_from_a_sandbox(tmp_path: Path) -> None:
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            before = await d.status()
            got = await call(agent, "hostile", "kill", pid=d.pid)
            # mcpd's pid names no process in its PID namespace, and its parent there,
            # the namespace's init, ignores what the namespace sends it.
            assert got.startswith("refused: ProcessLookupError"), got
            assert f"{d.pid}: No such process" in got
            await untouched(d, agent, before)


async def test_writes_outside_its_grants_fail(tmp_path: Path) -> None:
    granted, outside = tmp_path / "granted", tmp_path / "outside"
    granted.mkdir()
    outside.mkdir()
    (outside / "private").write_text("not for servers")
    strict = hostile(sandbox="strict", read=RUNTIME, write=[str(granted)])
    with serving(tmp_path, {"hostile": strict, "steady": steady(), "plain": hostile()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady", "plain")
            before = await d.status()
            assert before["hostile"]["sandbox"]["level"] == "strict"
            got = await call(agent, "hostile", "write_file", path=str(granted / "out"), text="ok")
            assert got.startswith("ok:"), got
            assert (granted / "out").read_text() == "ok"
            # Outside its grants the machine is not there: what it writes there lands in
            # its private /tmp (these paths are under /tmp) or nowhere.
            token = tmp_path / "state" / "token"
            for path in (outside / "new", token, d.home / "x", tmp_path / "new"):
                await call(agent, "hostile", "write_file", path=str(path))
            assert not (outside / "new").exists()
            assert not (d.home / "x").exists()
            assert not (tmp_path / "new").exists()
            assert token.read_text() == ENDPOINT_TOKEN + "\n"
            got = await call(agent, "hostile", "read_file", path=str(outside / "private"))
            assert got.startswith("refused: FileNotFoundError"), got
            # At the default level, what it cannot see it cannot write either.
            got = await call(agent, "plain", "write_file", path=str(tmp_path / "state" / "x"))
            assert got.startswith("refused:"), got
            assert not (tmp_path / "state" / "x").exists()
            await untouched(d, agent, before)


async def test_without_a_network_loopback_listeners_are_out_of_reach(tmp_path: Path) -> None:
    accepted: list[object] = []
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def count(stream: trio.SocketStream) -> None:
        accepted.append(stream)
        await stream.aclose()

    servers = {"hostile": hostile(network=False), "steady": steady(), "online": hostile()}
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, count, listeners)
        with serving(tmp_path, servers) as d:
            async with agent_of(d) as agent:
                await wait_ready(agent, "hostile", "steady", "online")
                before = await d.status()
                assert before["hostile"]["sandbox"]["network"] is False
                got = await call(agent, "hostile", "connect", host="127.0.0.1", port=port)
                assert got.startswith("refused: ConnectionRefusedError"), got
                got = await call(agent, "online", "connect", host="127.0.0.1", port=port)
                assert got == f"ok: connected to 127.0.0.1:{port}", got
                await untouched(d, agent, before)
        nursery.cancel_scope.cancel()
    assert len(accepted) == 1  # the server with a network, and no other


async def test_forking_5000_processes_fails_inside_the_server(tmp_path: Path) -> None:
    servers = {"hostile": hostile(limits={"processes": 64}), "steady": steady()}
    with serving(tmp_path, servers) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            before = await d.status()
            assert before["hostile"]["sandbox"]["limits"]["processes"] == 64
            got = await call(agent, "hostile", "fork_many", count=5000)
            assert got.startswith("refused: BlockingIOError"), got
            assert "Resource temporarily unavailable after" in got
            assert int(got.rsplit("after ", 1)[1].split()[0]) < 64
            await untouched(d, agent, before)


async def test_allocating_8_gb_fails_inside_the_server(tmp_path: Path) -> None:
    # The default limits: no [limits] anywhere in the config.
    with serving(tmp_path, {"hostile": hostile(), "steady": steady()}) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            before = await d.status()
            assert before["hostile"]["sandbox"]["limits"]["memory"] == 4 << 30
            got = await call(agent, "hostile", "allocate", bytes=8 << 30)
            assert got.startswith("refused: MemoryError"), got
            await untouched(d, agent, before)


async def test_a_server_that_dies_at_its_limit_is_an_outage_that_names_it(tmp_path: Path) -> None:
    servers = {"hostile": hostile(limits={"memory": "256M"}), "steady": steady()}
    with serving(tmp_path, servers, backoff_base=30.0, backoff_cap=60.0) as d:
        async with agent_of(d) as agent:
            await wait_ready(agent, "hostile", "steady")
            result = await agent.call("mcp__hostile__die_allocating", {"bytes": 1 << 30})
            assert result["isError"] is True
            assert (
                "its last error on stderr says it reached its limit "
                "servers.hostile.limits.memory = 256 MiB"
            ) in text(result)
            rows = await d.status()
            assert "servers.hostile.limits.memory = 256 MiB" in rows["hostile"]["last_error"]
            assert text(await agent.call("mcp__steady__tool0", {"text": "a"})) == "tool0:a"
