"""``mcpd import`` of the hosts whose entries have keys of their own: Windsurf's
``serverUrl`` and ``disabledTools``, Gemini CLI's ``httpUrl``, SSE ``url``,
``timeout``, ``trust`` and tool lists, Zed's ``context_servers`` in both forms; and
``mcpd import HOST``, which reads the host's own file. The written config passes
``check-config``, and served, shows only the tools the user had left on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import trio

from tests.support.clients.demo import spawn_http
from tests.support.daemons.as_operator import client, start, stop
from tests.support.system.procs import scripted

MCPD = [sys.executable, "-m", "mcpd"]
SAMPLES = Path(__file__).resolve().parents[3] / "support" / "import_samples"
TICKETS = [sys.executable, "-m", "mcpd.demo.tickets"]


def mcpd(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPD, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )


def imported(sample: str) -> tuple[dict[str, Any], str]:
    proc = mcpd("import", str(SAMPLES / sample))
    assert proc.returncode == 0, proc.stderr
    return tomllib.loads(proc.stdout), proc.stdout


def write_and_check(source: Path, tmp_path: Path, **env: str) -> Path:
    """``mcpd import SOURCE -o``, then ``check-config`` on what it wrote."""
    config = tmp_path / "mcpd.toml"
    made = mcpd("import", str(source), "-o", str(config))
    assert made.returncode == 0, made.stderr
    checked = mcpd("check-config", "--config", str(config), **env)
    assert checked.returncode == 0, checked.stderr
    return config


def served_tools(config: Path, tmp_path: Path) -> list[str]:
    sock = tmp_path / "mcpd.sock"
    proc = start(["--config", str(config)], sock)
    try:
        listed = json.loads(client(sock, "tools", "--json").stdout)["tools"]
        return sorted(t["name"] for t in listed)
    finally:
        stop(proc)


# -- the TOML each host's file becomes --


def test_windsurf_server_url_is_an_http_server_and_disabled_tools_stay_hidden(
    tmp_path: Path,
) -> None:
    data, text = imported("windsurf/.codeium/windsurf/mcp_config.json")
    figma = data["servers"]["figma"]
    assert figma["url"] == "https://mcp.figma.example.com/mcp"
    assert figma["enabled"] is False
    assert figma["headers"] == {"Authorization": "Bearer ${FIGMA_AUTHORIZATION}"}
    assert "fg_7Hq2" not in text
    github = data["servers"]["github"]
    assert github["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}
    assert github["tools"] == {"deny": ["delete_repository", "push_files"]}
    assert "skipped" not in text and "not imported" not in text
    write_and_check(
        SAMPLES / "windsurf/.codeium/windsurf/mcp_config.json", tmp_path, GITHUB_TOKEN="t"
    )


def test_gemini_transports_timeout_trust_filters_and_bare_variables(tmp_path: Path) -> None:
    data, text = imported("gemini-cli/.gemini/settings.json")
    servers = data["servers"]
    tools = servers["pythonTools"]
    assert tools["cwd"] == "/home/ada/projects/tools"
    assert tools["call_timeout"] == 15.0 and tools["trusted"] is True
    # Gemini expands $NAME as well as ${NAME}: both are mcpd references.
    assert tools["env"] == {
        "DATABASE_URL": "${DB_CONNECTION_STRING}",
        "API_KEY": "${EXTERNAL_API_KEY}",
    }
    assert tools["tools"] == {"deny": ["drop_table"]}
    http = servers["httpServer"]
    assert (http["url"], http["transport"]) == ("https://api.example.com/mcp", "http")
    assert http["headers"]["Authorization"] == "Bearer ${API_TOKEN}"
    assert http["call_timeout"] == 5.0
    assert http["tools"] == {"allow": ["search", "fetch"], "deny": ["fetch_private"]}
    # A plain "url" is Gemini's SSE; with "type": "http" it is Streamable HTTP.
    assert servers["events"]["transport"] == "sse"
    assert servers["sseServer"]["transport"] == "sse"
    assert "transport" not in servers["added"]
    assert "mcpServers.pythonTools.trust: imported as trusted = true" in text
    env = {"DB_CONNECTION_STRING": "db", "EXTERNAL_API_KEY": "k", "API_TOKEN": "t", "SSE_KEY": "s"}
    config = write_and_check(SAMPLES / "gemini-cli/.gemini/settings.json", tmp_path, **env)
    checked = mcpd("check-config", "--config", str(config), **env).stdout
    assert re.search(r"events\s+sse\s+https://events.example.com/stream", checked)


def test_zed_context_servers_in_both_forms_and_extensions_reported(tmp_path: Path) -> None:
    data, text = imported("zed/.config/zed/settings.json")
    servers = data["servers"]
    assert sorted(servers) == ["filesystem", "linear", "sqlite"]
    assert servers["filesystem"]["command"] == "npx"
    assert servers["filesystem"]["args"][-1] == "/home/ada/src"
    assert servers["sqlite"] == {
        "command": "uvx",
        "args": ["mcp-server-sqlite", "--db-path", "/home/ada/test.db"],
        "env": {"LOG_LEVEL": "info"},
    }
    assert servers["linear"]["url"] == "https://mcp.linear.example.com/mcp"
    assert servers["linear"]["enabled"] is False
    assert "context_servers.mcp-server-context7: provided by a Zed extension" in text
    assert "unknown key" not in text
    write_and_check(SAMPLES / "zed/.config/zed/settings.json", tmp_path, LINEAR_TOKEN="t")


# -- the host's own file, by name --


def test_import_by_host_name_reads_the_hosts_user_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for sample, where in (
        ("windsurf/.codeium/windsurf/mcp_config.json", ".codeium/windsurf/mcp_config.json"),
        ("gemini-cli/.gemini/settings.json", ".gemini/settings.json"),
        ("zed/.config/zed/settings.json", ".config/zed/settings.json"),
    ):
        (home / where).parent.mkdir(parents=True)
        (home / where).write_text((SAMPLES / sample).read_text())
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    for name, alias, where in (
        ("windsurf", "figma", ".codeium/windsurf/mcp_config.json"),
        ("gemini-cli", "httpServer", ".gemini/settings.json"),
        ("zed", "sqlite", ".config/zed/settings.json"),
    ):
        proc = mcpd("import", name, **env)
        assert proc.returncode == 0, proc.stderr
        assert alias in tomllib.loads(proc.stdout)["servers"]
        assert f"from {home / where}" in proc.stderr
    missing = mcpd("import", "windsurf", HOME=str(tmp_path / "nobody"))
    assert missing.returncode == 78
    assert f"{tmp_path}/nobody/.codeium/windsurf/mcp_config.json" in missing.stderr


def test_the_entry_mcpd_connect_wrote_is_not_imported_as_a_server(tmp_path: Path) -> None:
    """A host's file that ``mcpd connect --write`` changed holds mcpd's own bridge;
    imported, mcpd would run a bridge back to itself as one of its servers."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "MCPD_SOCKET": str(tmp_path / "mcpd.sock")}
    for host in ("claude-code", "gemini-cli"):
        wrote = mcpd("connect", host, "--write", **env)
        assert wrote.returncode == 0, wrote.stderr
    for host, file in (("claude-code", ".claude.json"), ("gemini-cli", ".gemini/settings.json")):
        doc = json.loads((home / file).read_text())
        doc["mcpServers"]["notes"] = {"command": "notes-server", "args": ["--dir", "/srv"]}
        doc["mcpServers"]["local"] = {"command": "python3", "args": ["-m", "mcpd", "bridge"]}
        (home / file).write_text(json.dumps(doc))
        proc = mcpd("import", host, **env)
        assert proc.returncode == 0, proc.stderr
        assert list(tomllib.loads(proc.stdout)["servers"]) == ["notes"]
        assert "mcpServers.mcpd: mcpd's own entry (`mcpd bridge`" in proc.stdout
        assert "mcpServers.local: mcpd's own entry" in proc.stdout


