"""The commands that work from the config file, run in this process: what
``check-config`` prints of each server and rule (and never of a secret), what
``import`` writes and refuses to overwrite, and the token ``token`` keeps. The
commands as processes, with a daemon, are ``scenarios/test_cli``'s and the import tests'."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from mcpd.cli.config_cmds import rule_words
from mcpd.cli.hosts.import_sources import HOST_NAMES
from mcpd.cli.main import main
from mcpd.config.tables.model import EX_CONFIG
from mcpd.config.tables.policy import AnnotationMatch, PolicyRule

TOKEN = "ghp_5mB2x9QvT7kLw3NcR8yZ1aHd4FjU6eP0sGiO"


def run(*argv: str) -> int:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    code = done.value.code
    assert isinstance(code, int)
    return code


def run_logged(*argv: str) -> int:
    """``run``, for ``serve``, which sets up the log it reports through; undone after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return run(*argv)
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)


def written(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- check-config --


def test_check_config_lists_each_server_with_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = written(
        tmp_path,
        f"""
        [daemon]
        socket = "{tmp_path}/mcpd.sock"
        [servers.notes]
        command = "/bin/sh"
        args = ["-c", "true"]
        trusted = true
        start = "lazy"
        sandbox = "off"
        [servers.off]
        command = "/bin/true"
        enabled = false
        [servers.events]
        url = "https://events.example.com/sse"
        [servers.api]
        url = "https://api.example.com/mcp"
        auth = {{ type = "client_credentials", client_id = "mcpd", client_secret = "s" }}
        """.replace("\n        ", "\n"),
    )
    assert run("check-config", "--config", str(config)) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{config}: OK, 4 server(s); socket {tmp_path}/mcpd.sock\n")
    lines = {line.split()[0]: line for line in out.splitlines()[1:] if line.startswith("  ")}
    assert "stdio, trusted, lazy" in lines["notes"] and "/bin/sh -c true" in lines["notes"]
    assert "stdio, disabled" in lines["off"]
    assert "sse" in lines["events"] and "https://events.example.com/sse" in lines["events"]
    assert "http, client credentials" in lines["api"]


def test_check_config_shows_no_secret_and_no_hidden_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = written(
        tmp_path,
        "[servers.pay]\n"
        'command = "/bin/true"\n'
        f'args = ["--api-key", "{TOKEN}", "\\u202eevil"]\n'
        "[servers.web]\n"
        f'url = "https://api.example.com/mcp?api_key={TOKEN}"\n',
    )
    assert run("check-config", "--config", str(config)) == 0
    captured = capsys.readouterr()
    assert TOKEN not in captured.out and TOKEN not in captured.err
    assert "\u202e" not in captured.out
    # The secrets are where they are, named in a warning.
    assert "servers.pay.args[1]" in captured.err and "servers.web.url" in captured.err


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://user:${TPASS}@127.0.0.1:9/mcp", EX_CONFIG),
        ("http://user:hunter2/Zq9-SECRET@127.0.0.1:9/mcp", EX_CONFIG),
        ("http://user:hunter2#Zq9-SECRET@127.0.0.1:9/mcp", EX_CONFIG),
        # A URL the parser reads, as host "user" and port 123: listed, not shown.
        ("http://user:123/Zq9-SECRET@127.0.0.1:9/mcp", 0),
    ],
)
def test_check_config_shows_no_part_of_a_password_written_in_a_url(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    code: int,
) -> None:
    monkeypatch.setenv("TPASS", "hunter2/Zq9-SECRET")
    config = written(tmp_path, f'[servers.tickets]\nurl = "{url}"\n')
    assert run("check-config", "--config", str(config)) == code
    captured = capsys.readouterr()
    if code:
        assert f"config error: {config}: servers.tickets.url: invalid URL" in captured.err
    else:
        assert "tickets" in captured.out and "http://(hidden)" in captured.out
    for part in ("user", "hunter2", "Zq9", "SECRET"):
        assert part not in captured.out + captured.err


def test_check_config_shows_no_part_of_a_long_token_its_error_cuts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("API_TOKEN", "Zq9x" * 100 + "Z")
    config = written(
        tmp_path, '[servers.api]\nurl = "https://mcp.example.com:99999/v1/${API_TOKEN}/mcp"\n'
    )
    assert run("check-config", "--config", str(config)) == EX_CONFIG
    captured = capsys.readouterr()
    assert (
        'servers.api.url: invalid URL "https://mcp.example.com:99999/v1/${API_TOKEN}/mcp": '
        "its port is not a number" in captured.err
    )
    assert "Zq9" not in captured.out + captured.err


