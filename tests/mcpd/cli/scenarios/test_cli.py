"""The command line against a real `mcpd serve --demo`: what a newcomer types."""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpd.cli.main import COMMANDS, PROMPT_RESOURCE_COMMANDS, build_parser

MCPD = [sys.executable, "-m", "mcpd"]


def run(
    *args: str, sock: Path | None = None, check: bool = False, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    extra = ["--socket", str(sock)] if sock is not None else []
    return subprocess.run(
        [*MCPD, *args, *extra], capture_output=True, text=True, timeout=timeout, check=check
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("demo")
    sock = base / "mcpd.sock"
    proc = subprocess.Popen(
        [*MCPD, "serve", "--demo", "--socket", str(sock), "--log", "stderr"],
        stderr=subprocess.PIPE,
        text=True,
        # Where the user's own state would go: the demo must leave it alone.
        env={**os.environ, "XDG_STATE_HOME": str(base / "state")},
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the daemon says when it listens and is ready
            if f"listening on {sock}" in line:
                break
        else:
            pytest.fail("mcpd serve --demo exited before it was ready")
        yield sock
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        assert not sock.exists(), "the socket file outlived the daemon"
        assert not (base / "state").exists(), "the demo wrote to the user's state directory"


def test_demo_lists_six_tools_with_two_distinct_searches(demo: Path) -> None:
    out = run("tools", "--json", sock=demo, check=True)
    tools = json.loads(out.stdout)["tools"]
    names = [t["name"] for t in tools]
    assert len(names) == 6
    assert "mcp__notes__search" in names and "mcp__tickets__search" in names
    table = run("tools", sock=demo, check=True).stdout
    assert "mcp__tickets__create_ticket" in table and "6 tools" in table


def test_demo_calls_reach_the_right_server(demo: Path) -> None:
    notes = run("call", "mcp__notes__search", '{"query": "journal"}', "--json", sock=demo)
    assert notes.returncode == 0
    assert "handbook" in json.loads(notes.stdout)["content"][0]["text"]
    tickets = run("call", "mcp__tickets__search", '{"query": "login"}', sock=demo)
    assert tickets.returncode == 0 and "Login page times out" in tickets.stdout


def test_reading_the_long_note_is_cut_to_the_budget(demo: Path) -> None:
    out = run("call", "mcp__notes__read_note", '{"name": "handbook"}', "--json", sock=demo)
    blocks = json.loads(out.stdout)["content"]
    assert len(blocks[0]["text"]) == 8000
    assert "more characters were cut" in blocks[-1]["text"]


def test_status_json_is_the_daemons_json(demo: Path) -> None:
    out = json.loads(run("status", "--json", sock=demo, check=True).stdout)
    states = {s["alias"]: (s["state"], s["transport"]) for s in out["servers"]}
    assert states == {"notes": ("ready", "stdio"), "tickets": ("ready", "http")}
    human = run("status", sock=demo, check=True).stdout
    assert "notes" in human and "ready" in human and "\x1b[" not in human


def test_exit_codes(demo: Path, tmp_path: Path) -> None:
    assert run("call", "mcp__notes__nope", sock=demo).returncode == 1  # isError
    assert run("call", "mcp__notes__search", "{not json", sock=demo).returncode == 2
    assert run("frobnicate").returncode == 2
    gone = run("status", sock=tmp_path / "nobody.sock")
    assert gone.returncode == 3 and "no mcpd is listening" in gone.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[servers.x]\ncomand = 'typo'\n")
    out = run("check-config", "--config", str(bad))
    assert out.returncode == 78 and "servers.x.comand" in out.stderr
    out = run("serve", "--config", str(bad))
    assert out.returncode == 78


def test_serve_refuses_a_config_another_user_could_have_written(tmp_path: Path) -> None:
    """Its servers' commands run as mcpd's user: anyone who can write the file could
    make mcpd run theirs. Nothing starts, and the error says what to change."""
    marker = tmp_path / "ran"
    config = tmp_path / "mcpd.toml"
    config.write_text(
        f'[daemon]\nsocket = "{tmp_path / "s.sock"}"\n'
        f'[servers.x]\ncommand = "touch"\nargs = ["{marker}"]\n'
    )
    config.chmod(0o666)
    out = run("serve", "--config", str(config))
    assert out.returncode == 78
    assert "every user" in out.stderr and f"chmod go-w {config}" in out.stderr
    assert not marker.exists()
    config.chmod(0o644)
    assert run("check-config", "--config", str(config)).returncode == 0


def test_check_config_lists_servers(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(
        '[servers.notes]\ncommand = "python3"\nargs = ["-m", "mcpd.demo.notes"]\n'
        '[servers.tickets]\nurl = "http://127.0.0.1:3115/mcp"\n'
        'headers = { Authorization = "Bearer ${TOKEN:-x}" }\n'
    )
    out = run("check-config", "--config", str(good), check=True)
    assert "2 server(s)" in out.stdout
    assert "notes" in out.stdout and "http://127.0.0.1:3115/mcp" in out.stdout
    assert "Bearer" not in out.stdout
    assert out.stderr == ""


def test_check_config_warns_of_a_command_that_cannot_start(tmp_path: Path) -> None:
    config = tmp_path / "conf" / "config.toml"  # apart from what the servers are granted
    config.parent.mkdir()
    config.write_text(
        f'[servers.ghost]\ncommand = "{tmp_path}/no-such-server"\n'
        '[servers.typo]\ncommand = "pyhton3"\n'
        '[servers.nowhere]\ncommand = "python3"\ncwd = "/no/such/dir"\n'
        '[servers.off]\ncommand = "pyhton3"\nenabled = false\n'
        f'[servers.ungranted]\ncommand = "python3"\nwrite = ["{tmp_path}", "/no/such/notes"]\n'
    )
    out = run("check-config", "--config", str(config))
    assert out.returncode == 0, out.stderr  # the config itself is valid
    warnings = out.stderr.splitlines()
    fixed = (
        "the server does not start until that is fixed, when mcpd's next try or a reload starts it"
    )
    assert warnings == [
        f"warning: servers.ghost.command: '{tmp_path}/no-such-server': No such file or "
        f"directory; {fixed}",
        f"warning: servers.nowhere.cwd: '/no/such/dir': No such file or directory; {fixed}",
        f"warning: servers.typo.command: 'pyhton3': No such file or directory; {fixed}",
        f"warning: servers.ungranted.write[1]: /no/such/notes does not exist; {fixed}",
    ]
    # Each one's line says so too, as for a server whose variables are missing.
    lines = {line.split()[0]: line for line in out.stdout.splitlines()[1:]}
    for alias in ("ghost", "typo", "nowhere", "ungranted"):
        assert "cannot start" in lines[alias], lines[alias]
    assert "cannot start" not in lines["off"]


def test_check_config_warns_of_a_grant_that_leads_into_mcpds_state(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    notes = tmp_path / "notes"
    notes.symlink_to(state)  # pointed there by a server that may write its folder
    config = tmp_path / "conf" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        f'[daemon]\nstate_dir = "{state}"\n'
        f'[servers.files]\ncommand = "/bin/true"\nwrite = ["{notes}"]\n'
    )
    out = run("check-config", "--config", str(config))
    assert out.returncode == 0, out.stderr
    said = f"warning: servers.files.write[0]: {notes} leads to {state}, which is {state}, "
    said += f"mcpd's own ({state}), hidden from every server"
    assert out.stderr.startswith(said), out.stderr
    assert "the server does not start until that is fixed" in out.stderr


def test_check_config_names_the_path_to_grant_for_a_link_of_the_users_own(
    tmp_path: Path,
) -> None:
    project = tmp_path / "proj"
    state = project / "state"
    state.mkdir(parents=True)
    link = tmp_path / "projlink"
    link.symlink_to(project)  # the user's own, to a folder that holds the state
    config = tmp_path / "conf" / "config.toml"
    config.parent.mkdir()
    server = '[servers.files]\ncommand = "/bin/true"\nread = ["{}"]\n'
    config.write_text(f'[daemon]\nstate_dir = "{state}"\n' + server.format(link))
    out = run("check-config", "--config", str(config))
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith(f"warning: servers.files.read[0]: {link} leads to {project}")
    assert f"to grant it, write {project} in the config" in out.stderr
    # As it says: the folder named by its own path is granted, the state covered in it.
    config.write_text(f'[daemon]\nstate_dir = "{state}"\n' + server.format(project))
    out = run("check-config", "--config", str(config))
    assert out.returncode == 0, out.stderr
    assert "servers.files" not in out.stderr, out.stderr


def test_check_config_warns_of_a_client_secret_no_issuer_pins(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("cs-0123456789abcdef")
    secret.chmod(0o600)
    config = tmp_path / "config.toml"
    config.write_text(
        '[servers.tickets]\nurl = "https://tickets.example.com/mcp"\n'
        f'[servers.tickets.auth]\nclient_id = "c"\nclient_secret = "${{file:{secret}}}"\n'
        '[servers.pinned]\nurl = "https://pinned.example.com/mcp"\n'
        f'[servers.pinned.auth]\nclient_id = "c"\nclient_secret = "${{file:{secret}}}"\n'
        'issuer = "https://auth.example.com"\n'
    )
    out = run("check-config", "--config", str(config))
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [
        "warning: servers.tickets.auth: a client_secret with no issuer: mcpd sends the "
        "secret to whichever authorization server the server names, now or after it "
        "moves, so whoever runs the server can have the secret sent to an authorization "
        "server of theirs; set servers.tickets.auth.issuer to the one the client was "
        "registered at"
    ]
    assert "cs-0123456789abcdef" not in out.stdout + out.stderr


def test_check_config_warns_of_a_program_another_user_could_change(tmp_path: Path) -> None:
    """The program a server runs, a directory searched for it first, or its working
    directory: whoever can change one chooses what runs as mcpd's user."""
    shared, empty, sticky = tmp_path / "shared", tmp_path / "empty", tmp_path / "tmp"
    for folder in (shared, empty):
        folder.mkdir()
        folder.chmod(0o777)
    sticky.mkdir()
    sticky.chmod(0o1777)
    mine = tmp_path / "bin"
    mine.mkdir()
    for folder in (shared, mine):
        program = folder / "notes-server"
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    (mine / "open-server").write_text("#!/bin/sh\n")
    (mine / "open-server").chmod(0o777)
    config = tmp_path / "config.toml"
    config.write_text(
        f'[servers.direct]\ncommand = "{shared}/notes-server"\n'
        f'[servers.open]\ncommand = "{mine}/open-server"\n'
        f'[servers.ahead]\ncommand = "notes-server"\nenv = {{ PATH = "{empty}:{mine}" }}\n'
        f'[servers.behind]\ncommand = "notes-server"\nenv = {{ PATH = "{mine}:{shared}" }}\n'
        f'[servers.workdir]\ncommand = "{mine}/notes-server"\ncwd = "{shared}"\n'
        f'[servers.tmpdir]\ncommand = "{mine}/notes-server"\ncwd = "{sticky}"\n'
        f'[servers.script]\ncommand = "sh"\nargs = ["-e", "{shared}/notes-server", "{shared}"]\n'
        f'[servers.data]\ncommand = "sh"\nargs = ["{mine}/notes-server", "{shared}/notes-server"]\n'
    )
    out = run("check-config", "--config", str(config))
    assert out.returncode == 0, out.stderr
    # (Lines about variables the servers no longer inherit are about pytest's own.)
    ours = [line for line in out.stderr.splitlines() if "chooses what runs" in line]
    warned = {line.split(":")[1].strip(): line for line in ours}
    assert set(warned) == {
        "servers.direct.command",
        "servers.open.command",
        "servers.ahead.command",
        "servers.workdir.cwd",
        "servers.tmpdir.cwd",
        "servers.script.args[1]",
    }, out.stderr
    assert (
        f"the directory {shared} can be written by every user" in warned["servers.direct.command"]
    )
    assert "can be written by every user (mode 0777)" in warned["servers.open.command"]
    # Nothing of that name is there yet, but anyone may put it there.
    assert f"{empty} can be written by every user" in warned["servers.ahead.command"]
    assert "chooses what runs as mcpd's user" in warned["servers.ahead.command"]
    # A shared directory such as /tmp is not to be made private: another one is.
    assert f"{sticky} is shared: every user may add files to it" in warned["servers.tmpdir.cwd"]
    assert "chmod" not in warned["servers.tmpdir.cwd"]


def test_bridge_answers_clearly_when_the_daemon_is_down(tmp_path: Path) -> None:
    request = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}\n'
    out = subprocess.run(
        [*MCPD, "bridge", "--socket", str(tmp_path / "none.sock")],
        input=request,
        capture_output=True,
        timeout=30,
        env=dict(os.environ),
    )
    reply = json.loads(out.stdout)
    assert reply["id"] == 1 and "mcpd is not running" in reply["error"]["message"]
    assert out.returncode == 0


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "could not be read"),
        (b'{"jsonrpc":"2.0","id":1,"result":{"daemon":\n', "could not be read"),
    ],
    ids=["not-json", "broken-json"],
)
def test_a_reply_that_cannot_be_read_is_said_so_with_its_own_exit_code(
    tmp_path: Path, answer: bytes, said: str
) -> None:
    import socket
    import threading

    path = tmp_path / "odd.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)

    def answer_once() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=answer_once, daemon=True)
    thread.start()
    try:
        out = run("status", sock=path, timeout=30)
    finally:
        server.close()
    assert out.returncode == 4, out
    assert said in out.stderr and "lost the connection" not in out.stderr
    assert str(path) in out.stderr


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_each_command_parses_alike_when_only_its_own_parser_is_built() -> None:
    full = _commands(build_parser())
    assert set(full) == COMMANDS
    for name, whole in full.items():
        alone = _commands(build_parser(name))
        # Only its own (the prompt and resource commands come as the four of them).
        assert set(alone) == (
            {name} if name not in PROMPT_RESOURCE_COMMANDS else set(PROMPT_RESOURCE_COMMANDS)
        )
        assert alone[name].format_help() == whole.format_help()
    # A word that is no command gets the whole grammar, so the error lists them all.
    out = run("serv")
    assert out.returncode == 2
    assert "check-config" in out.stderr


