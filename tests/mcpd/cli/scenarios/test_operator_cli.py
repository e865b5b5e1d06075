"""The operator's command line: ``mcpd import`` on files written the way Claude Desktop,
Claude Code, Cursor and VS Code document them; ``mcpd serve --config FILE.json``;
``mcpd tools --format/--check-names``; ``mcpd status --watch``."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpd.cli.client import QUICK, Client
from mcpd.config.loading.load import parse_config
from tests.support.daemons.as_operator import MCPD, client, mcpd, start, stop
from tests.support.system.procs import scripted

SAMPLES = Path(__file__).resolve().parents[3] / "support" / "import_samples"


def imported(sample: str) -> tuple[dict[str, Any], str, str]:
    """(the TOML's data, the TOML text, stderr) for one sample file."""
    proc = mcpd("import", str(SAMPLES / sample))
    assert proc.returncode == 0, proc.stderr
    return tomllib.loads(proc.stdout), proc.stdout, proc.stderr


def usable(data: dict[str, Any], **env: str) -> None:
    """The printed TOML is a valid mcpd config once its variables are set."""
    parse_config(data, env={"HOME": "/home/ada", **env})


# -- mcpd import --


def test_import_claude_desktop_keeps_servers_and_hides_the_token() -> None:
    data, text, err = imported("claude-desktop/claude_desktop_config.json")
    servers = data["servers"]
    assert sorted(servers) == ["filesystem", "github", "weather_service"]
    assert servers["filesystem"]["args"][-1] == "/Users/ada/Downloads"
    # The token from the file is not printed; a variable of the same name replaces it.
    assert "ghp_" not in text
    token = servers["github"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"]
    assert token == "${GITHUB_PERSONAL_ACCESS_TOKEN}"
    assert "#   GITHUB_PERSONAL_ACCESS_TOKEN  (servers.github.env" in text
    # A literal "$" stays literal in mcpd's syntax; a non-secret value is kept.
    assert servers["weather_service"]["env"] == {"UNITS": "metric", "PRICE_LIMIT": "$$5"}
    assert "'weather.service' became the alias 'weather_service'" in text
    assert "imported 3 server(s)" in err and "1 secret(s) to provide" in err
    config = parse_config(data, env={"GITHUB_PERSONAL_ACCESS_TOKEN": "t"})
    assert config.servers["weather_service"].env["PRICE_LIMIT"] == "$5"


def test_import_claude_code_project_file_with_types_and_expansions() -> None:
    data, text, _ = imported("claude-code/.mcp.json")
    servers = data["servers"]
    # A project's servers run in its folder, as the host ran them.
    folder = str(SAMPLES / "claude-code")
    assert servers["shared-server"] == {"command": "/path/to/server", "cwd": folder}
    assert servers["api-server"]["url"] == "${API_BASE_URL:-https://api.example.com}/mcp"
    assert servers["api-server"]["headers"] == {"Authorization": "Bearer ${API_KEY}"}
    assert servers["db"]["args"][-1] == "${DATABASE_URL}"
    assert servers["db"]["env"] == {"DEBUG": "${DEBUG:-false}"}
    # A literal API key in a header is replaced; the old SSE transport is kept.
    assert "k_live_" not in text
    assert servers["legacy-events"]["headers"] == {"X-API-Key": "${LEGACY_EVENTS_X_API_KEY}"}
    assert servers["legacy-events"]["transport"] == "sse"
    usable(data, API_KEY="k", DATABASE_URL="postgres://db", LEGACY_EVENTS_X_API_KEY="k")


def test_import_claude_code_user_file_runs_each_projects_servers_in_its_folder() -> None:
    """Claude Code starts a project's servers in that project's folder, so one named as
    another elsewhere is another server: it gets a name of its own and the folder as cwd."""
    data, text, _ = imported("claude-code/claude.json")
    servers = data["servers"]
    assert sorted(servers) == ["memory", "memory_2", "sentry", "sentry_2"]
    assert "cwd" not in servers["memory"]
    assert servers["memory_2"]["cwd"] == "/home/ada/work/site"
    assert servers["memory_2"]["args"] == servers["memory"]["args"]
    assert servers["sentry_2"]["headers"] == {"Authorization": "Bearer ${SENTRY_TOKEN}"}
    assert (
        "projects./home/ada/work/site.mcpServers.memory: another server named 'memory'; "
        "imported as memory_2"
    ) in text
    assert (
        "projects./home/ada/work/api.mcpServers.sentry: another server named 'sentry'; "
        "imported as sentry_2"
    ) in text
    assert "kept once" not in text
    usable(data, SENTRY_TOKEN="t")


def test_import_cursor_variables() -> None:
    data, text, _ = imported("cursor/.cursor/mcp.json")
    docs = data["servers"]["local-docs"]
    workspace = str((SAMPLES / "cursor").resolve())
    assert docs["args"] == [
        f"{workspace}/tools/docs_server.py",
        "--cache",
        "${HOME}/.cache/docs",
    ]
    assert docs["env"] == {"API_KEY": "${DOCS_API_KEY}"}
    assert "envFile: not read" in text
    remote = data["servers"]["remote-server"]
    assert remote["headers"] == {"Authorization": "Bearer ${MY_SERVICE_TOKEN}"}
    assert data["servers"]["notion"]["enabled"] is False
    usable(data, DOCS_API_KEY="k", MY_SERVICE_TOKEN="t")


def test_import_vscode_servers_inputs_comments_and_trailing_commas() -> None:
    data, text, _ = imported("vscode/.vscode/mcp.json")
    servers = data["servers"]
    assert sorted(servers) == ["Perplexity", "fetch", "github"]
    assert servers["Perplexity"]["env"] == {"PERPLEXITY_API_KEY": "${PERPLEXITY_KEY}"}
    assert servers["github"]["headers"] == {"Authorization": "Bearer ${GH_TOKEN}"}
    assert "the input 'perplexity-key' (Perplexity API Key) is read from $PERPLEXITY_KEY" in text
    assert "servers.fetch.dev: a setting of the other host; not imported" in text
    usable(data, PERPLEXITY_KEY="k", GH_TOKEN="t")


def test_import_reports_duplicate_json_keys(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        textwrap.dedent(
            """\
            {"mcpServers": {
              "notes": {"command": "notes-v1"},
              "notes": {"command": "notes-v2", "args": ["--x"], "args": ["--y"]}
            }}
            """
        )
    )
    proc = mcpd("import", str(path))
    assert proc.returncode == 0, proc.stderr
    data = tomllib.loads(proc.stdout)
    assert data["servers"]["notes"] == {"command": "notes-v2", "args": ["--y"]}
    assert "mcpServers.notes: the key appears more than once; the last one wins" in proc.stdout
    assert "mcpServers.notes.args: the key appears more than once" in proc.stdout


def test_import_writes_a_file_and_refuses_to_overwrite_it(tmp_path: Path) -> None:
    out = tmp_path / "config.toml"
    src = str(SAMPLES / "claude-code/.mcp.json")
    assert mcpd("import", src, "-o", str(out)).returncode == 0
    assert "[servers.db]" in out.read_text()
    again = mcpd("import", src, "-o", str(out))
    assert again.returncode == 2 and "--force" in again.stderr
    assert mcpd("import", src, "-o", str(out), "--force").returncode == 0


def test_import_of_something_else_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"editor.fontSize": 14}')
    proc = mcpd("import", str(path))
    assert proc.returncode == 78
    assert "no MCP servers found" in proc.stderr
    path.write_text("{ nope")
    assert "not valid JSON" in mcpd("import", str(path)).stderr


# -- a running daemon --


LONG = "summarize_the_entire_quarterly_report_by_region"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("ops")
    sock = base / "mcpd.sock"
    command, args = scripted("--names", f"search,{LONG}")
    lazy_cmd, lazy_args = scripted("--tools", "1")
    config = base / "config.toml"
    config.write_text(
        textwrap.dedent(
            f"""\
            [daemon]
            state_dir = "{base / "state"}"
            [servers.reports]
            command = {json.dumps(command)}
            args = {json.dumps(list(args))}
            [servers.files]
            command = {json.dumps(lazy_cmd)}
            args = {json.dumps(list(lazy_args))}
            start = "lazy"
            """
        )
    )
    proc = start(["--config", str(config)], sock)
    try:
        yield sock
    finally:
        stop(proc)


@pytest.mark.parametrize(
    ("fmt", "shape"),
    [
        ("anthropic", lambda t: (t["name"], t["input_schema"]["type"])),
        ("openai", lambda t: (t["function"]["name"], t["function"]["parameters"]["type"])),
        ("openai-responses", lambda t: (t["name"], t["parameters"]["type"])),
    ],
)
def test_tools_in_model_api_shapes(daemon: Path, fmt: str, shape: Any) -> None:
    out = client(daemon, "tools", "--format", fmt)
    assert out.returncode == 0, out.stderr
    tools = json.loads(out.stdout)
    assert sorted(shape(t) for t in tools) == [
        ("mcp__files__tool0", "object"),
        ("mcp__reports__search", "object"),
        (f"mcp__reports__{LONG}", "object"),
    ]
    for t in tools:
        assert "annotations" not in json.dumps(t) and "_meta" not in t
    if fmt == "anthropic":
        (search,) = (t for t in tools if t["name"] == "mcp__reports__search")
        assert search["description"] == "[reports] test tool 0"
        assert set(search) == {"name", "description", "input_schema"}
    if fmt == "openai":
        assert all(t["type"] == "function" for t in tools)


def test_check_names_against_a_hosts_prefix(daemon: Path) -> None:
    fits = client(daemon, "tools", "--check-names", "64")
    assert fits.returncode == 0
    assert fits.stdout.strip() == "all 3 tool names fit 64 characters"
    # Claude Code adds mcp__<name it knows mcpd by>__ in front of every tool.
    cut = client(daemon, "tools", "--check-names", "64", "--host-prefix", "mcp__mcpd__")
    assert cut.returncode == 1
    full = f"mcp__reports__{LONG}"
    assert f"  {full}  ({11 + len(full)})" in cut.stdout
    assert "[naming] max_length = 53" in cut.stdout
    assert "mcp__reports__search" not in cut.stdout


def test_status_shows_a_lazy_server_idle(daemon: Path) -> None:
    status = json.loads(client(daemon, "status", "--json").stdout)
    states = {s["alias"]: s["state"] for s in status["servers"]}
    assert states == {"files": "idle", "reports": "ready"}
    table = client(daemon, "status").stdout
    assert "2 servers: 1 ready, 1 idle" in table


def test_status_watch_redraws_until_interrupted(daemon: Path) -> None:
    proc = subprocess.Popen(
        [*MCPD, "status", "--watch", "0.2", "--socket", str(daemon)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    frames = 0
    for line in proc.stdout:
        if line.startswith("every 0.2 s: mcpd status"):
            frames += 1
            if frames == 3:
                break
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 0
    assert frames == 3


def test_status_watch_rides_out_a_missing_daemon(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*MCPD, "status", "--watch", "0.2", "--socket", str(tmp_path / "none.sock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen = [next(proc.stdout) for _ in range(4)]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 0
    assert any("no mcpd is listening" in line for line in seen)


def test_serve_takes_an_mcp_servers_json_file(tmp_path: Path) -> None:
    command, args = scripted("--names", "lookup")
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(
        json.dumps({"mcpServers": {"my lookup": {"command": command, "args": list(args)}}})
    )
    sock = tmp_path / "mcpd.sock"
    proc = start(["--config", str(config)], sock)
    try:
        tools = json.loads(client(sock, "tools", "--json").stdout)["tools"]
        assert [t["name"] for t in tools] == ["mcp__my_lookup__lookup"]
        called = client(sock, "call", "mcp__my_lookup__lookup", '{"text": "x"}')
        assert called.stdout.strip() == "lookup:x"
        check = mcpd("check-config", "--config", str(config))
        assert check.returncode == 0 and "my_lookup" in check.stdout
    finally:
        stop(proc)


def test_check_config_marks_lazy_servers(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[servers.files]\ncommand = "python3"\nstart = "lazy"\n')
    out = mcpd("check-config", "--config", str(config))
    assert out.returncode == 0
    assert re.search(r"files\s+stdio, lazy\s+python3", out.stdout)


def test_reload_says_what_waits_for_a_restart_and_a_rejected_config_exits_78(
    tmp_path: Path,
) -> None:
    sock = tmp_path / "mcpd.sock"
    config = tmp_path / "config.toml"
    command, args = scripted()
    server = f"[servers.s]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    daemon = f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
    config.write_text(daemon + server)
    proc = start(["--config", str(config)], sock)
    try:
        # The endpoint starts with the daemon: a reload takes the rest, and says so.
        config.write_text(daemon + 'http_listen = "127.0.0.1:18799"\n' + server)
        out = client(sock, "reload")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("reloaded: added -, removed -, changed -, unchanged s\n")
        assert "not applied until mcpd restarts: daemon.http_listen\n" in out.stdout
        # Compared with what runs, not with the file read last: still waiting, and back
        # to what runs is nothing to wait for. The socket (given by --socket) never is.
        assert "restarts: daemon.http_listen\n" in client(sock, "reload").stdout
        config.write_text(daemon + server)
        assert "restart" not in client(sock, "reload").stdout
        # What a reload puts in force besides the servers is said to be.
        config.write_text(daemon + server + '[[policy]]\ntools = ["*"]\naction = "deny"\n')
        assert "in force now: policy\n" in client(sock, "reload").stdout
        config.write_text(daemon + server)
        # A config the daemon will not take exits as a config error does for serve.
        config.write_text(daemon + server + "comand = 'x'\n")
        out = client(sock, "reload")
        assert out.returncode == 78, (out.returncode, out.stderr)
        assert "servers.s.comand: unknown key" in out.stderr
    finally:
        stop(proc)


def test_reload_says_a_new_line_limit_is_for_new_connections_which_alone_take_it(
    tmp_path: Path,
) -> None:
    sock = tmp_path / "mcpd.sock"
    config = tmp_path / "config.toml"
    command, args = scripted()
    server = f"[servers.s]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    daemon = f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
    config.write_text(daemon + "max_line_bytes = 65536\n" + server)
    proc = start(["--config", str(config)], sock)
    try:
        with Client(str(sock), QUICK) as open_before:
            assert open_before.request("mcpd/lineLimit") == {"maxLineBytes": 65536}
            config.write_text(daemon + "max_line_bytes = 131072\ncall_timeout = 9\n" + server)
            out = client(sock, "reload")
            assert out.returncode == 0, out.stderr
            assert "in force now: daemon.call_timeout\n" in out.stdout
            assert "for new connections: daemon.max_line_bytes\n" in out.stdout
            assert open_before.request("mcpd/lineLimit") == {"maxLineBytes": 65536}
        with Client(str(sock), QUICK) as opened_after:
            assert opened_after.request("mcpd/lineLimit") == {"maxLineBytes": 131072}
    finally:
        stop(proc)


def test_call_asks_for_progress_and_shows_it_on_stderr(tmp_path: Path) -> None:
    # The token is what lets progress extend a call's time limit; the reports go to
    # stderr, so stdout stays the result.
    sock = tmp_path / "mcpd.sock"
    config = tmp_path / "config.toml"
    command, args = scripted("--progress", "3")
    config.write_text(
        f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
        f"[servers.s]\ncommand = {json.dumps(command)}\nargs = {json.dumps(list(args))}\n"
    )
    proc = start(["--config", str(config)], sock)
    try:
        out = client(sock, "call", "mcp__s__tool0", '{"text": "x"}')
        assert out.returncode == 0, out.stderr
        assert out.stdout == "tool0:x\n"
        assert out.stderr.splitlines() == [
            "mcpd: progress 1/3: step 1",
            "mcpd: progress 2/3: step 2",
            "mcpd: progress 3/3: step 3",
        ]
    finally:
        stop(proc)