def test_check_config_warns_of_aliases_whose_tools_may_be_named_as_anothers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gh`` listing ``prod__merge_pr`` names a tool as ``gh__prod``'s ``merge_pr`` is
    named: still a config that loads, with a warning for each."""
    config = written(
        tmp_path,
        f'[daemon]\nsocket = "{tmp_path}/mcpd.sock"\n'
        '[servers.gh]\ncommand = "/bin/true"\n'
        '[servers.gh__prod]\ncommand = "/bin/true"\n'
        '[servers.notes]\ncommand = "/bin/true"\n',
    )
    assert run("check-config", "--config", str(config)) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "gh" in line]
    assert any("'gh__prod' holds '__'" in line for line in warned), warned
    assert any("names of gh's tools begin as those of gh__prod's" in line for line in warned)
    assert len(warned) == 2, warned


def test_check_config_warns_of_a_server_that_cannot_start_and_still_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = written(
        tmp_path,
        "[servers.gone]\n"
        'command = "no-such-program-anywhere"\n'
        "[servers.nowhere]\n"
        'command = "/bin/true"\n'
        f'cwd = "{tmp_path}/missing"\n'
        "[servers.unset]\n"
        'command = "/bin/true"\n'
        'env = { K = "${MCPD_TEST_NEVER_SET}" }\n'
        "[servers.off]\n"
        'command = "no-such-program-anywhere"\n'
        "enabled = false\n",
    )
    assert run("check-config", "--config", str(config)) == 0
    captured = capsys.readouterr()
    assert "servers.gone.command: 'no-such-program-anywhere'" in captured.err
    assert f"servers.nowhere.cwd: '{tmp_path}/missing'" in captured.err
    assert "MCPD_TEST_NEVER_SET is not set" in captured.err
    assert "servers.off" not in captured.err
    assert "cannot start" in captured.out


def test_check_config_says_every_reason_a_server_cannot_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not one a run: fixing the reason shown would otherwise only show the next."""
    config = written(
        tmp_path,
        f"""
        [daemon]
        state_dir = "{tmp_path}/state"
        [servers.np]
        command = "/opt/nothere/bin/server"
        cwd = "{tmp_path}/nonexistent"
        read = ["{tmp_path}/no-data"]
        [servers.rel]
        command = "./bin/server"
        cwd = "{tmp_path}/nonexistent"
        """.replace("\n        ", "\n"),
    )
    assert run("check-config", "--config", str(config)) == 0
    warned = capsys.readouterr().err.splitlines()
    np = [line for line in warned if line.startswith("warning: servers.np.")]
    assert len(np) == 3, warned
    assert any(f"servers.np.cwd: '{tmp_path}/nonexistent'" in line for line in np)
    assert any("servers.np.command: '/opt/nothere/bin/server'" in line for line in np)
    assert any(f"{tmp_path}/no-data" in line for line in np)
    # A relative command is looked for in the cwd: with none there, the cwd is the reason.
    assert [line for line in warned if line.startswith("warning: servers.rel.")] == [
        f"warning: servers.rel.cwd: '{tmp_path}/nonexistent': No such file or directory; "
        "the server does not start until that is fixed, when mcpd's next try or a reload "
        "starts it"
    ]


def test_check_config_shows_no_value_a_reference_gave_in_what_it_says_of_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variable's or a secret file's value spliced into a path, a command or a grant
    is written as its reference, as the config's errors write it, in the warnings of
    servers that cannot start and in each server's lines."""
    monkeypatch.setenv("TOK", "Zq81pW3xTT9abc")
    secret = written(tmp_path, "Fil3SecretValue77", "secret")
    secret.chmod(0o600)
    config = written(
        tmp_path,
        f"""
        [daemon]
        socket = "{tmp_path}/mcpd.sock"
        state_dir = "{tmp_path}/state"
        [servers.a]
        command = "/bin/true"
        cwd = "/nope/${{TOK}}"
        sandbox = "off"
        [servers.b]
        command = "/nope/${{file:{secret}}}"
        sandbox = "off"
        [servers.d]
        command = "/bin/true"
        sandbox = "default"
        read = ["/nope/${{TOK}}"]
        """.replace("\n        ", "\n"),
    )
    assert run("check-config", "--config", str(config)) == 0
    captured = capsys.readouterr()
    said = captured.out + captured.err
    assert "Zq81" not in said and "Fil3" not in said
    assert "servers.a.cwd: '/nope/${TOK}': No such file or directory" in captured.err
    assert "/nope/[secret of servers.b.command]" in said
    assert "read /nope/${TOK}" in captured.out


