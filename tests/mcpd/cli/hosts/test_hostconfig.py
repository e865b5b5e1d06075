"""Host config entries: each host's documented shape, merges that keep everything else,
backups and modes, tool-name prefixes, and the Gemini CLI reading what mcpd wrote."""

from __future__ import annotations

import json
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio

from mcpd.cli.hosts import hostconfig as hc
from mcpd.cli.hosts.hostconfig import HostConfigError
from mcpd.config.tables import hosts
from tests.support.hosts.entries import DOCUMENTED, GEMINI, gemini_list, parsed

BRIDGE = ["/usr/bin/mcpd", "bridge", "--profile", "dev"]
URL = "http://127.0.0.1:8765/mcp"
TOKEN = "s3cret-token"


def snippet(key: str, **how: Any) -> tuple[Path, str]:
    """The host's file and what mcpd would write to it when it has none yet."""
    return hc.config_path(key), hc.merge(key, "", hc.entry(key, **how))


@pytest.mark.parametrize("key", list(DOCUMENTED))
def test_bridge_snippet_has_the_documented_shape(key: str) -> None:
    path, text = snippet(key, bridge_argv=BRIDGE, env={"MCPD_SOCKET": "/run/m.sock"})
    doc = parsed(key, text)
    spec = DOCUMENTED[key]
    assert list(doc) == [spec["key"]] and list(doc[spec["key"]]) == ["mcpd"]
    body = doc[spec["key"]]["mcpd"]
    jsonschema.validate(body, spec["stdio"])
    assert [body["command"], *body["args"]] == BRIDGE
    assert body["env"] == {"MCPD_SOCKET": "/run/m.sock"}
    assert path == hc.config_path(key)


@pytest.mark.parametrize("key", list(DOCUMENTED))
def test_url_snippet_has_the_documented_shape_or_is_refused(key: str) -> None:
    spec = DOCUMENTED[key]
    if spec["url"] is None:
        with pytest.raises(HostConfigError, match="use the bridge"):
            snippet(key, url=URL, token=TOKEN)
        return
    _, text = snippet(key, url=URL, token=TOKEN)
    body = parsed(key, text)[spec["key"]]["mcpd"]
    jsonschema.validate(body, spec["url"])
    assert body["url"] == URL
    headers = body.get("headers", body.get("http_headers"))
    assert headers == {"Authorization": f"Bearer {TOKEN}"}
    _, bare = snippet(key, url=URL)  # no token, no header
    assert "Authorization" not in bare


@pytest.mark.parametrize(
    ("key", "linux", "macos"),
    [
        ("claude-code", ".claude.json", ".claude.json"),
        ("claude-desktop", ".config/Claude/claude_desktop_config.json",
         "Library/Application Support/Claude/claude_desktop_config.json"),
        ("cursor", ".cursor/mcp.json", ".cursor/mcp.json"),
        ("vscode", ".config/Code/User/mcp.json", "Library/Application Support/Code/User/mcp.json"),
        ("gemini-cli", ".gemini/settings.json", ".gemini/settings.json"),
        ("codex", ".codex/config.toml", ".codex/config.toml"),
    ],
)  # fmt: skip
def test_config_paths_per_system(key: str, linux: str, macos: str) -> None:
    assert hc.config_path(key, home="/h", env={}, system="linux") == Path("/h", linux)
    assert hc.config_path(key, home="/h", env={}, system="darwin") == Path("/h", macos)


def test_config_paths_follow_xdg_and_codex_home() -> None:
    env = {"XDG_CONFIG_HOME": "/x", "CODEX_HOME": "/c"}
    assert hc.config_path("vscode", home="/h", env=env, system="linux") == Path(
        "/x/Code/User/mcp.json"
    )
    assert hc.config_path("claude-desktop", home="/h", env=env, system="linux") == Path(
        "/x/Claude/claude_desktop_config.json"
    )
    assert hc.config_path("codex", home="/h", env=env, system="linux") == Path("/c/config.toml")