def test_content_that_is_not_text_says_what_it_is_where_and_how_big() -> None:
    from mcpd.cli.prompt_resource_cmds import render_block

    png = base64.b64encode(b"\x89PNG" + bytes(12_341)).decode()
    assert render_block({"type": "text", "text": "hi"}) == "hi"
    assert render_block({"type": "image", "mimeType": "image/png", "data": png}) == (
        "[image image/png, 12,345 bytes]"
    )
    assert render_block({"type": "audio", "mimeType": "audio/wav", "data": "AAA="}) == (
        "[audio audio/wav, 2 bytes]"
    )
    link = {"type": "resource_link", "uri": "file:///r.md", "name": "r.md", "mimeType": "text/md"}
    assert render_block(link) == "[link file:///r.md (r.md, text/md)]"
    blob = {"type": "resource", "resource": {"uri": "x://1", "blob": "AAAA", "mimeType": "a/b"}}
    assert render_block(blob) == "[resource x://1]\n[a/b, 3 bytes]"


@pytest.mark.parametrize("command", ["status", "tools", "serve", "check-config", "reload"])
def test_an_unknown_option_gets_the_commands_own_usage(command: str) -> None:
    out = run(command, "--bogus")
    assert out.returncode == 2
    assert out.stderr.startswith(f"usage: mcpd {command} "), out.stderr
    assert f"mcpd {command}: error: unrecognized arguments: --bogus" in out.stderr


def test_check_config_warns_of_a_grant_that_leads_into_proc(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.symlink_to("/proc")  # pointed there by a server that may write its folder
    config = tmp_path / "conf" / "config.toml"
    config.parent.mkdir()
    config.write_text(f'[servers.files]\ncommand = "/bin/true"\nwrite = ["{notes}"]\n')
    out = run("check-config", "--config", str(config))
    assert out.returncode == 0, out.stderr
    said = f"warning: servers.files.write[0]: {notes} leads to /proc, which is /proc, the kernel's"
    assert out.stderr.startswith(said), out.stderr
    assert "the server does not start until that is fixed" in out.stderr