def test_check_config_names_the_bad_key_and_exits_78(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = written(tmp_path, '[servers.s]\ncommand = "x"\ncomand = "y"\n')
    assert run("check-config", "--config", str(config)) == EX_CONFIG
    assert f"config error: {config}: servers.s.comand" in capsys.readouterr().err
    assert run("check-config", "--config", str(tmp_path / "absent.toml")) == EX_CONFIG


def test_check_config_lists_the_policy_and_the_rules_no_call_reaches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = written(
        tmp_path,
        '[servers.s]\ncommand = "/bin/true"\n'
        '[[policy]]\ntools = ["*"]\naction = "allow"\n'
        '[[policy]]\ntools = ["delete_*"]\naction = "deny"\n',
    )
    assert run("check-config", "--config", str(config)) == 0
    captured = capsys.readouterr()
    assert "policy: 2 rule(s), the first that matches a call decides" in captured.out
    assert "policy[1]  deny   tools delete_*" in captured.out
    assert "policy[1]" in captured.err


def test_a_rule_in_words() -> None:
    rule = PolicyRule(
        tools=["send_*", "post"],
        servers=["mail"],
        profiles=["assistant"],
        annotations=AnnotationMatch(readOnlyHint=False, destructiveHint=True),
        action="ask",
        rate="1/min",
        timeout=30.0,
        remember="connection",
        reason="mail leaves the house",
    )
    assert rule_words(rule) == (
        "tools send_*, post; servers mail; profiles assistant; "
        "annotations readOnlyHint=false, destructiveHint=true; at most 1 call a minute per "
        "agent; decided within 30 s; remembered for the connection; "
        "reason: mail leaves the house"
    )
    assert rule_words(PolicyRule(action="deny")) == "tools *"


def test_a_rule_only_the_operator_decides_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rule = PolicyRule(tools=["*/delete_*"], action="ask", decider="operator")
    assert rule_words(rule) == "tools */delete_*; decided by the operator only, within 120 s"
    config = written(
        tmp_path,
        '[servers.s]\ncommand = "/bin/true"\n'
        '[[policy]]\ntools = ["*/delete_*"]\naction = "ask"\ndecider = "operator"\n',
    )
    assert run("check-config", "--config", str(config)) == 0
    out = capsys.readouterr().out
    assert "policy[0]  ask    tools */delete_*; decided by the operator only" in out


# -- import --


def host_file(tmp_path: Path) -> Path:
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "github": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": TOKEN}},
                    "docs": {"command": "docs", "alwaysAllow": ["read"]},
                }
            }
        )
    )
    return source


def test_import_prints_the_toml_and_a_summary_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("import", str(host_file(tmp_path))) == 0
    captured = capsys.readouterr()
    assert TOKEN not in captured.out + captured.err
    assert '[servers.github.env]\nGITHUB_TOKEN = "${GITHUB_TOKEN}"' in captured.out
    assert "imported 2 server(s)" in captured.err
    assert "1 secret(s) to provide, 1 note(s) (see the comments at the top)" in captured.err


def test_import_to_a_file_refuses_to_replace_one_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = host_file(tmp_path)
    out = written(tmp_path, "# mine\n", "mcpd.toml")
    assert run("import", str(source), "-o", str(out)) == 2
    assert "exists (use --force to replace it)" in capsys.readouterr().err
    assert out.read_text() == "# mine\n"
    # Nothing was moved aside either.
    assert not (tmp_path / "mcpd.secrets").exists()
    assert run("import", str(source), "-o", str(out), "--force") == 0
    assert TOKEN not in out.read_text()
    secret = tmp_path / "mcpd.secrets" / "github.env.GITHUB_TOKEN"
    assert secret.read_text() == TOKEN + "\n"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    err = capsys.readouterr().err
    assert f"servers.github.env.GITHUB_TOKEN -> {secret} (mode 0600)" in err


