"""The config file: TOML into frozen structs, ${VAR} expansion, errors that name the key."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from mcpd.config.loading.load import expand, load, parse_config
from mcpd.config.tables import model as cfg
from mcpd.config.tables.model import EX_CONFIG, Config, ConfigError
from tests.conftest import ROOT

EXAMPLE = """\
[daemon]
socket = "${XDG_RUNTIME_DIR:-/run/user/1000}/mcpd/mcpd.sock"
call_timeout = 45.0
result_budget_chars = 4000

[naming]
template = "mcp__{alias}__{tool}"
max_length = 64

[servers.notes]
command = "python3"
args = ["-m", "mcpd.demo.notes", "--dir", "${HOME}/notes"]
env = { NOTES_DIR = "${HOME}/notes" }
cwd = "/tmp"
call_timeout = 30.0
trusted = false

[servers.tickets]
url = "https://tickets.example.com/mcp"
headers = { Authorization = "Bearer ${TICKETS_TOKEN}" }
"""

ENV = {"HOME": "/home/ada", "TICKETS_TOKEN": "s3cret"}


def parse_toml(text: str, env: dict[str, str] | None = None) -> Config:
    return parse_config(tomllib.loads(textwrap.dedent(text)), env=ENV if env is None else env)


def error_of(text: str, env: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_toml(text, env)
    return info.value


STDIO = '[servers.s]\ncommand = "x"\n'


# -- the example from the issue --


def test_the_example_config_parses() -> None:
    config = parse_toml(EXAMPLE)
    assert config.daemon.socket == "/run/user/1000/mcpd/mcpd.sock"
    assert config.daemon.call_timeout == 45.0
    assert config.daemon.result_budget_chars == 4000
    assert config.naming.template == "mcp__{alias}__{tool}"
    assert config.naming.max_length == 64
    assert sorted(config.servers) == ["notes", "tickets"]

    notes = config.servers["notes"]
    assert notes.transport == "stdio"
    assert notes.command == "python3"
    assert notes.args == ["-m", "mcpd.demo.notes", "--dir", "/home/ada/notes"]
    assert notes.env == {"NOTES_DIR": "/home/ada/notes"}
    assert notes.cwd == "/tmp"
    assert notes.call_timeout == 30.0
    assert notes.trusted is False

    tickets = config.servers["tickets"]
    assert tickets.transport == "http"
    assert tickets.url == "https://tickets.example.com/mcp"
    assert tickets.headers == {"Authorization": "Bearer s3cret"}
    assert tickets.call_timeout is None

    assert config.call_timeout("notes") == 30.0
    assert config.call_timeout("tickets") == 45.0
    assert config.socket_path() == "/run/user/1000/mcpd/mcpd.sock"


def test_the_example_config_loads_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(EXAMPLE)
    config = load(path, env=ENV)
    assert config.source == str(path)
    assert config.servers["tickets"].headers["Authorization"] == "Bearer s3cret"


def test_the_config_is_frozen() -> None:
    config = parse_toml(EXAMPLE)
    with pytest.raises(AttributeError):
        config.daemon.call_timeout = 1.0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        config.servers["notes"].trusted = True  # type: ignore[misc]
    with pytest.raises(AttributeError):
        config.naming = cfg.NamingConfig()  # type: ignore[misc]


def test_an_empty_config_has_the_documented_defaults() -> None:
    config = parse_config({}, env={})
    assert config.servers == {}
    assert config.naming.template == "mcp__{alias}__{tool}"
    assert config.naming.max_length == 64
    assert config.daemon.socket is None
    assert config.socket_mode() == 0o600
    assert config.daemon.call_timeout == 60.0
    assert config.daemon.max_pages == 1000


def test_server_defaults() -> None:
    config = parse_toml(STDIO + '[servers.h]\nurl = "http://127.0.0.1:8080/mcp"\n')
    stdio, http = config.servers["s"], config.servers["h"]
    for server in (stdio, http):
        assert server.trusted is False
        assert server.enabled is True
        assert server.era == "auto"
        assert server.inherit_env is False
    assert stdio.concurrency() == 4
    assert http.concurrency() == 16


# -- unknown keys --


@pytest.mark.parametrize(
    ("text", "path", "hint"),
    [
        ('[servers.notes]\ncomand = "python3"\n', "servers.notes.comand", "command"),
        (STDIO + "trusted_ = true\n", "servers.s.trusted_", "trusted"),
        ('[daemon]\nsockett = "/x"\n', "daemon.sockett", "socket"),
        ('[naming]\ntemplat = "{tool}"\n', "naming.templat", "template"),
        ("verbose = true\n", "verbose", None),
        ('[server.notes]\ncommand = "x"\n', "server", "servers"),
        ('source = "/etc/elsewhere.toml"\n', "source", None),
    ],
)
def test_an_unknown_key_is_an_error_naming_its_path(text: str, path: str, hint: str | None) -> None:
    err = error_of(text)
    assert err.path == path
    if hint is None:
        assert str(err).split(";")[0] == f"{path}: unknown key"
    else:
        assert str(err) == f'{path}: unknown key; did you mean "{hint}"?'


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("[servers.notes]\ncommand = 5\n", "servers.notes.command"),
        ('[servers.notes]\ncommand = "x"\nargs = ["a", 3]\n', "servers.notes.args[1]"),
        ('[servers.notes]\ncommand = "x"\nenv = { A = 1 }\n', "servers.notes.env.A"),
        ('[servers.t]\nurl = "http://h"\nheaders = { X = [] }\n', "servers.t.headers.X"),
        ('[servers.notes]\ncommand = "x"\nera = "newest"\n', "servers.notes.era"),
        ('[servers.notes]\ncommand = "x"\ntrusted = "yes"\n', "servers.notes.trusted"),
        ('[daemon]\ncall_timeout = "slow"\n', "daemon.call_timeout"),
        ('[naming]\nmax_length = "64"\n', "naming.max_length"),
        ("[servers]\nnotes = 3\n", "servers.notes"),
        ("servers = 3\n", "servers"),
    ],
)
def test_a_value_of_the_wrong_type_is_an_error_naming_its_path(text: str, path: str) -> None:
    assert error_of(text).path == path


# -- ${VAR} expansion --


@pytest.mark.parametrize(
    ("value", "env", "expected"),
    [
        ("${A}", {"A": "1"}, "1"),
        ("x-${A}-y", {"A": "1"}, "x-1-y"),
        ("${A}${B}", {"A": "1", "B": "2"}, "12"),
        ("${A:-dflt}", {}, "dflt"),
        ("${A:-dflt}", {"A": "set"}, "set"),
        ("${A:-dflt}", {"A": ""}, "dflt"),
        ("${A}", {"A": ""}, ""),
        ("${A:-}", {}, ""),
        ("${A:-/a b/c}", {}, "/a b/c"),
        ("$$", {}, "$"),
        ("cost: $$5", {}, "cost: $5"),
        ("$${A}", {"A": "1"}, "${A}"),
        ("$$$${A}", {"A": "1"}, "$${A}"),
        ("$$${A}", {"A": "1"}, "$1"),
        ("$A and $", {"A": "1"}, "$A and $"),
        ("${A}", {"A": "${B}", "B": "no"}, "${B}"),
    ],
)
def test_expand(value: str, env: dict[str, str], expected: str) -> None:
    assert expand(value, "k", env) == expected


def test_an_unset_variable_without_default_stops_only_its_server_naming_the_key() -> None:
    config = parse_toml(EXAMPLE, env={"HOME": "/home/ada"})
    assert config.servers["tickets"].unresolved == (
        "servers.tickets.headers.Authorization: environment variable TICKETS_TOKEN "
        "is not set (use ${TICKETS_TOKEN:-default})"
    )
    assert config.servers["notes"].unresolved is None
    assert config.servers["notes"].env == {"NOTES_DIR": "/home/ada/notes"}


def test_an_unset_variable_in_a_list_names_the_item() -> None:
    config = parse_toml('[servers.s]\ncommand = "x"\nargs = ["a", "${NOPE}"]\n', env={})
    reason = config.servers["s"].unresolved
    assert reason is not None and reason.startswith("servers.s.args[1]: ")
    assert "NOPE" in reason


@pytest.mark.parametrize("ref", ["${}", "${1A}", "${A-B}", "${A B}", "${:-x}"])
def test_a_bad_variable_reference_is_an_error(ref: str) -> None:
    err = error_of(f'[servers.s]\ncommand = "{ref}"\n', env={"A": "1"})
    assert err.path == "servers.s.command"
    assert "bad variable reference" in str(err)


def test_expansion_reaches_every_string_but_not_table_keys() -> None:
    config = parse_toml(
        """\
        [daemon]
        state_dir = "${D}"
        allow_groups = ["${G}"]
        [servers.s]
        command = "${C}"
        env = { "${K}" = "${V}" }
        """,
        env={"D": "/var/lib/mcpd", "G": "root", "C": "srv", "K": "key", "V": "val"},
    )
    assert config.daemon.state_dir == "/var/lib/mcpd"
    assert config.daemon.allow_groups == ["root"]
    assert config.servers["s"].command == "srv"
    assert config.servers["s"].env == {"${K}": "val"}


def test_expansion_uses_the_process_environment_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCPD_TEST_CMD", "from-environ")
    config = parse_config({"servers": {"s": {"command": "${MCPD_TEST_CMD}"}}})
    assert config.servers["s"].command == "from-environ"


# -- aliases and servers --


@pytest.mark.parametrize("alias", ["notes", "a", "A-b_9", "0", "--", "__"])
def test_valid_aliases(alias: str) -> None:
    config = parse_toml(f'[servers."{alias}"]\ncommand = "x"\n')
    assert list(config.servers) == [alias]


@pytest.mark.parametrize("alias", ["", "a b", "a.b", "no/te", "caf\u00e9", "a:b", "{x}"])
def test_an_alias_must_be_non_empty_and_safe(alias: str) -> None:
    err = error_of(f'[servers."{alias}"]\ncommand = "x"\n')
    assert err.path == f'servers."{alias}"'
    assert "alias" in str(err)


def test_an_alias_with_a_trailing_newline_is_refused() -> None:
    err = error_of('[servers."notes\\n"]\ncommand = "x"\n')
    assert err.path == 'servers."notes\\n"'


def test_a_server_with_both_command_and_url_is_an_error() -> None:
    err = error_of('[servers.both]\ncommand = "x"\nurl = "http://h/mcp"\n')
    assert err.path == "servers.both"
    assert "exactly one of `command`" in str(err)


@pytest.mark.parametrize(
    ("toml", "path", "written", "alias"),
    [
        ('[servers.my.server]\ncommand = "x"\n', "servers.my.server", "my.server", "my_server"),
        ('[servers.a.b.c]\nurl = "http://h/mcp"\n', "servers.a.b", "a.b.c", "a_b_c"),
    ],
)
def test_a_dotted_server_name_is_said_to_nest_tables(
    toml: str, path: str, written: str, alias: str
) -> None:
    # Not the list of every key a server takes: the dot is the slip.
    err = error_of(toml)
    assert err.path == path
    assert err.message == (
        "unknown key; a dot in a table's name makes a table inside another, so "
        f"[servers.{written}] is not one server: name it [servers.{alias}]"
    )


def test_an_unknown_table_in_a_server_that_holds_no_server_keys_gets_the_keys_list() -> None:
    err = error_of('[servers.s]\ncommand = "x"\n[servers.s.qqq]\nmode = 1\n')
    assert err.path == "servers.s.qqq"
    assert err.message.startswith("unknown key; servers.s takes args, auth,")


def test_a_server_with_neither_command_nor_url_is_an_error() -> None:
    err = error_of("[servers.none]\ntrusted = true\n")
    assert err.path == "servers.none"
    assert "exactly one of `command`" in str(err)


def test_an_empty_command_is_an_error() -> None:
    assert error_of('[servers.s]\ncommand = "  "\n').path == "servers.s.command"


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/mcp", "https://h", "https://h.example/mcp?x=1"]
)
def test_http_and_https_urls_are_accepted(url: str) -> None:
    assert parse_toml(f'[servers.h]\nurl = "{url}"\n').servers["h"].url == url


@pytest.mark.parametrize(
    "url", ["ftp://h/mcp", "localhost:8080", "http://", "https:///path", "ws://h", "", "file:///x"]
)
def test_a_url_that_is_not_http_or_https_is_an_error(url: str) -> None:
    err = error_of(f'[servers.h]\nurl = "{url}"\n')
    assert err.path == "servers.h.url"
    assert "http" in err.message


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('[servers.h]\nurl = "http://h"\nargs = ["a"]\n', "servers.h.args"),
        ('[servers.h]\nurl = "http://h"\nenv = { A = "1" }\n', "servers.h.env"),
        ('[servers.h]\nurl = "http://h"\ncwd = "/tmp"\n', "servers.h.cwd"),
        ('[servers.s]\ncommand = "x"\nheaders = { A = "1" }\n', "servers.s.headers"),
        ('[servers.s]\ncommand = "x"\nca_file = "/etc/ssl/ca.pem"\n', "servers.s.ca_file"),
    ],
)
def test_options_of_the_other_transport_are_errors(text: str, path: str) -> None:
    assert error_of(text).path == path


def test_a_missing_ca_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    err = error_of(f'[servers.h]\nurl = "https://h"\nca_file = "{missing}"\n')
    assert err.path == "servers.h.ca_file"
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked here")
    config = parse_toml(f'[servers.h]\nurl = "https://h"\nca_file = "{ca}"\n')
    assert config.servers["h"].ca_file == str(ca)


def test_a_ca_file_another_user_could_write_is_an_error(tmp_path: Path) -> None:
    """Whoever can add a certificate to it can stand in for the server, and be sent its
    credentials."""
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked here")
    ca.chmod(0o666)
    err = error_of(f'[servers.h]\nurl = "https://h"\nca_file = "{ca}"\n')
    assert err.path == "servers.h.ca_file"
    assert "not trusted" in str(err) and "every user" in str(err)
    ca.chmod(0o644)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "ca.pem").write_text("not checked here")
    err = error_of(f'[servers.h]\nurl = "https://h"\nca_file = "{shared / "ca.pem"}"\n')
    assert err.path == "servers.h.ca_file" and f"the directory {shared}" in str(err)
    assert error_of(f'[servers.h]\nurl = "https://h"\nca_file = "{tmp_path}"\n').path == (
        "servers.h.ca_file"
    )


# -- other checks --


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('[daemon]\nsocket_mode = "rw"\n', "daemon.socket_mode"),
        ('[daemon]\nsocket_mode = "1777"\n', "daemon.socket_mode"),
        ("[daemon]\ncall_timeout = 0\n", "daemon.call_timeout"),
        ("[daemon]\nprobe_timeout = -1.0\n", "daemon.probe_timeout"),
        ("[daemon]\nlist_timeout = 0.0\n", "daemon.list_timeout"),
        ("[daemon]\nstartup_deadline = 0\n", "daemon.startup_deadline"),
        ("[daemon]\ncall_timeout = nan\n", "daemon.call_timeout"),
        ("[daemon]\nprobe_timeout = nan\n", "daemon.probe_timeout"),
        ("[daemon]\nresult_budget_chars = 99\n", "daemon.result_budget_chars"),
        ("[daemon]\npage_size = -1\n", "daemon.page_size"),
        ("[daemon]\nmax_pages = 0\n", "daemon.max_pages"),
        ("[daemon]\nmax_connections_per_uid = 0\n", "daemon.max_connections_per_uid"),
        ('[naming]\ntemplate = "mcp__{alias}"\n', "naming.template"),
        ('[naming]\ntemplate = "{server}__{tool}"\n', "naming.template"),
        ("[naming]\nmax_length = 15\n", "naming.max_length"),
        ("[naming]\nmax_length = 1025\n", "naming.max_length"),
        (STDIO + "call_timeout = 0.0\n", "servers.s.call_timeout"),
        (STDIO + "call_timeout = nan\n", "servers.s.call_timeout"),
        (STDIO + "max_concurrency = 0\n", "servers.s.max_concurrency"),
    ],
)
def test_out_of_range_settings_name_their_key(text: str, path: str) -> None:
    assert error_of(text).path == path


LIST_LIMITS = [
    "max_list_items",
    "max_list_bytes",
    "max_item_bytes",
    "max_description_bytes",
    "max_instructions_bytes",
]


def test_list_limits_parse_in_the_daemon_and_per_server() -> None:
    config = parse_toml(
        "[daemon]\nmax_list_items = 500\nmax_instructions_bytes = 4096\n"
        + STDIO
        + "max_list_items = 20\nmax_item_bytes = 1024\nmax_list_bytes = 100000\n"
        + "max_description_bytes = 300\n"
    )
    assert (config.daemon.max_list_items, config.daemon.max_instructions_bytes) == (500, 4096)
    s = config.servers["s"]
    assert (s.max_list_items, s.max_item_bytes, s.max_list_bytes) == (20, 1024, 100000)
    assert (s.max_description_bytes, s.max_instructions_bytes) == (300, None)
    defaults = parse_config({}, env={}).daemon
    assert (defaults.max_list_items, defaults.max_description_bytes) == (2000, 64 * 1024)


@pytest.mark.parametrize("key", LIST_LIMITS)
@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_list_limit_below_one_is_an_error_naming_its_key(key: str, value: str) -> None:
    assert error_of(f"[daemon]\n{key} = {value}\n").path == f"daemon.{key}"
    error = error_of(STDIO + f"{key} = {value}\n")
    assert (error.path, error.message) == (f"servers.s.{key}", "must be at least 1")


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_read_budget_below_one_is_an_error_naming_its_key(value: str) -> None:
    assert error_of(f"[daemon]\nread_budget = {value}\n").path == "daemon.read_budget"
    error = error_of(STDIO + f"read_budget = {value}\n")
    assert (error.path, error.message) == ("servers.s.read_budget", "must be at least 1")


@pytest.mark.parametrize("key", LIST_LIMITS)
def test_a_list_limit_that_is_not_a_whole_number_is_an_error_naming_its_key(key: str) -> None:
    for text, path in (
        (STDIO + f'{key} = "lots"\n', "servers.s"),
        (f"[daemon]\n{key} = 1.5\n", "daemon"),
    ):
        error = error_of(text)
        assert (error.path, error.message[:12]) == (f"{path}.{key}", "expected a w")


def test_a_template_without_alias_and_a_custom_length_are_accepted() -> None:
    config = parse_toml('[naming]\ntemplate = "{tool}"\nmax_length = 16\n')
    assert config.naming.template == "{tool}"
    assert config.naming.max_length == 16


def test_socket_mode_is_octal() -> None:
    assert parse_toml('[daemon]\nsocket_mode = "0660"\n').socket_mode() == 0o660


# -- default paths --


@pytest.mark.skipif(os.geteuid() != 0, reason="the root default needs root")
def test_default_socket_path_as_root_ignores_xdg_runtime_dir() -> None:
    assert cfg.default_socket_path({"XDG_RUNTIME_DIR": "/run/user/0"}) == "/run/mcpd/mcpd.sock"
    assert cfg.default_socket_path({}) == "/run/mcpd/mcpd.sock"
    assert parse_config({}, env={}).socket_path() == "/run/mcpd/mcpd.sock"


def test_default_socket_path_for_a_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cfg.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(cfg.os, "getuid", lambda: 1000)
    env = {"XDG_RUNTIME_DIR": "/run/user/1000"}
    assert cfg.default_socket_path(env) == "/run/user/1000/mcpd/mcpd.sock"
    assert cfg.default_socket_path({}) == "/tmp/mcpd-1000/mcpd.sock"
    assert cfg.default_socket_path({"XDG_RUNTIME_DIR": ""}) == "/tmp/mcpd-1000/mcpd.sock"


def test_a_configured_socket_wins_over_the_default() -> None:
    config = parse_toml('[daemon]\nsocket = "/srv/mcpd.sock"\n')
    assert config.socket_path() == "/srv/mcpd.sock"


def test_default_config_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cfg.default_config_path({"MCPD_CONFIG": "/x/c.toml"}) == "/x/c.toml"
    monkeypatch.setattr(cfg.os, "geteuid", lambda: 0)
    assert cfg.default_config_path({"HOME": "/root"}) == "/etc/mcpd/config.toml"
    monkeypatch.setattr(cfg.os, "geteuid", lambda: 1000)
    assert cfg.default_config_path({"HOME": "/home/ada"}) == "/home/ada/.config/mcpd/config.toml"
    assert (
        cfg.default_config_path({"HOME": "/home/ada", "XDG_CONFIG_HOME": "/cfg"})
        == "/cfg/mcpd/config.toml"
    )


# -- loading files --


def test_loading_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load(tmp_path / "absent.toml")


def test_loading_invalid_toml_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[servers.notes\ncommand = 'x'\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(path)


def test_loading_a_file_that_is_not_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'[servers.s]\ncommand = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(path)


# -- mcpd check-config --


def check_config(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    mcpd = Path(sys.executable).with_name("mcpd")
    assert mcpd.exists(), mcpd
    return subprocess.run(
        [str(mcpd), "check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        # The script imports the mcpd of this tree, wherever the one installed is.
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **env},
        timeout=60,
    )


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_check_config_prints_the_servers_and_exits_0(tmp_path: Path) -> None:
    proc = check_config(write(tmp_path, EXAMPLE), ENV)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "2 server(s)" in out
    notes = next(line for line in out.splitlines() if line.strip().startswith("notes"))
    assert "stdio" in notes
    assert "python3 -m mcpd.demo.notes --dir /home/ada/notes" in notes
    tickets = next(line for line in out.splitlines() if line.strip().startswith("tickets"))
    assert "http" in tickets
    assert "https://tickets.example.com/mcp" in tickets
    # Header values are secrets.
    assert "s3cret" not in out
    assert "s3cret" not in proc.stderr


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        (
            '[servers.notes]\ncomand = "python3"\n',
            {},
            'servers.notes.comand: unknown key; did you mean "command"?',
        ),
        # Outside a server's table an unset variable still stops the whole config.
        (
            '[daemon]\nsocket = "${NO_SUCH_DIR}/mcpd.sock"\n',
            {},
            "config.toml: daemon.socket: environment variable NO_SUCH_DIR is not set",
        ),
        ('[servers."a b"]\ncommand = "x"\n', {}, 'servers."a b": an alias must'),
        ('[servers.h]\nurl = "ftp://h"\n', {}, "servers.h.url"),
        ("[servers.notes\n", {}, "not valid TOML"),
    ],
)
def test_check_config_exits_78_naming_the_bad_key(
    tmp_path: Path, text: str, env: dict[str, str], expected: str
) -> None:
    proc = check_config(write(tmp_path, text), env)
    assert proc.returncode == EX_CONFIG == 78
    assert expected in proc.stderr
    assert proc.stdout == ""


OFF_AND_BROKEN = """\
[servers.time]
command = "python3"
args = ["-m", "mcpd.demo.notes"]

