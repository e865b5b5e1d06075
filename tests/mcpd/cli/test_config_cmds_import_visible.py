"""Another host's file (a ``.mcp.json`` in a cloned repository, say) may hold anything:
``mcpd import`` and ``mcpd check-config`` print its names, commands, arguments, URLs and
notes with control and hidden characters shown as escapes, and the TOML that import
writes holds them escaped (``\\uXXXX``): a carriage return in a command cannot make the
listing show another command than the one that runs. The values themselves are kept."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from protocol.shown.visible import hidden
from tests.support.cli.import_commands import mcpd

# Erase the line and go back to its start, a one-byte CSI, a right-to-left override, a
# zero-width space and a tag character.
EVIL = "\x1b[2K\rHIDDEN\x9b1m\u202e\u200b\U000e0041"
HOST_FILE = {
    "mcpServers": {
        f"a{EVIL}": {
            "command": f"npx{EVIL}",
            "args": [f"x{EVIL}", "--flag", f"y{EVIL}"],
            "env": {f"K{EVIL}": f"v{EVIL}", f"API_TOKEN{EVIL}": "t0k3n-value"},
        },
        "b": {"url": f"https://h.example/mcp{EVIL}"},
    }
}


def raw(text: str) -> list[str]:
    """The characters of ``text`` that would act on a terminal or draw nothing."""
    return [repr(ch) for ch in text if ch != "\n" and hidden(ch)]


def host_file(tmp_path: Path) -> Path:
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps(HOST_FILE))
    return path


def test_import_prints_and_writes_the_host_files_hidden_characters_escaped(
    tmp_path: Path,
) -> None:
    printed = mcpd("import", str(host_file(tmp_path)))
    assert printed.returncode == 0, printed.stderr
    out = tmp_path / "mcpd.toml"
    written = mcpd("import", str(host_file(tmp_path)), "-o", str(out))
    assert written.returncode == 0, written.stderr
    text = out.read_text()
    for what, shown in [("stdout", printed.stdout), ("stderr", printed.stderr),
                        ("file", text), ("stderr of -o", written.stderr)]:  # fmt: skip
        assert raw(shown) == [], (what, shown)
    assert 'command = "npx\\u001b[2K\\rHIDDEN\\u009b1m\\u202e\\u200b\\U000e0041"' in text
    # The note about the name shows it escaped too.
    assert "#   mcpServers.a\\x1b[2K\\rHIDDEN\\x9b1m\\u202e\\u200b\\U000e0041: the name" in text
    # What the file says is what the host file said.
    servers = tomllib.loads(text)["servers"]
    (alias,) = (a for a in servers if a != "b")
    original = HOST_FILE["mcpServers"][f"a{EVIL}"]
    assert servers[alias]["command"] == original["command"]
    assert servers[alias]["args"] == original["args"]
    assert servers[alias]["env"][f"K{EVIL}"] == original["env"][f"K{EVIL}"]
    assert "t0k3n-value" not in text  # moved aside, named in a comment that shows its key
    assert servers["b"]["url"] == HOST_FILE["mcpServers"]["b"]["url"]


def test_check_config_lists_commands_and_urls_escaped(tmp_path: Path) -> None:
    escaped = "\\u001b[2K\\rHIDDEN\\u009b1m\\u202e\\u200b\\U000e0041"  # TOML's escapes
    hidden = "HIDDEN\\u009b1m\\u202e\\u200b\\U000e0041"
    config = tmp_path / "mcpd.toml"
    config.write_text(
        f'[servers.a]\ncommand = "npx{escaped}"\nargs = ["x{escaped}", "--flag", "y{escaped}"]\n'
        # A URL takes no C0 control character (refused by name), but what else hides.
        f'[servers.b]\nurl = "https://h.example/mcp{hidden}"\n'
    )
    proc = mcpd("check-config", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert raw(proc.stdout) == [] and raw(proc.stderr) == [], proc
    shown = "\\x1b[2K\\rHIDDEN\\x9b1m\\u202e\\u200b\\U000e0041"
    assert f"npx{shown} x{shown} --flag y{shown}" in proc.stdout
    assert "https://h.example/mcpHIDDEN\\x9b1m\\u202e\\u200b\\U000e0041" in proc.stdout


def test_a_lone_surrogate_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"s": {"command": "x\\ud800"}}}')
    proc = mcpd("import", str(path))
    assert proc.returncode == 78, proc.stderr
    assert "a string holds '\\ud800', half of a character" in proc.stderr
