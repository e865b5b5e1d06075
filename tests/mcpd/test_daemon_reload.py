"""Live reload: SIGHUP re-reads the config; only what changed is touched."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.loading.load import load
from mcpd.daemon import Daemon
from tests.support.clients.agent import Agent, connect, running
from tests.support.daemons.reloading import toml_server, wait_for, write_config
from tests.support.system.procs import alive, read_pid, wait_gone


async def test_sighup_adds_removes_changes_and_keeps(tmp_path: Path) -> None:
    pid = {name: tmp_path / f"{name}.pid" for name in ("keep", "change", "remove", "add")}
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(
        config_path,
        sock,
        {
            "keep": toml_server(pid["keep"]),
            "change": toml_server(pid["change"]),
            "remove": toml_server(pid["remove"]),
        },
    )
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
        ):
            before = {n: await read_pid(pid[n]) for n in ("keep", "change", "remove")}
            pid["change"].unlink()
            write_config(
                config_path,
                sock,
                {
                    "keep": toml_server(pid["keep"]),
                    "change": toml_server(pid["change"], "--tools", "5"),
                    "add": toml_server(pid["add"], "--tools", "1"),
                },
            )
            os.kill(os.getpid(), signal.SIGHUP)
            added = await read_pid(pid["add"])
            changed = await read_pid(pid["change"])
            assert await wait_gone(before["remove"])
            assert changed != before["change"] and not alive(before["change"])
            assert alive(before["keep"]) and alive(added)
            await wait_for(lambda: daemon.catalog.count("change") == 5)
            await wait_for(lambda: daemon.catalog.count("add") == 1)
            names = [t["name"] for t in await agent.tools()]
            assert "mcp__add__tool0" in names and "mcp__change__tool4" in names
            assert not any(n.startswith("mcp__remove__") for n in names)
            assert sorted(daemon.supervisor.servers) == ["add", "change", "keep"]
            # The unchanged server's process is the very same one.
            assert await read_pid(pid["keep"]) == before["keep"]


async def test_a_bad_config_is_rejected_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pidfile = tmp_path / "a.pid"
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(config_path, sock, {"a": toml_server(pidfile)})
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
        ):
            first = await read_pid(pidfile)
            config_path.write_text(config_path.read_text() + "\n[servers.b]\nurl = 'ftp://x'\n")
            reply = await agent.rpc("mcpd/reload")
            assert reply["error"]["code"] == -32000
            assert "servers.b.url" in reply["error"]["message"]
            assert sorted(daemon.supervisor.servers) == ["a"]
            assert alive(first)
            assert any(
                "reload rejected" in r.getMessage() and r.levelno == logging.ERROR
                for r in caplog.records
            )


@pytest.mark.parametrize(
    ("added", "said"),
    [
        ('[servers.b.env]\n"A=B" = "1"\n', 'servers.b.env.A=B: a variable name cannot contain "="'),
        ('cwd = "/tmp\\u0000"\n', "servers.b.cwd: contains a NUL character"),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 100 levels deep"),
    ],
)
async def test_a_reload_to_a_config_the_system_cannot_take_is_refused_and_the_old_one_kept(
    tmp_path: Path, added: str, said: str
) -> None:
    pidfile = tmp_path / "a.pid"
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(config_path, sock, {"a": toml_server(pidfile)})
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
        ):
            first = await read_pid(pidfile)
            body = toml_server(tmp_path / "b.pid") + added
            config_path.write_text(config_path.read_text() + f"\n[servers.b]\n{body}")
            reply = await agent.rpc("mcpd/reload")
            assert reply["error"]["code"] == -32000
            assert said in reply["error"]["message"]
            assert sorted(daemon.supervisor.servers) == ["a"]
            assert alive(first)
            assert any(t["name"].startswith("mcp__a__") for t in await agent.tools())


async def test_a_rejected_reload_says_no_part_of_a_token_its_error_cuts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("API_TOKEN", "Zq9x" * 100 + "Z")
    pidfile = tmp_path / "a.pid"
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(config_path, sock, {"a": toml_server(pidfile)})
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)),
            connect(str(sock)) as agent,
        ):
            await read_pid(pidfile)
            config_path.write_text(
                config_path.read_text()
                + '\n[servers.b]\nurl = "https://:8443/v1/${API_TOKEN}/mcp"\n'
            )
            reply = await agent.rpc("mcpd/reload")
    said = json.dumps(reply) + "".join(r.getMessage() for r in caplog.records)
    assert 'servers.b.url: URL \\"https://:8443/v1/${API_TOKEN}/mcp\\" has no host' in said
    assert any("reload rejected" in r.getMessage() for r in caplog.records)
    assert "Zq9" not in said


async def test_in_flight_call_on_a_removed_server_finishes(tmp_path: Path) -> None:
    pidfile = tmp_path / "slow.pid"
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(config_path, sock, {"slow": toml_server(pidfile, "--slow", "0.5")})
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
        ):
            await read_pid(pidfile)
            results: list[dict[str, Any]] = []

            async def call() -> None:
                results.append(await agent.call("mcp__slow__tool0", {"text": "x"}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await wait_for(lambda: daemon.supervisor.servers["slow"].inflight == 1)
                write_config(config_path, sock, {})
                report = await agent.result("mcpd/reload")
                assert report["removed"] == ["slow"]
            assert results[0]["content"][0]["text"] == "tool0:x"
            assert await agent.tools() == []


async def test_a_server_whose_sandbox_the_reload_changes_is_restarted(tmp_path: Path) -> None:
    """A running process keeps the limits (and sandbox) it was started with: a reload
    that changes the daemon's restarts the stdio servers that take them; one whose own
    table sets them is not touched."""
    pid = {name: tmp_path / f"{name}.pid" for name in ("takes", "own")}
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    servers = {
        "takes": toml_server(pid["takes"]) + 'sandbox = "off"\n',
        "own": toml_server(pid["own"]) + 'sandbox = "off"\nlimits = { open_files = 512 }\n',
    }
    write_config(config_path, sock, servers, extra='sandbox = "off"')
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)),
            connect(str(sock)) as agent,
        ):
            before = {n: await read_pid(pid[n]) for n in pid}
            pid["takes"].unlink()
            write_config(
                config_path, sock, servers, extra='sandbox = "off"\nlimits = { open_files = 256 }'
            )
            report = await agent.result("mcpd/reload")
            assert report["changed"] == ["takes"] and report["unchanged"] == ["own"]
            assert await read_pid(pid["takes"]) != before["takes"]
            assert not alive(before["takes"]) and alive(before["own"])
            # What every sandbox hides grows (a new secret file): a server without one
            # hides nothing, and keeps running (tests/sandbox covers the sandboxed).
            secret = tmp_path / "token"
            secret.write_text("s3cret")
            uses = toml_server(tmp_path / "uses.pid")
            uses += f'env = {{ T = "${{file:{secret}}}" }}\nsandbox = "off"\n'
            write_config(
                config_path,
                sock,
                servers | {"uses": uses},
                extra='sandbox = "off"\nlimits = { open_files = 256 }',
            )
            report = await agent.result("mcpd/reload")
            assert report["added"] == ["uses"] and report["changed"] == []


def operator_asks(state: Path) -> str:
    """``[daemon]`` keys and a rule: every call to ``spy`` is decided by the operator,
    and an approval is remembered for the connection."""
    return (
        f'state_dir = "{state}"\naudit_journal = false\n'
        '[[policy]]\nservers = ["spy"]\naction = "ask"\ndecider = "operator"\n'
        'remember = "connection"\n'
    )


async def waited_for_approval(daemon: Daemon, agent: Agent, name: str) -> bool:
    """Whether a call of ``name`` waited for a person (the operator, who approved it);
    it ran either way."""
    approvals = daemon.approvals
    asked: list[str] = []

    async def operator() -> None:
        while not approvals.list():
            await approvals.wait_change(approvals.version)
        [waiting] = approvals.list()
        asked.append(waiting.tool)
        approvals.decide(waiting.id, True, "uid 0 (root)")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(operator)
        result = await agent.call(name, {"text": "x"})
        nursery.cancel_scope.cancel()
    assert result["content"][0]["text"] == "sh:x", result
    return asked == [name]


async def test_a_reload_that_restarts_a_server_forgets_the_approvals_remembered_for_it(
    tmp_path: Path,
) -> None:
    pid = {name: tmp_path / f"{name}.pid" for name in ("spy", "other")}
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    rules = operator_asks(tmp_path / "state")
    servers = {
        "spy": toml_server(pid["spy"], "--names", "sh"),
        "other": toml_server(pid["other"]),
    }
    write_config(config_path, sock, servers, rules)
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
        ):
            assert await waited_for_approval(daemon, agent, "mcp__spy__sh")
            assert not await waited_for_approval(daemon, agent, "mcp__spy__sh")
            # Another server restarts: what was approved of spy stands.
            servers["other"] = toml_server(pid["other"], "--tools", "2")
            write_config(config_path, sock, servers, rules)
            report = await agent.result("mcpd/reload")
            assert report["changed"] == ["other"]
            assert not await waited_for_approval(daemon, agent, "mcp__spy__sh")
            # spy runs another program now, under the same rules: a person decides again.
            servers["spy"] = toml_server(pid["spy"], "--names", "sh", "--instructions", "new")
            write_config(config_path, sock, servers, rules)
            report = await agent.result("mcpd/reload")
            assert report["changed"] == ["spy"]
            assert await waited_for_approval(daemon, agent, "mcp__spy__sh")
            assert not await waited_for_approval(daemon, agent, "mcp__spy__sh")


async def test_the_new_rules_decide_calls_while_a_restarted_servers_call_still_runs(
    tmp_path: Path,
) -> None:
    """A reload that changes a server and the rules puts the rules in force before
    that server stops, which waits for its calls in flight: meanwhile a call the new
    rules deny is refused, and one to the server is told it restarts."""
    pid = {name: tmp_path / f"{name}.pid" for name in ("slow", "spy")}
    log = tmp_path / "spy.in"
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    servers = {
        "slow": toml_server(pid["slow"], "--hang-on-call"),
        "spy": toml_server(pid["spy"], "--names", "sh", "--log-file", str(log)),
    }
    write_config(config_path, sock, servers, "call_timeout = 600")
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
            trio.open_nursery() as nursery,
        ):
            await read_pid(pid["slow"])
            hanging = trio.CancelScope()

            async def long_call() -> None:
                with hanging:
                    async with connect(str(sock)) as other:
                        await other.call("mcp__slow__tool0", {"text": "x"})

            nursery.start_soon(long_call)
            await wait_for(lambda: daemon.supervisor.servers["slow"].inflight == 1)
            servers["slow"] = toml_server(pid["slow"])
            deny = '[[policy]]\nservers = ["spy"]\naction = "deny"\nreason = "spy is out"\n'
            write_config(config_path, sock, servers, "call_timeout = 600\n" + deny)
            reports: list[dict[str, Any]] = []

            async def reload() -> None:
                reports.append(await agent.result("mcpd/reload"))

            nursery.start_soon(reload)
            # The reload is under way: the changed server is being stopped, its call
            # still in flight.
            await wait_for(lambda: "slow" not in daemon.supervisor.servers)
            denied = await agent.call("mcp__spy__sh", {"text": "x"})
            assert denied["isError"] is True and "spy is out" in denied["content"][0]["text"]
            restarting = await agent.call("mcp__slow__tool0", {"text": "x"})
            said = restarting["content"][0]["text"]
            assert "restarting for a changed configuration" in said
            assert reports == []
            hanging.cancel()  # its agent leaves: the server stops, and starts again
        [report] = reports
        assert report["changed"] == ["slow"] and report["settings"] == ["policy"]
        assert '"tools/call"' not in log.read_text()