def test_entries_refuse_what_no_host_can_use() -> None:
    for kwargs, words in [
        ({}, "exactly one"),
        ({"bridge_argv": BRIDGE, "url": URL}, "exactly one"),
        ({"bridge_argv": []}, "non-empty"),
        ({"bridge_argv": BRIDGE, "token": TOKEN}, "token goes with a URL"),
        ({"url": "ftp://host/mcp"}, "not an http"),
        ({"url": URL, "env": {"A": "b"}}, "environment"),
        ({"bridge_argv": BRIDGE, "name": "my server"}, "entry name"),
    ]:
        with pytest.raises(HostConfigError, match=words):
            hc.entry("cursor", **kwargs)
    with pytest.raises(HostConfigError, match="unknown host"):
        hc.entry("emacs", bridge_argv=BRIDGE)


# -- merging JSON --

JSON_HOSTS = [k for k in DOCUMENTED if k != "codex"]


def existing_json(key: str) -> dict[str, Any]:
    servers_key = DOCUMENTED[key]["key"]
    return {
        "theme": "dark",
        servers_key: {
            "first": {"command": "a", "args": ["1"], "env": {"K": "v"}},
            "mcpd": {"command": "old-mcpd", "args": ["x"], "cwd": "/old", "disabled": True},
            "last": {"url": "https://example.com/mcp"},
        },
        "projects": {"/p": {"mcpServers": {"mcpd": {"command": "project-scoped"}}}},
        "numbers": [1, 2.5, None, True],
    }


@pytest.mark.parametrize("key", JSON_HOSTS)
def test_json_merge_replaces_only_its_entry(key: str) -> None:
    servers_key = DOCUMENTED[key]["key"]
    before = existing_json(key)
    new = hc.entry(key, bridge_argv=BRIDGE)
    text = hc.merge(key, json.dumps(before), new)
    after = json.loads(text)
    assert text.endswith("\n") and text.startswith('{\n  "theme": "dark",\n')
    expected = existing_json(key)
    expected[servers_key]["mcpd"] = new.body  # the old fields (cwd, disabled) are gone
    assert after == expected
    assert list(after) == list(before)  # unrelated keys stay where they were
    assert list(after[servers_key]) == ["first", "mcpd", "last"]
    assert hc.merge(key, text, new) == text  # idempotent


@pytest.mark.parametrize("key", JSON_HOSTS)
def test_json_merge_adds_to_an_empty_file_or_one_without_servers(key: str) -> None:
    servers_key = DOCUMENTED[key]["key"]
    new = hc.entry(key, bridge_argv=BRIDGE)
    assert json.loads(hc.merge(key, "", new)) == {servers_key: {"mcpd": new.body}}
    assert json.loads(hc.merge(key, " \n", new)) == {servers_key: {"mcpd": new.body}}
    assert json.loads(hc.merge(key, '{"a": {"b": 1}}', new)) == {
        "a": {"b": 1},
        servers_key: {"mcpd": new.body},
    }


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"mcpServers": {', "not valid JSON"),
        ("[1, 2]", "holds list"),
        ('{"mcpServers": []}', "is not an object"),
        ('{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}', "appears twice"),
    ],
)
def test_json_merge_refuses_a_file_it_would_damage(text: str, words: str) -> None:
    with pytest.raises(HostConfigError, match=words):
        hc.merge("cursor", text, hc.entry("cursor", bridge_argv=BRIDGE))


@pytest.mark.parametrize(
    "text", ['{\n  // my servers\n  "servers": {}\n}\n', '{"servers": {"a": {"command": "x"},},}']
)
def test_vscode_file_with_comments_is_refused_with_the_reason(text: str) -> None:
    # Read as the host reads it: not "not valid JSON", but what writing would drop.
    with pytest.raises(hc.WouldDropComments) as refused:
        hc.merge("vscode", text, hc.entry("vscode", bridge_argv=BRIDGE))
    assert str(refused.value) == (
        "VS Code: holds comments or trailing commas, which VS Code reads but writing the "
        "file back would drop; nothing is written: add the entry to its 'servers' object "
        "by hand"
    )


# -- merging Codex's TOML --