# -- served: the tools the user turned off stay off --


async def test_imported_servers_start_and_list_only_the_tools_left_on(tmp_path: Path) -> None:
    lookup, lookup_args = scripted("--names", "lookup,erase,audit")
    async with spawn_http(TICKETS, tmp_path) as port:
        windsurf = tmp_path / "windsurf" / "mcp_config.json"
        windsurf.parent.mkdir()
        windsurf.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "tickets": {
                            "serverUrl": f"http://127.0.0.1:{port}/mcp",
                            "disabledTools": ["create_ticket"],
                        }
                    }
                },
                indent=2,
            )
        )
        gemini = tmp_path / ".gemini" / "settings.json"
        gemini.parent.mkdir()
        gemini.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "desk": {
                            "httpUrl": f"http://127.0.0.1:{port}/mcp",
                            "includeTools": ["search", "create_ticket"],
                            "excludeTools": ["create_ticket"],
                        },
                        "lookup": {
                            "command": lookup,
                            "args": list(lookup_args),
                            "excludeTools": ["erase"],
                            "timeout": 20000,
                        },
                    }
                },
                indent=2,
            )
        )
        zed = tmp_path / "zed" / "settings.json"
        zed.parent.mkdir()
        zed.write_text(
            '// Zed settings\n{\n  "context_servers": {\n'
            f'    "old": {{"command": {{"path": {json.dumps(lookup)}, '
            f'"args": {json.dumps(list(lookup_args))}, "env": {{}}}}, "settings": {{}}}},\n'
            "  },\n}\n"
        )

        def seen(source: Path) -> list[str]:
            out = tmp_path / source.parent.name
            out.mkdir(exist_ok=True)
            return served_tools(write_and_check(source, out), out)

        assert await trio.to_thread.run_sync(seen, windsurf) == [
            "mcp__tickets__get_ticket",
            "mcp__tickets__search",
        ]
        assert await trio.to_thread.run_sync(seen, gemini) == [
            "mcp__desk__search",
            "mcp__lookup__audit",
            "mcp__lookup__lookup",
        ]
        assert await trio.to_thread.run_sync(seen, zed) == [
            "mcp__old__audit",
            "mcp__old__erase",
            "mcp__old__lookup",
        ]


