"""`mcpd connect HOST`: each host's entry in its documented shape, working against any
daemon through the host's built-in profile, and --write keeping every other entry and a
backup, and writing mcpd's config only when the running daemon reads it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio

from mcpd.cli.hosts import hostconfig as hc
from mcpd.config.loading.load import load
from mcpd.config.tables import hosts
from tests.support.clients.agent import connect, running
from tests.support.clients.bridge import BridgeProcess
from tests.support.hosts.entries import DOCUMENTED, parsed
from tests.support.system.procs import scripted


def write_mcpd_config(tmp: Path, extra: str = "") -> Path:
    command, args = scripted("--names", "git_status,git_log")
    path = tmp / "mcpd.toml"
    path.write_text(
        f'# my mcpd\n[daemon]\nsocket = "{tmp / "mcpd.sock"}"\nstate_dir = "{tmp / "state"}"\n'
        f"{extra}\n[servers.git]\ncommand = {json.dumps(command)}\n"
        f"args = {json.dumps(list(args))}\n"
    )
    return path


async def mcpd_connect(tmp: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "CODEX_HOME")}
    env["HOME"] = str(tmp / "home")
    done = await trio.run_process(
        [sys.executable, "-m", "mcpd", "connect", *args, "--config", str(tmp / "mcpd.toml")],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=env,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def host_file(tmp: Path, key: str) -> Path:
    return hc.config_path(key, home=str(tmp / "home"), env={}, system="linux")


def printed_entry(key: str, out: str) -> tuple[str, dict[str, Any], str]:
    """The file named, the host's document printed, and the rest (a profile table)."""
    head, _, rest = out.partition("\n")
    body, _, profile = rest.partition("\n# mcpd's config")
    assert head.startswith(f"# {hc.host(key).title}: ")
    return head.split(": ", 1)[1], parsed(key, body), profile


@pytest.mark.parametrize("key", list(DOCUMENTED))
async def test_connect_prints_each_hosts_documented_entry(tmp_path: Path, key: str) -> None:
    write_mcpd_config(tmp_path)
    code, out, err = await mcpd_connect(tmp_path, key)
    assert code == 0, err
    where, doc, profile = printed_entry(key, out)
    spec = DOCUMENTED[key]
    assert where == str(host_file(tmp_path, key))
    body = doc[spec["key"]]["mcpd"]
    jsonschema.validate(body, spec["stdio"])
    argv = [body["command"], *body["args"]]
    assert Path(argv[0]).name == "mcpd" and Path(argv[0]).is_absolute()
    assert argv[1:4] == ["bridge", "--socket", str(tmp_path / "mcpd.sock")]
    # A prefixing host gets its own profile, built into every daemon: nothing to add.
    assert argv[4:] == (["--profile", key] if hosts.host_prefix(key) else [])
    assert profile == ""


@pytest.mark.parametrize("key", list(DOCUMENTED))
async def test_connect_http_gives_the_url_and_token(tmp_path: Path, key: str) -> None:
    write_mcpd_config(tmp_path, 'http_listen = "127.0.0.1:8765"')
    code, out, err = await mcpd_connect(tmp_path, key, "--http")
    spec = DOCUMENTED[key]
    if spec["url"] is None:
        assert code == 2 and "use the bridge" in err
        return
    assert code == 0, err
    body = printed_entry(key, out)[1][spec["key"]]["mcpd"]
    jsonschema.validate(body, spec["url"])
    token = (tmp_path / "state" / "token").read_text().strip()
    assert body.get("headers", body.get("http_headers")) == {"Authorization": f"Bearer {token}"}
    assert body["url"] == f"http://127.0.0.1:8765/mcp?profile={key}"


async def test_connect_http_on_localhost_gives_an_address_mcpd_holds(tmp_path: Path) -> None:
    """Not the name, which a host's resolver may take to the loopback address of
    another: mcpd holds 127.0.0.1 wherever it listens for localhost."""
    write_mcpd_config(tmp_path, 'http_listen = "localhost:8765"')
    code, out, err = await mcpd_connect(tmp_path, "cursor", "--http")
    assert code == 0, err
    assert '"url": "http://127.0.0.1:8765/mcp?profile=cursor"' in out


async def test_connect_http_needs_the_endpoint(tmp_path: Path) -> None:
    write_mcpd_config(tmp_path)
    code, _, err = await mcpd_connect(tmp_path, "cursor", "--http")
    assert code == 2 and "http_listen" in err


