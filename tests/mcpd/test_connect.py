"""`mcpd connect HOST`: each host's entry in its documented shape, the profile it needs
for a host that prefixes names, and --write keeping every other entry and a backup."""

from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio

from mcpd.cli import hostconfig as hc
from mcpd.config import hosts
from mcpd.config.load import load
from tests.support.agent import connect, running
from tests.support.procs import scripted

from .test_hostconfig import DOCUMENTED, parsed


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
    if hosts.host_prefix(key):
        # A prefixing host gets its own profile, with names that fit beside the prefix.
        assert argv[4:] == ["--profile", key]
        table = tomllib.loads(profile.split("\n", 1)[1])["profiles"][key]
        assert table["template"] == "{alias}__{tool}"
        assert table["max_length"] == hosts.max_tool_name(key)
        assert len(hosts.host_prefix(key)) + table["max_length"] <= hc.host(key).max_name
    else:
        assert argv[4:] == [] and profile == ""


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


async def test_connect_http_needs_the_endpoint(tmp_path: Path) -> None:
    write_mcpd_config(tmp_path)
    code, _, err = await mcpd_connect(tmp_path, "cursor", "--http")
    assert code == 2 and "http_listen" in err


async def test_connect_write_merges_both_files_and_the_names_fit(tmp_path: Path) -> None:
    cfg = write_mcpd_config(tmp_path)
    target = host_file(tmp_path, "claude-code")
    target.parent.mkdir(parents=True, exist_ok=True)
    before = {"theme": "dark", "mcpServers": {"other": {"command": "x", "args": ["1"]}}}
    target.write_text(json.dumps(before))
    with trio.fail_after(60):
        async with running(load(cfg), str(cfg)) as daemon:
            code, out, err = await mcpd_connect(tmp_path, "claude-code", "--write")
            assert code == 0, err
            assert "mcpd reloaded its configuration" in out
            assert daemon.api.profiles.get("claude-code") is not None
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
    text = cfg.read_text()
    assert text.startswith("# my mcpd\n") and "[profiles.claude-code]" in text
    assert len(list(tmp_path.glob("mcpd.toml.bak-*"))) == 1
    again = await mcpd_connect(tmp_path, "claude-code", "--write")
    assert again[0] == 0 and "already has it" in again[1]


@pytest.mark.interop
async def test_gemini_cli_connects_through_what_mcpd_connect_writes(tmp_path: Path) -> None:
    from .test_hostconfig import GEMINI, gemini_list

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
            assert daemon.api.profiles.get("gemini-cli") is not None
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
    (backup,) = tmp_path.glob("cursor.json.bak-*")
    assert backup.stat().st_mode & 0o077 == 0
    # Written again unchanged, a file someone opened up again is closed again.
    target.chmod(0o644)
    code, out, _ = await mcpd_connect(
        tmp_path, "cursor", "--http", "--write", "--file", str(target)
    )
    assert code == 0 and "already has it" in out and target.stat().st_mode & 0o077 == 0


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