def test_a_relative_cwd_is_taken_from_the_folder_the_host_runs_in(tmp_path: Path) -> None:
    # Gemini CLI reads a project's .gemini/settings.json when started in the project,
    # and hands "./" to the system as it is: the project is the server's folder.
    project = tmp_path / "project"
    settings = project / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    body = {"mcpServers": {"here": {"command": "/bin/true", "cwd": "./"}}}
    settings.write_text(json.dumps({"mcpServers": {"sub": {"command": "/bin/true", "cwd": "db"}}}))
    proc = mcpd("import", str(settings))
    assert tomllib.loads(proc.stdout)["servers"]["sub"]["cwd"] == str(project / "db")
    assert f"sub.cwd: 'db' is relative to the host's folder: imported as '{project}/db'" in (
        proc.stdout
    )
    # The user's own file is read wherever the host is started: no folder to take.
    home = tmp_path / "home"
    own = home / ".gemini" / "settings.json"
    own.parent.mkdir(parents=True)
    own.write_text(json.dumps(body))
    proc = mcpd("import", str(own), HOME=str(home))
    assert proc.returncode == 0, proc.stderr
    assert "cwd" not in tomllib.loads(proc.stdout)["servers"]["here"]
    assert "mcpServers.here.cwd: './' is relative to the folder the host was started in" in (
        proc.stdout
    )
    # Served as the config as it is, the file starts: no relative cwd reaches mcpd.
    assert mcpd("check-config", "--config", str(own), HOME=str(home)).returncode == 0