async def test_connect_http_warns_while_the_daemon_has_not_opened_the_endpoint(
    tmp_path: Path,
) -> None:
    """http_listen added to the file of a daemon already running: the entry's URL only
    answers once mcpd restarts, and the user is told before a host tries it."""
    cfg = write_mcpd_config(tmp_path)
    with trio.fail_after(60):
        async with running(load(cfg), str(cfg)):
            write_mcpd_config(tmp_path, 'http_listen = "127.0.0.1:8765"')
            code, out, err = await mcpd_connect(tmp_path, "cursor", "--http")
    assert code == 0, err
    assert '"url": "http://127.0.0.1:8765/mcp?profile=cursor"' in out
    assert f"the mcpd answering on {tmp_path / 'mcpd.sock'} serves no HTTP endpoint" in err
    assert "takes a restart, not a reload" in err
    # No daemon yet: the one started from this file opens the endpoint.
    code, _, err = await mcpd_connect(tmp_path, "cursor", "--http")
    assert code == 0 and err == ""


async def test_connect_write_merges_both_files_and_the_names_fit(tmp_path: Path) -> None:
    cfg = write_mcpd_config(tmp_path)
    target = host_file(tmp_path, "claude-code")
    target.parent.mkdir(parents=True, exist_ok=True)
    before = {"theme": "dark", "mcpServers": {"other": {"command": "x", "args": ["1"]}}}
    target.write_text(json.dumps(before))
    config_before = cfg.read_text()
    with trio.fail_after(60):
        async with running(load(cfg), str(cfg)) as daemon:
            code, out, err = await mcpd_connect(tmp_path, "claude-code", "--write")
            assert code == 0, err
            assert "the profile 'claude-code' is built in" in out
            async with connect(daemon.socket_path) as agent:
                await agent.use_profile("claude-code")
                names = [t["name"] for t in await agent.tools()]
    assert names == ["git__git_log", "git__git_status"]
    assert "mcp__mcpd__git__git_status" in {"mcp__mcpd__" + n for n in names}
    after = json.loads(target.read_text())
    assert (
        after["theme"] == "dark" and after["mcpServers"]["other"] == before["mcpServers"]["other"]
    )
    assert after["mcpServers"]["mcpd"]["args"][-2:] == ["--profile", "claude-code"]
    backups = list(target.parent.glob(".claude.json.bak-*"))
    assert len(backups) == 1 and json.loads(backups[0].read_text()) == before
    assert cfg.read_text() == config_before
    assert list(tmp_path.glob("mcpd.toml.bak-*")) == []
    again = await mcpd_connect(tmp_path, "claude-code", "--write")
    assert again[0] == 0 and "already has it" in again[1]


@pytest.mark.interop
async def test_gemini_cli_connects_through_what_mcpd_connect_writes(tmp_path: Path) -> None:
    from tests.support.hosts.entries import GEMINI, gemini_list

    if not GEMINI.exists():
        pytest.skip("the Gemini CLI is not installed; run `make peers`")
    cfg = write_mcpd_config(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "home" / ".gemini").mkdir(parents=True)
    trusted = {str(project): "TRUST_FOLDER"}
    (tmp_path / "home" / ".gemini" / "trustedFolders.json").write_text(json.dumps(trusted))
    with trio.fail_after(120):
        async with running(load(cfg), str(cfg)) as daemon:
            code, _, err = await mcpd_connect(tmp_path, "gemini-cli", "--write")
            assert code == 0, err
            assert daemon.agent_server.profiles.get("gemini-cli") is not None
            listing = await gemini_list(tmp_path / "home", project)
    body = json.loads(host_file(tmp_path, "gemini-cli").read_text())["mcpServers"]["mcpd"]
    argv = " ".join([body["command"], *body["args"]])
    assert argv.endswith("--profile gemini-cli")
    assert f"mcpd: {argv} (stdio) - Connected" in listing, listing


async def test_a_token_written_into_a_readable_host_file_is_made_private(tmp_path: Path) -> None:
    write_mcpd_config(tmp_path, 'http_listen = "127.0.0.1:8765"')
    target = tmp_path / "cursor.json"
    target.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    target.chmod(0o644)
    code, out, err = await mcpd_connect(
        tmp_path, "cursor", "--http", "--write", "--file", str(target)
    )
    assert code == 0, err
    assert "Bearer" in target.read_text()
    assert target.stat().st_mode & 0o077 == 0, "the token is readable by other users"
    assert "readable by its owner only" in out
    # What the token opens, as it is: every profile and the whole status, no control
    # method (a reload over HTTP with it is refused).
    assert "with which any profile and the whole of `mcpd status` can be read" in out
    assert "reload" not in out
    (backup,) = tmp_path.glob("cursor.json.bak-*")
    assert backup.stat().st_mode & 0o077 == 0
    # Written again unchanged, a file someone opened up again is closed again.
    target.chmod(0o644)
    code, out, _ = await mcpd_connect(
        tmp_path, "cursor", "--http", "--write", "--file", str(target)
    )
    assert code == 0 and "already has it" in out and target.stat().st_mode & 0o077 == 0