def test_import_of_codex_says_its_toml_is_not_read_and_what_to_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mcpd connect codex`` writes Codex's file; an import of it names that file and
    the format instead of a missing file called 'codex' or a JSON parse error."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    codex = written(tmp_path, '[mcp_servers.git]\ncommand = "mcp-server-git"\n', "config.toml")
    assert run("import", "codex") == EX_CONFIG
    err = capsys.readouterr().err
    assert f"Codex's servers ({tmp_path}/.codex/config.toml, TOML)" in err
    assert "[servers.NAME]" in err and "cannot read 'codex'" not in err
    assert run("import", str(codex)) == EX_CONFIG
    err = capsys.readouterr().err
    assert f"{codex}: a TOML file cannot be imported" in err and "JSON" in err
    assert "Expecting value" not in err


def test_import_says_what_it_cannot_read_or_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("import", str(tmp_path / "absent.json")) == EX_CONFIG
    assert "cannot import: cannot read" in capsys.readouterr().err
    # A word that is no host's name, nor a file: the hosts it knows are listed.
    assert run("import", "notahost") == EX_CONFIG
    err = capsys.readouterr().err
    assert "cannot read 'notahost'" in err
    assert err.rstrip().endswith(f"; nor is it a host mcpd knows: {', '.join(HOST_NAMES)}")
    blocked = tmp_path / "file"
    blocked.write_text("")
    source = host_file(tmp_path)
    assert run("import", str(source), "-o", str(blocked / "mcpd.toml")) == 2
    assert "cannot write" in capsys.readouterr().err


# -- token --


def test_token_is_made_once_kept_and_rotated_on_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    config = written(tmp_path, f'[daemon]\nstate_dir = "{state}"\n')
    assert run("token", "--config", str(config)) == 0
    first = capsys.readouterr()
    token = first.out.strip()
    assert token and "there was no token yet; created" in first.err
    assert run("token", "--config", str(config)) == 0
    again = capsys.readouterr()
    assert again.out.strip() == token and again.err == ""
    assert run("token", "--config", str(config), "--rotate") == 0
    rotated = capsys.readouterr()
    assert rotated.out.strip() not in ("", token)
    assert "the old one no longer works" in rotated.err
    stored = [p for p in state.rglob("*") if p.is_file()]
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in stored)


def test_token_with_a_config_that_is_missing_or_bad_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("token", "--config", str(tmp_path / "absent.toml")) == EX_CONFIG
    bad = written(tmp_path, "[daemon]\nstate_dir = 3\n")
    assert run("token", "--config", str(bad)) == EX_CONFIG
    assert f"config error: {bad}: daemon.state_dir" in capsys.readouterr().err


# -- serve --


def test_serve_with_a_bad_config_logs_why_and_exits_78_when_not_socket_activated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LISTEN_PID", raising=False)
    monkeypatch.delenv("LISTEN_FDS", raising=False)
    bad = written(tmp_path, "[servers.s]\n")
    argv = ["serve", "--config", str(bad), "--log", "stderr", "--socket", str(tmp_path / "s")]
    assert run_logged(*argv) == EX_CONFIG
    assert f"config error: {bad}: servers.s: give exactly one of" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["config.toml"]