CODEX_BEFORE = """\
# Codex settings, by hand
model = "o3"  # the default

[mcp_servers.first]
command = "a"
args = [
  "--flag",
  ["nested"],
]

# the old mcpd entry
[mcp_servers.mcpd]
command = "old-mcpd"
cwd = "/old"

[mcp_servers.mcpd.env]
OLD = "1"

# comment about the next table
[profiles.fast]
model = "o4-mini"
notes = \"\"\"
[mcp_servers.mcpd]
this is a string, not a table
\"\"\"

[mcp_servers.last]
url = "https://example.com/mcp"
"""


def test_toml_merge_replaces_the_table_and_its_subtables_in_place() -> None:
    new = hc.entry("codex", bridge_argv=BRIDGE, env={"MCPD_SOCKET": "/s"})
    text = hc.merge("codex", CODEX_BEFORE, new)
    old, got = tomllib.loads(CODEX_BEFORE), tomllib.loads(text)
    old["mcp_servers"]["mcpd"] = new.body
    assert got == old
    block = (
        "[mcp_servers.mcpd]\n"
        'command = "/usr/bin/mcpd"\n'
        'args = ["bridge", "--profile", "dev"]\n'
        'env = { MCPD_SOCKET = "/s" }\n'
    )
    # Everything before and after the old table is kept byte for byte, the new table
    # sits where the old one was, and the string that looks like a header is untouched.
    head = CODEX_BEFORE.split("[mcp_servers.mcpd]\ncommand", 1)[0]
    assert text.startswith(head + block + "\n# comment about the next table\n[profiles.fast]")
    assert text.endswith(CODEX_BEFORE[CODEX_BEFORE.index("# comment about the next") :])
    assert "OLD" not in text and "old-mcpd" not in text
    assert hc.merge("codex", text, new) == text  # idempotent


def test_toml_merge_appends_when_absent_and_starts_an_empty_file() -> None:
    new = hc.entry("codex", url=URL, token=TOKEN)
    before = 'model = "o3"\n[mcp_servers.other]\ncommand = "x"'  # no final newline
    text = hc.merge("codex", before, new)
    assert text.startswith(before + "\n\n[mcp_servers.mcpd]\n")
    assert tomllib.loads(text)["mcp_servers"] == {"other": {"command": "x"}, "mcpd": new.body}
    assert tomllib.loads(hc.merge("codex", "", new)) == {"mcp_servers": {"mcpd": new.body}}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("model = [", "not valid TOML"),
        ('mcp_servers = "none"', "not a table"),
        ('[mcp_servers]\nmcpd.command = "x"\n', "dotted keys"),
        ('mcp_servers = { mcpd = { command = "x" } }\n', "inline"),
        ('mcp_servers = { other = { command = "x" } }\n', "would not parse"),
    ],
)
def test_toml_merge_refuses_what_it_cannot_edit_safely(text: str, words: str) -> None:
    with pytest.raises(HostConfigError, match=words):
        hc.merge("codex", text, hc.entry("codex", bridge_argv=BRIDGE))


# -- what the user's file holds stays as it was --


def strict_json(text: str) -> Any:
    """The file as a host reads it: NaN and Infinity are no JSON."""

    def refuse(word: str) -> None:
        raise ValueError(f"{word} is not JSON")

    return json.loads(text, parse_constant=refuse)


NUMBERS = (
    '  "big": 1e400,\n  "exp": 1.5E3,\n  "pi": 3.14159265358979323846264338327950288,\n'
    '  "zero": -0.0,\n  "huge": 123456789012345678901234567890,\n  "small": 2e-5,\n'
)


@pytest.mark.parametrize("key", JSON_HOSTS)
def test_json_merge_keeps_every_number_as_it_was_written(key: str) -> None:
    servers_key = DOCUMENTED[key]["key"]
    before = f'{{\n{NUMBERS}  "{servers_key}": {{}}\n}}\n'
    text = hc.merge(key, before, hc.entry(key, bridge_argv=BRIDGE))
    assert text.startswith("{\n" + NUMBERS), text
    assert "Infinity" not in text
    assert "mcpd" in strict_json(text)[servers_key]


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_json_merge_refuses_what_no_host_reads_as_json(word: str) -> None:
    with pytest.raises(HostConfigError, match=f"not valid JSON.*{word}"):
        hc.merge("cursor", f'{{"limit": {word}}}', hc.entry("cursor", bridge_argv=BRIDGE))