async def test_a_host_file_with_comments_is_left_as_it_is_and_the_entry_shown(
    tmp_path: Path,
) -> None:
    write_mcpd_config(tmp_path)
    target = tmp_path / "mcp.json"
    before = '{\n  // servers I use\n  "servers": {"other": {"command": "x"}}\n}\n'
    target.write_text(before)
    code, out, err = await mcpd_connect(tmp_path, "vscode", "--write", "--file", str(target))
    # 1, not 2: nothing was asked wrongly; what was asked cannot be done safely.
    assert code == 1, err
    assert "holds comments or trailing commas, which VS Code reads but writing" in err
    assert target.read_text() == before
    assert not list(tmp_path.glob("mcp.json.bak-*"))
    name, doc, _ = printed_entry("vscode", out)
    assert name == str(target)
    assert doc["servers"]["mcpd"]["type"] == "stdio"


async def test_a_relative_socket_is_written_as_an_absolute_path(tmp_path: Path) -> None:
    write_mcpd_config(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "CODEX_HOME")}
    env["HOME"] = str(tmp_path / "home")
    done = await trio.run_process(
        [sys.executable, "-m", "mcpd", "connect", "claude-desktop", "--socket", "run/main.sock",
         "--config", str(tmp_path / "mcpd.toml")],
        capture_stdout=True, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0
    body = printed_entry("claude-desktop", done.stdout.decode())[1]["mcpServers"]["mcpd"]
    assert body["args"][:2] == ["bridge", "--socket"]
    assert body["args"][2] == str(tmp_path / "run" / "main.sock")


# -- the host's profile is built in, and mcpd's config is written only where it is read --


def cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("XDG_CONFIG_HOME", "CODEX_HOME", "MCPD_CONFIG", "MCPD_SOCKET")
    }
    env["HOME"] = str(tmp / "home")
    env.update(extra)
    return env


async def cli(tmp: Path, *args: str, **env: str) -> tuple[int, str, str]:
    """``mcpd ARGS`` without a --config: the config is the one the commands find."""
    done = await trio.run_process(
        [sys.executable, "-m", "mcpd", *args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=cli_env(tmp, **env),
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@contextlib.asynccontextmanager
async def demo(tmp: Path) -> AsyncIterator[Path]:
    """``mcpd serve --demo``: a daemon started without a config file."""
    sock = tmp / "demo.sock"
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "mcpd", "serve", "--demo", "--socket", str(sock), "--log", "stderr"],
        stderr=subprocess.PIPE,
        env=cli_env(tmp),
    )
    try:
        said = b""
        assert proc.stderr is not None
        while f"listening on {sock}; ".encode() not in said:
            chunk = await proc.stderr.receive_some(65536)
            assert chunk, f"the demo exited: {said.decode()}"
            said += chunk
        yield sock
    finally:
        with trio.CancelScope(shield=True):
            proc.terminate()
            await proc.wait()


async def tools_through(argv: list[str]) -> list[str]:
    """The tool names a host that runs ``argv`` as its stdio server is listed."""
    proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    bridge = BridgeProcess(proc)
    try:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "h", "version": "0"},
        }
        assert "result" in await bridge.ask(1, "initialize", init)
        await bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = await bridge.ask(2, "tools/list")
    finally:
        with trio.CancelScope(shield=True):
            proc.kill()
            await proc.wait()
    assert "result" in listed, listed
    return sorted(t["name"] for t in listed["result"]["tools"])