@pytest.mark.parametrize("given_by", ["--socket", "$MCPD_SOCKET"])
def test_serve_on_a_socket_path_too_long_to_bind_exits_78_naming_it_and_the_limit(
    given_by: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = written(tmp_path, f'[daemon]\nstate_dir = "{tmp_path}/state"\n')
    socket = f"{tmp_path}/{'s' * 120}.sock"
    argv = ["serve", "--config", str(config), "--log", "stderr"]
    if given_by == "--socket":
        argv += ["--socket", socket]
    else:
        monkeypatch.setenv("MCPD_SOCKET", socket)
    assert run_logged(*argv) == EX_CONFIG
    size = len(socket.encode())
    said = f"config error: {given_by} {socket}: is {size} bytes long; the path of a Unix socket "
    assert said + "holds at most 107" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["config.toml"]


@pytest.mark.parametrize("given_by", ["--socket", "$MCPD_SOCKET"])
def test_serve_on_a_relative_socket_path_exits_78_naming_it(
    given_by: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = written(tmp_path, f'[daemon]\nstate_dir = "{tmp_path}/state"\n')
    monkeypatch.chdir(tmp_path)
    argv = ["serve", "--config", str(config), "--log", "stderr"]
    if given_by == "--socket":
        argv += ["--socket", "./mcpd.sock"]
    else:
        monkeypatch.setenv("MCPD_SOCKET", "./mcpd.sock")
    # A client started in another directory would look elsewhere.
    assert run_logged(*argv) == EX_CONFIG
    said = f"config error: {given_by} ./mcpd.sock: must be an absolute path"
    assert said in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["config.toml"]


def test_import_moves_every_kind_of_password_and_writes_a_private_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "pg.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "pg": {
                        "command": "pg-mcp",
                        "env": {
                            "DATABASE_URI": "postgresql://app:Sup3rS3cret@db/prod",
                            "PGPASS": "hunter2",
                            "SMTP_PASS": "mailpw1",
                            "MYSQL_PWD": "pw123",
                            "API_KEY": "first",
                            "API KEY": "second",
                            "GOOGLE_APPLICATION_CREDENTIALS": "${HOME}/key.json",
                        },
                    },
                    "h": {"url": "https://h.example/mcp", "headers": {"Cookie": "sid=${SID}; x=y"}},
                    "u": {"url": "https://user:pw@h.example/mcp"},
                }
            }
        )
    )
    out = tmp_path / "cfg.toml"
    assert run("import", str(source), "-o", str(out)) == 0
    text = out.read_text()
    for secret in ("Sup3rS3cret", "hunter2", "mailpw1", "pw123", "first", "second", "pw@"):
        assert secret not in text
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert 'GOOGLE_APPLICATION_CREDENTIALS = "${HOME}/key.json"' in text
    # The reference stays to be expanded; only the literal text moved.
    cookie = next(line for line in text.splitlines() if line.startswith("Cookie = "))
    assert "${SID}" in cookie and cookie.count("${file:") == 2
    secrets = tmp_path / "cfg.secrets"
    assert (secrets / "pg.env.API_KEY").read_text() != (secrets / "pg.env.API_KEY_2").read_text()
    assert "user:" not in text and "mcpServers.u.url: holds a user name and password" in text
    capsys.readouterr()
    assert run("check-config", "--config", str(out)) == 0


def test_import_never_writes_through_a_link_and_says_why_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = host_file(tmp_path)
    link = tmp_path / "dang.toml"
    link.symlink_to(tmp_path / "target.toml")
    assert run("import", str(source), "-o", str(link)) == 2
    err = capsys.readouterr().err
    assert f"{link} is a symbolic link to {tmp_path / 'target.toml'}, which mcpd" in err
    assert run("import", str(source), "-o", str(link), "--force") == 0
    assert not (tmp_path / "target.toml").exists() and not link.is_symlink()
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert run("import", str(source), "-o", str(shared / "cfg.toml")) == 2
    err = capsys.readouterr().err
    assert "can be written by every user" in err and "None" not in err
    # Nor through a link on the way that another user could have put there.
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (shared / "team").symlink_to(tmp_path / "real")
    assert run("import", str(source), "-o", str(shared / "team" / "sub" / "cfg.toml")) == 2
    assert "can be written by every user" in capsys.readouterr().err
    assert list((tmp_path / "real" / "sub").iterdir()) == []


def test_import_reads_a_linked_gemini_file_as_gemini_and_refuses_what_is_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "gemini-settings.json"
    real.write_text(json.dumps({"mcpServers": {"s": {"url": "https://h.example/sse"}}}))
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").symlink_to(real)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert run("import", "gemini-cli") == 0
    assert 'transport = "sse"' in capsys.readouterr().out
    (tmp_path / ".gemini" / "settings.json").unlink()
    os.mkfifo(tmp_path / ".gemini" / "settings.json")
    assert run("import", "gemini-cli") == EX_CONFIG
    assert "is not a regular file" in capsys.readouterr().err
    assert run("import", "/dev/zero") == EX_CONFIG
    assert "is larger than" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away takes root")
def test_import_refuses_a_host_file_another_user_owns_even_through_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = host_file(tmp_path)
    os.chown(theirs, 1005, 1005)
    link = tmp_path / ".mcp.json"
    link.symlink_to(theirs)
    assert run("import", str(link), "-o", str(tmp_path / "cfg.toml")) == EX_CONFIG
    err = capsys.readouterr().err
    assert "host file not trusted" in err and "belongs to uid 1005" in err
    assert not (tmp_path / "cfg.toml").exists()