def test_toml_merge_keeps_numbers_nan_and_inf_included() -> None:
    before = (
        "a = nan\nb = inf\nc = -inf\nd = 1e400\ne = 1.5E3\nf = 0xdead_beef\n"
        + "g = 3.14159265358979323846\n"
    )
    new = hc.entry("codex", bridge_argv=BRIDGE)
    text = hc.merge("codex", before, new)
    assert text.startswith(before + "\n[mcp_servers.mcpd]\n")


@pytest.mark.parametrize("key", JSON_HOSTS)
def test_json_merge_keeps_a_lone_surrogate_as_the_escape_it_was(key: str) -> None:
    """Node writes half of a pair as an escape; it must come back the same."""
    servers_key = DOCUMENTED[key]["key"]
    before = f'{{\n  "title": "cut \\ud83d",\n  "{servers_key}": {{}}\n}}\n'
    text = hc.merge(key, before, hc.entry(key, bridge_argv=BRIDGE))
    assert text.startswith('{\n  "title": "cut \\ud83d",\n'), text
    text.encode("utf-8")  # what is written is text
    assert strict_json(text)["title"] == "cut \ud83d"


@pytest.mark.parametrize("key", list(DOCUMENTED))
def test_a_file_nested_past_any_use_is_refused_with_the_reason(key: str) -> None:
    deep = "[" * 200_000 if key != "codex" else "a = " + "[" * 200_000
    with pytest.raises(HostConfigError, match="nested too deeply"):
        hc.merge(key, deep, hc.entry(key, bridge_argv=BRIDGE))


def test_toml_merge_keeps_crlf_line_endings() -> None:
    before = CODEX_BEFORE.replace("\n", "\r\n")
    new = hc.entry("codex", bridge_argv=BRIDGE, env={"MCPD_SOCKET": "/s"})
    text = hc.merge("codex", before, new)
    assert "\n" not in text.replace("\r\n", "")  # every line ends as the file's do
    assert text.replace("\r\n", "\n") == hc.merge("codex", CODEX_BEFORE, new)
    appended = hc.merge("codex", 'model = "o3"\r\n', new)
    assert appended.startswith('model = "o3"\r\n\r\n[mcp_servers.mcpd]\r\ncommand = ')
    assert "\n" not in appended.replace("\r\n", "")
    assert hc.merge("codex", text, new) == text


@pytest.mark.parametrize("key", JSON_HOSTS)
def test_json_merge_keeps_crlf_line_endings(key: str) -> None:
    servers_key = DOCUMENTED[key]["key"]
    before = f'{{\r\n  "theme": "dark",\r\n  "{servers_key}": {{}}\r\n}}\r\n'
    text = hc.merge(key, before, hc.entry(key, bridge_argv=BRIDGE))
    assert text.startswith('{\r\n  "theme": "dark",\r\n') and text.endswith("}\r\n")
    assert "\n" not in text.replace("\r\n", "")


# -- writing --