async def test_the_printed_entry_works_against_the_demo(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with demo(tmp_path) as sock:
            code, out, err = await cli(tmp_path, "connect", "claude-code", "--socket", str(sock))
            assert code == 0, err
            _, doc, profile = printed_entry("claude-code", out)
            body = doc["mcpServers"]["mcpd"]
            names = await tools_through([body["command"], *body["args"]])
    assert profile == "" and body["args"][-2:] == ["--profile", "claude-code"]
    assert "notes__search" in names and "tickets__search" in names and len(names) == 6
    room = hosts.max_tool_name("claude-code")
    assert all(len(n) <= room for n in names)


async def test_write_against_a_daemon_without_a_config_file_creates_none(tmp_path: Path) -> None:
    # What the commands would take for mcpd's config: the daemon does not read it.
    cfg = tmp_path / "mcpd.toml"
    target = host_file(tmp_path, "claude-code")
    with trio.fail_after(90):
        async with demo(tmp_path) as sock:
            code, out, err = await cli(
                tmp_path, "connect", "claude-code", "--write", "--socket", str(sock),
                MCPD_CONFIG=str(cfg),
            )  # fmt: skip
            assert code == 0, err
            assert "the profile 'claude-code' is built in" in out
            written = target.read_text()
            # A profile of a new name would have to go into a config: not one it ignores.
            code, out, err = await cli(
                tmp_path, "connect", "claude-code", "--profile", "mine", "--write",
                "--socket", str(sock), MCPD_CONFIG=str(cfg),
            )  # fmt: skip
    assert code == 2, (out, err)
    assert f"the mcpd answering on {sock} was started without a config file" in err
    assert f"a profile written to {cfg} would not reach it" in err
    assert not cfg.exists() and list(tmp_path.glob("mcpd.toml*")) == []
    assert target.read_text() == written and "mine" not in written


async def test_a_new_profile_goes_only_into_the_config_the_daemon_reads(tmp_path: Path) -> None:
    cfg = write_mcpd_config(tmp_path)
    other = tmp_path / "other.toml"
    other.write_text(cfg.read_text())
    before = other.read_text()
    with trio.fail_after(60):
        async with running(load(cfg), str(cfg)) as daemon:
            sock = daemon.socket_path
            code, _, err = await cli(
                tmp_path, "connect", "cursor", "--profile", "extra", "--write",
                "--config", str(other), "--socket", sock,
            )  # fmt: skip
            assert code == 2
            assert f"the mcpd answering on {sock} reads {cfg}, not {other}" in err
            assert other.read_text() == before and not host_file(tmp_path, "cursor").exists()
            code, out, err = await cli(
                tmp_path, "connect", "cursor", "--profile", "extra", "--write", "--socket", sock
            )
            assert code == 0, err
            assert "mcpd reloaded its configuration" in out
            async with connect(sock) as agent:
                await agent.use_profile("extra")
                names = [t["name"] for t in await agent.tools()]
    assert "[profiles.extra]" in cfg.read_text()
    assert names == ["git__git_log", "git__git_status"]


async def test_a_config_that_defines_the_hosts_profile_keeps_its_own(tmp_path: Path) -> None:
    cfg = write_mcpd_config(tmp_path)
    cfg.write_text(cfg.read_text() + '\n[profiles.claude-code]\ntools = { allow = ["git_log"] }\n')
    before = cfg.read_text()
    with trio.fail_after(60):
        async with running(load(cfg), str(cfg)) as daemon:
            code, out, err = await mcpd_connect(tmp_path, "claude-code", "--write")
            assert code == 0, err
            async with connect(daemon.socket_path) as agent:
                await agent.use_profile("claude-code")
                names = [t["name"] for t in await agent.tools()]
    assert names == ["mcp__git__git_log"]
    assert cfg.read_text() == before and "built in" not in out


async def test_a_hosts_built_in_profile_offers_what_the_default_offers(tmp_path: Path) -> None:
    cfg = write_mcpd_config(tmp_path)
    cfg.write_text(cfg.read_text() + '\n[profiles.default]\ntools = { deny = ["git_log"] }\n')
    with trio.fail_after(60):
        async with running(load(cfg), str(cfg)) as daemon:
            shown = [p.name for p in daemon.status().profiles]
            async with connect(daemon.socket_path) as agent:
                await agent.use_profile("codex")
                names = [t["name"] for t in await agent.tools()]
                in_use = [p.name for p in daemon.status().profiles]
    # A default narrowed by the config narrows every host's profile too.
    assert names == ["git__git_status"]
    assert shown == ["default"] and in_use == ["codex", "default"]


async def test_a_profile_the_config_gains_on_reload_takes_the_built_in_ones_place(
    tmp_path: Path,
) -> None:
    cfg = write_mcpd_config(tmp_path)
    with trio.fail_after(60):
        async with running(load(cfg), str(cfg)) as daemon:
            async with connect(daemon.socket_path) as agent:
                await agent.use_profile("claude-code")
                built_in = [t["name"] for t in await agent.tools()]
            cfg.write_text(cfg.read_text() + '\n[profiles.claude-code]\nservers = ["git"]\n')
            await daemon.reload()
            async with connect(daemon.socket_path) as agent:
                await agent.use_profile("claude-code")
                configured = [t["name"] for t in await agent.tools()]
            shown = [p.name for p in daemon.status().profiles]
    assert built_in == ["git__git_log", "git__git_status"]
    assert configured == ["mcp__git__git_log", "mcp__git__git_status"]
    assert shown == ["claude-code", "default"]
