"""What ``mcpd call``, ``mcpd read`` and ``mcpd reload`` print when a name, a URI or a
reload goes wrong, from a daemon started as an operator starts it: the words name
what was asked, and the command a person types to see what there is."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.daemons.as_operator import client, start, stop
from tests.support.system.procs import scripted


def servers(*names: tuple[str, str]) -> str:
    command, args = scripted()
    return "".join(
        f"[servers.{alias}]\ncommand = {json.dumps(command)}\n"
        f"args = {json.dumps([*args, '--names', tools])}\n"
        for alias, tools in names
    )


def test_a_tools_own_name_suggests_every_server_listing_it_and_how_to_list(
    tmp_path: Path,
) -> None:
    sock, config = tmp_path / "mcpd.sock", tmp_path / "mcpd.toml"
    listed = servers(("alpha", "echo,get-sum"), ("beta", "echo"), ("everything", "get-sum"))
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n{listed}')
    proc = start(["--config", str(config)], sock)
    try:
        out = client(sock, "call", "echo", '{"message": "x"}')
        assert out.returncode == 1, out.stderr
        assert out.stdout == (
            "Unknown tool 'echo'. Did you mean: mcp__alpha__echo (server 'alpha'), "
            "mcp__beta__echo (server 'beta')? `mcpd tools` lists the current tools.\n"
        )
        said = client(sock, "call", "get-sum", "{}").stdout
        assert "mcp__alpha__get-sum (server 'alpha')" in said
        assert "mcp__everything__get-sum (server 'everything')" in said
        # A program reading the result gets mcpd's words to agents, and the names.
        raw = json.loads(client(sock, "call", "echo", "{}", "--json").stdout)
        assert raw["content"][0]["text"].endswith(" Call tools/list for the current tools.")
        assert raw["_meta"]["mcpd/unknownTool"]["suggested"] == [
            "mcp__alpha__echo",
            "mcp__beta__echo",
        ]
    finally:
        stop(proc)


def test_reading_a_uri_no_server_has_names_it_and_says_how_to_see_what_there_is(
    tmp_path: Path,
) -> None:
    sock, config = tmp_path / "mcpd.sock", tmp_path / "mcpd.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n{servers(("fm", "x"))}')
    proc = start(["--config", str(config)], sock)
    try:
        out = client(sock, "read", 'fm://nosuch"\x1b[2J')
        assert out.returncode == 1
        assert out.stderr == (
            'mcpd: error -32602: Resource not found: "fm://nosuch\\"\\x1b[2J". '
            "`mcpd resources` lists what can be read.\n"
        )
    finally:
        stop(proc)