[servers.off]
enabled = false
command = "${NOT_SET_ANYWHERE}"
cwd = "${file:/nonexistent/dir}"
env = { TOKEN = "${NOT_SET_ANYWHERE}", KEY = "${file:/nonexistent/key}" }

[servers.broken]
command = "python3"
env = { TOKEN = "${NOT_SET_ANYWHERE}" }
"""


def test_check_config_warns_of_a_server_that_cannot_start_and_ignores_a_disabled_one(
    tmp_path: Path,
) -> None:
    proc = check_config(write(tmp_path, OFF_AND_BROKEN), {})
    assert proc.returncode == 0, proc.stderr
    assert "3 server(s)" in proc.stdout
    off = next(line for line in proc.stdout.splitlines() if line.strip().startswith("off"))
    assert "disabled" in off
    assert proc.stderr.splitlines() == [
        "warning: servers.broken.env.TOKEN: environment variable NOT_SET_ANYWHERE is not set "
        "(use ${NOT_SET_ANYWHERE:-default}); the server will not start"
    ]


def test_check_config_warns_that_allow_groups_needs_a_group_readable_socket(
    tmp_path: Path,
) -> None:
    locked = check_config(write(tmp_path, '[daemon]\nallow_groups = ["root"]\n'), {})
    assert locked.returncode == 0, locked.stderr
    assert "daemon: the members of root cannot open the socket file, whose mode 0600" in (
        locked.stderr
    )
    assert 'set socket_mode = "0660"' in locked.stderr
    opened = '[daemon]\nallow_groups = ["root"]\nsocket_mode = "0660"\n'
    assert check_config(write(tmp_path, opened), {}).stderr == ""


def test_a_disabled_server_is_not_expanded_but_its_references_must_be_well_formed() -> None:
    config = parse_toml(OFF_AND_BROKEN, env={})
    off = config.servers["off"]
    assert off.unresolved is None and off.env["TOKEN"] == "${NOT_SET_ANYWHERE}"
    err = error_of('[servers.off]\nenabled = false\ncommand = "${1A}"\n', env={})
    assert err.path == "servers.off.command" and "bad variable reference" in err.message
    # A value known only once expanded is checked then, not as written.
    for enabled in ("false", "true"):
        config = parse_toml(f'[servers.w]\nenabled = {enabled}\nurl = "${{URL}}"\n', env={})
        assert config.servers["w"].url == "${URL}"
    # What does not depend on a variable is still checked.
    err = error_of('[servers.off]\nenabled = false\nurl = "ftp://${HOST}"\ncomand = "x"\n')
    assert str(err) == 'servers.off.comand: unknown key; did you mean "command"?'


def test_a_server_that_cannot_start_is_still_checked_for_types_and_keys() -> None:
    err = error_of('[servers.s]\ncommand = "${NOPE}"\nargs = "not a list"\n', env={})
    assert err.path == "servers.s.args"
    err = error_of('[servers.s]\ncommand = "${NOPE}"\nunresolved = "x"\n', env={})
    assert str(err) == "servers.s.unresolved: unknown key"
    err = error_of('[servers.s]\ncommand = "${NOPE}"\nmax_concurrency = 0\n', env={})
    assert err.path == "servers.s.max_concurrency"


def test_check_config_on_a_missing_file_exits_78(tmp_path: Path) -> None:
    proc = check_config(tmp_path / "absent.toml", {})
    assert proc.returncode == 78
    assert "absent.toml" in proc.stderr


def test_unknown_allow_group_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"daemon": {"allow_groups": ["root", "no-such-group-here"]}}, env={})
    assert info.value.path == "daemon.allow_groups[1]"
    assert "no-such-group-here" in info.value.message


POSITIVE = "must be positive, at most 31536000 (a year)"


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e13"])
def test_a_time_limit_that_is_not_positive_or_past_a_year_is_an_error_naming_its_key(
    value: str,
) -> None:
    error = error_of(f"[daemon]\nmax_call_time = {value}\n{STDIO}")
    assert (error.path, error.message) == ("daemon.max_call_time", POSITIVE)
    url = '[servers.h]\nurl = "https://example.com/mcp"\n'
    error = error_of(f"{url}connect_timeout = {value}\n")
    assert (error.path, error.message) == ("servers.h.connect_timeout", POSITIVE)


@pytest.mark.parametrize("group", ["\u00b2", "\u0663"])
def test_a_daemon_group_of_digits_other_than_ascii_is_a_name(group: str) -> None:
    err = error_of(f'[daemon]\nallow_groups = ["{group}"]\n')
    assert err.path == "daemon.allow_groups[0]"
    assert err.message == f"no group named {group!r}"


@pytest.mark.parametrize(("files", "kept"), [("1", 1), ("1000", 1000)])
def test_the_audit_files_kept_are_from_one_to_a_thousand(files: str, kept: int) -> None:
    assert parse_toml(f"[daemon]\naudit_files = {files}\n").daemon.audit_files == kept


@pytest.mark.parametrize(("files", "message"), [("0", "at least 1"), ("1001", "at most 1000")])
def test_audit_files_out_of_range_is_an_error_naming_the_key(files: str, message: str) -> None:
    error = error_of(f"[daemon]\naudit_files = {files}\n")
    assert error.path == "daemon.audit_files" and message in error.message
