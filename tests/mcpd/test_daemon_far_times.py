"""Times a config could put past any date: refused as the config is read, and never
fatal to the daemon where one arises all the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import trio

from mcpd.config.loading.load import load
from mcpd.daemon import Daemon
from tests.support.clients.agent import connect, running
from tests.support.daemons.reloading import toml_server, wait_for, write_config
from tests.support.system.procs import alive, read_pid

FAILING = 'command = "/bin/false"\n'


async def _failures(daemon: Daemon, alias: str, count: int) -> None:
    """Wait for ``count`` more failures of the server (each sets a new retry time)."""
    runner = daemon.supervisor.servers[alias]
    for _ in range(count):
        seen = runner.outage().retry_at

        def moved(seen: float | None = seen) -> bool:
            return runner.outage().retry_at not in (None, seen)

        await wait_for(moved)


async def test_a_reload_with_a_delay_past_a_year_is_refused_and_the_daemon_serves_on(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "a.pid"
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(config_path, sock, {"a": toml_server(pidfile), "bad": FAILING})
    with trio.fail_after(60):
        async with (
            running(load(config_path), str(config_path)) as daemon,
            connect(str(sock)) as agent,
        ):
            first = await read_pid(pidfile)
            servers = {"a": toml_server(pidfile), "bad": FAILING, "bad2": FAILING}
            write_config(config_path, sock, servers, "backoff_cap = 1e13\n")
            text = config_path.read_text().replace("backoff_base = 0.05", "backoff_base = 1e13")
            config_path.write_text(text)
            reply = await agent.rpc("mcpd/reload")
            assert (
                "daemon.backoff_base: must be positive, at most 31536000"
                in (reply["error"]["message"])
            )
            assert sorted(daemon.supervisor.servers) == ["a", "bad"]
            # The failing server goes on failing and being retried, the daemon with it.
            await _failures(daemon, "bad", 3)
            assert alive(first)
            assert any(t["name"].startswith("mcp__a__") for t in await agent.tools())


async def test_a_retry_past_the_last_date_a_clock_shows_does_not_stop_the_daemon(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "a.pid"
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(config_path, sock, {"a": toml_server(pidfile), "bad": FAILING})
    checked = load(config_path)
    # What no config can give since it is read with its bounds: the daemon writes
    # such a time down without failing all the same.
    # The delay is drawn between none and its ceiling: a ceiling this far keeps even a
    # small draw past the last date a clock shows.
    far = msgspec.structs.replace(checked.daemon, backoff_base=1e18, backoff_cap=float("inf"))
    config = msgspec.structs.replace(checked, daemon=far)
    with trio.fail_after(60):
        async with (
            running(config, str(config_path)) as daemon,
            connect(str(sock)) as agent,
        ):
            await read_pid(pidfile)
            bad = daemon.supervisor.servers["bad"]
            await wait_for(lambda: bad.outage().retry_at is not None)
            status = json.dumps(await agent.result("mcpd/status"))
            assert "9999-12-31T23:59:59" in status
            assert any(t["name"].startswith("mcp__a__") for t in await agent.tools())


def test_a_delay_no_clock_can_reach_stops_serve_as_a_config_error(tmp_path: Path) -> None:
    config_path = tmp_path / "mcpd.toml"
    sock = tmp_path / "mcpd.sock"
    write_config(config_path, sock, {"bad": FAILING}, "backoff_cap = inf\n")
    config_path.write_text(config_path.read_text().replace("= 0.05", "= inf"))
    served = subprocess.run(
        [sys.executable, "-m", "mcpd", "serve", "--config", str(config_path), "--log", "stderr"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    assert served.returncode == 78, served.stderr
    assert f"config error: {config_path}: daemon.backoff_base: must be positive" in served.stderr
    assert "Traceback" not in served.stderr