def test_write_keeps_a_backup_and_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    original = json.dumps({"mcpServers": {"other": {"command": "x"}}})
    path.write_text(original)
    path.chmod(0o640)
    new = hc.entry("cursor", bridge_argv=BRIDGE)
    result = hc.write_host_config("cursor", path, new)
    assert result.changed and result.path == path and result.backup is not None
    assert result.backup.read_text() == original
    assert result.backup.name.startswith("mcp.json.bak-") and len(result.backup.name) == 27
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert json.loads(path.read_text())["mcpServers"] == {
        "other": {"command": "x"},
        "mcpd": new.body,
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp.json", result.backup.name]

    mtime = path.stat().st_mtime_ns
    again = hc.write_host_config("cursor", path, new)  # nothing to change: no write, no backup
    assert not again.changed and again.backup is None and path.stat().st_mtime_ns == mtime

    other = hc.write_host_config("cursor", path, hc.entry("cursor", url=URL))
    assert other.backup is not None and other.backup != result.backup  # both kept
    assert len(list(tmp_path.glob("mcp.json.bak-*"))) == 2


def test_write_creates_a_private_file_and_its_folders(tmp_path: Path) -> None:
    path = tmp_path / "home" / ".codex" / "config.toml"
    result = hc.write_host_config("codex", path, hc.entry("codex", url=URL, token=TOKEN))
    assert result.changed and result.backup is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds a token
    assert tomllib.loads(path.read_text())["mcp_servers"]["mcpd"]["url"] == URL


def test_write_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text("{}")
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    result = hc.write_host_config("gemini-cli", link, hc.entry("gemini-cli", bridge_argv=BRIDGE))
    assert link.is_symlink() and result.path == real
    assert "mcpd" in json.loads(real.read_text())["mcpServers"]


def test_write_leaves_an_invalid_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"mcpServers": ')
    with pytest.raises(HostConfigError, match="not valid JSON"):
        hc.write_host_config("gemini-cli", path, hc.entry("gemini-cli", bridge_argv=BRIDGE))
    assert path.read_text() == '{"mcpServers": ' and list(tmp_path.iterdir()) == [path]


# -- tool names --


@pytest.mark.parametrize(
    ("key", "name", "prefix", "room"),
    [
        ("claude-code", "mcpd", "mcp__mcpd__", 53),
        ("claude-code", "my.mcpd", "mcp__my_mcpd__", 50),
        ("codex", "mcpd", "mcp__mcpd__", 53),
        ("cursor", "mcpd", "mcp_mcpd_", 55),  # Cursor: entry + tool name under 60
        ("vscode", "mcpd", "mcp_mcpd_", 55),
        ("vscode", "My MCPD Server", "mcp_my_mcpd_serve_", 46),  # lower case, 18 at most
        ("gemini-cli", "mcpd", "mcp_mcpd_", 54),  # Gemini CLI cuts names over 63
        ("claude-desktop", "mcpd", "", 64),
    ],
)
def test_host_prefixes_and_the_room_left_for_names(
    key: str, name: str, prefix: str, room: int
) -> None:
    assert hosts.host_prefix(key, name) == prefix
    assert hosts.max_tool_name(key, name) == room


# -- the host's own CLI reads the file (interop) --


@pytest.mark.interop
async def test_gemini_cli_reads_the_entries_mcpd_writes(tmp_path: Path) -> None:
    if not GEMINI.exists():
        pytest.skip("the Gemini CLI is not installed; run `npm ci` in tests/host_programs")
    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    path = hc.config_path("gemini-cli", home=str(home), env={})
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"general": {"vimMode": True}, "mcpServers": {}}))
    hc.write_host_config(
        "gemini-cli", path, hc.entry("gemini-cli", name="web", url=URL, token=TOKEN)
    )
    hc.write_host_config("gemini-cli", path, hc.entry("gemini-cli", bridge_argv=BRIDGE))
    with trio.fail_after(90):
        listing = await gemini_list(home, project)
    # An untrusted folder: listed as parsed, not started.
    assert f"mcpd: {' '.join(BRIDGE)} (stdio)" in listing, listing
    assert f"web: {URL} (http)" in listing, listing


@pytest.mark.interop
async def test_gemini_cli_connects_through_the_bridge_entry(tmp_path: Path) -> None:
    if not GEMINI.exists():
        pytest.skip("the Gemini CLI is not installed; run `npm ci` in tests/host_programs")
    from tests.support.clients.agent import make_config, running

    home = tmp_path / "home"
    project = tmp_path / "project"
    project.mkdir()
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "trustedFolders.json").write_text(
        json.dumps({str(project): "TRUST_FOLDER"})
    )
    cfg = make_config(
        tmp_path, {"notes": {"command": sys.executable, "args": ["-m", "mcpd.demo.notes"]}}
    )
    mcpd = str(Path(sys.executable).with_name("mcpd"))
    argv = [mcpd, "bridge", "--socket", str(tmp_path / "mcpd.sock")]
    hc.write_host_config("gemini-cli", hc.config_path("gemini-cli", home=str(home), env={}),
             hc.entry("gemini-cli", bridge_argv=argv))  # fmt: skip
    with trio.fail_after(120):
        async with running(cfg):
            listing = await gemini_list(home, project)
    assert f"mcpd: {' '.join(argv)} (stdio) - Connected" in listing, listing
