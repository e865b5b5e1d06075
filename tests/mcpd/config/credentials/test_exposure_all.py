"""Every secret in an argument or a URL, not only its first: ``mcpd import`` and ``mcpd
check-config`` show no string with any secret of it in it, and ``mcpd import`` takes
each literal one out of the config it writes (a server whose own URL holds a password
it leaves out, saying so); header values, ``Bearer`` credentials, the password options
of database clients and options named pass, pwd, auth, bearer and credentials count,
and the ordinary arguments that look like them do not."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from mcpd.config.credentials.exposure import in_args
from mcpd.config.loading.load import load, parse_config
from tests.support.cli.import_commands import mcpd, warned

PG_PASSWORD, PG_QUERY = "S3cretPw", "AlsoSecret"
GH_ONE, GH_TWO = "ghp_" + "A" * 36, "ghp_" + "B" * 38
BEARER = "Bearer abc.def.ghi"
HOST_FILE = {
    "mcpServers": {
        "remote": {
            "command": "npx",
            "args": [
                "mcp-remote",
                "https://mcp.example.com/sse",
                "--header",
                "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0",
            ],
        },
        "pg": {
            "command": "npx",
            "args": [
                "-y",
                "@modelcontextprotocol/server-postgres",
                f"postgresql://admin:{PG_PASSWORD}@db.internal/prod?password={PG_QUERY}",
            ],
        },
        "two": {
            "command": "tool",
            "args": ["--config=https://u:FirstPw@h.example/x?api_key=SECONDKEY"],
        },
        "gh": {"command": "tool", "args": [f"{GH_ONE},{GH_TWO}"]},
        "mysql": {
            "command": "mysql-mcp",
            "args": ["-u", "root", "-pRootPassw0rd", "--pass", "hunter22", "--auth", BEARER],
        },
        "web": {"url": "https://bob:hunter2@mcp.example.com/mcp?api_key=SECRETKEY123"},
    }
}
SECRETS = [
    "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    PG_PASSWORD,
    PG_QUERY,
    "FirstPw",
    "SECONDKEY",
    GH_ONE,
    GH_TWO,
    "RootPassw0rd",
    "hunter22",
    "abc.def.ghi",
    "hunter2",
    "SECRETKEY123",
]
# What import says of the server it leaves out, in place of its secrets.
LEFT_OUT = (
    "#   mcpServers.web.url: holds a user name and password, which mcpd refuses to send in a "
    "URL; skipped (give them in an Authorization header instead)"
)


def host_file(tmp_path: Path) -> Path:
    path = tmp_path / "claude.json"
    path.write_text(json.dumps(HOST_FILE))
    return path


def test_import_takes_out_every_secret_of_every_argument(tmp_path: Path) -> None:
    out = tmp_path / "mcpd.toml"
    for argv in (["import", str(host_file(tmp_path))], ["import", str(host_file(tmp_path)),
                                                        "-o", str(out)]):  # fmt: skip
        proc = mcpd(*argv)
        assert proc.returncode == 0, proc.stderr
        for secret in SECRETS:
            assert secret not in proc.stdout and secret not in proc.stderr, (argv, secret)
    text = out.read_text()
    for secret in SECRETS:
        assert secret not in text, secret
    assert "10 secret(s) moved to" in proc.stderr and "1 note(s)" in proc.stderr
    # Two secrets of one argument, each in a file of its own; a password in a URL given
    # as an argument is moved as any other.
    assert "servers.pg.args[2].password -> " in proc.stderr
    assert "servers.pg.args[2].password_2 -> " in proc.stderr
    assert "servers.two.args[0].password -> " in proc.stderr
    assert len(warned(proc.stderr)) == 10, proc.stderr
    assert LEFT_OUT in text
    # The written config gives each server what the other host gave it, but for the
    # one whose URL holds credentials, which mcpd would refuse.
    config = load(str(out))
    assert "web" not in config.servers
    for alias, body in HOST_FILE["mcpServers"].items():
        if "args" in body:
            assert config.servers[alias].args == body["args"], alias


def test_printed_import_names_a_variable_for_each_and_they_give_back_the_arguments(
    tmp_path: Path,
) -> None:
    proc = mcpd("import", str(host_file(tmp_path)))
    data = tomllib.loads(proc.stdout)
    servers = data["servers"]
    assert servers["gh"]["args"] == ["${GH_TOKEN},${GH_TOKEN_2}"]
    assert servers["mysql"]["args"] == ["-u", "root", "-p${MYSQL_PASSWORD}", "--pass",
                                        "${MYSQL_PASS}", "--auth", "${MYSQL_AUTH}"]  # fmt: skip
    env = {
        "REMOTE_AUTHORIZATION": "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        "PG_PASSWORD": PG_PASSWORD,
        "PG_PASSWORD_2": PG_QUERY,
        "TWO_PASSWORD": "FirstPw",
        "TWO_API_KEY": "SECONDKEY",
        "GH_TOKEN": GH_ONE,
        "GH_TOKEN_2": GH_TWO,
        "MYSQL_PASSWORD": "RootPassw0rd",
        "MYSQL_PASS": "hunter22",
        "MYSQL_AUTH": "Bearer abc.def.ghi",
    }
    # The server whose URL holds credentials is left out, and no variable named for them.
    assert LEFT_OUT in proc.stdout
    assert "web" not in servers and "WEB_" not in proc.stdout
    config = parse_config(data, env=env)
    for alias, body in HOST_FILE["mcpServers"].items():
        if "args" in body:
            assert config.servers[alias].args == body["args"], alias


def test_check_config_shows_no_warning_with_another_secret_in_it(tmp_path: Path) -> None:
    config = tmp_path / "mcpd.toml"
    config.write_text(
        "[servers.web]\n"
        'url = "http://mcp.example.com/mcp?api_key=SECRETKEY123&token=hunter2"\n'
        "[servers.pg]\n"
        'command = "npx"\n'
        f'args = ["postgresql://admin:{PG_PASSWORD}@db/prod?password={PG_QUERY}"]\n'
        "[servers.mysql]\n"
        'command = "mysql"\n'
        'args = ["-u", "root", "-pRootPassw0rd", "--header", "Authorization: Bearer 9f8e7d6c"]\n'
    )
    proc = mcpd("check-config", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    for secret in [
        "hunter2",
        "SECRETKEY123",
        PG_PASSWORD,
        PG_QUERY,
        "RootPassw0rd",
        "9f8e7d6c",
    ]:
        assert secret not in proc.stdout and secret not in proc.stderr, secret
    assert len(warned(proc.stderr)) == 6, proc.stderr
    assert "mysql -u root -p*** --header Authorization: Bearer ***" in proc.stdout


@pytest.mark.parametrize(
    ("command", "args", "index", "what"),
    [
        ("npx", ["mcp-remote", "--header", "Authorization: Bearer 9f8e7d"], 2,
         "the value of the Authorization header"),
        ("npx", ["mcp-remote", "--header", "Authorization:${AUTH_HEADER}"], 2,
         "the value of the Authorization header"),
        ("tool", ["--header=X-Api-Key: k3y"], 0, "the value of the X-Api-Key header"),
        ("tool", ["-H", "Cookie: session=abc"], 1, "the value of the Cookie header"),
        ("tool", ["--headers", '{"h": "Bearer abc.def.ghi"}'], 1, "a bearer token"),
        ("tool", ["--pass", "hunter22"], 1, "the value of --pass"),
        ("tool", ["--db-pwd=hunter22"], 0, "the value of --db-pwd"),
        ("tool", ["--passwd", "hunter22"], 1, "the value of --passwd"),
        ("tool", ["--auth", "Bearer abc.def.ghi"], 1, "the value of --auth"),
        ("tool", ["--basic-auth", "ada:hunter22"], 1, "the value of --basic-auth"),
        ("tool", ["--bearer", "abc123"], 1, "the value of --bearer"),
        ("tool", ["--credentials", "ada:hunter22"], 1, "the value of --credentials"),
        ("tool", ["--credential=hunter22"], 0, "the value of --credential"),
        ("tool", ["--secret", "s"], 1, "the value of --secret"),
        ("mysql", ["-u", "root", "-pRootPassw0rd"], 2, "the password after -p"),
        ("docker", ["exec", "db", "mysql", "-uroot", "-phunter2"], 4, "the password after -p"),
        ("npx", ["@benborla29/mcp-server-mysql", "-p=hunter2"], 1, "the password after -p"),
        ("mongosh", ["-u", "ada", "-p", "hunter2"], 3, "the password after -p"),
        ("redis-cli", ["-a", "hunter2"], 1, "the password after -a"),
        ("sqlcmd", ["-U", "sa", "-P", "hunter2"], 3, "the password after -P"),
    ],
)  # fmt: skip
def test_more_secret_arguments_are_found(
    command: str, args: list[str], index: int, what: str
) -> None:
    (found,) = in_args(args, command)
    assert (found.index, found.what) == (index, what)


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("mysql", ["-u", "root", "-p", "appdb"]),  # -p alone asks; appdb is the database
        ("mysql", ["-h", "db", "-P", "3306", "-p3306"]),  # a port, whatever it is there
        ("mongosh", ["-p", "27017"]),
        ("docker", ["run", "-p", "8080:80", "-p8443:443", "mysql"]),
        ("tar", ["-pxf", "a.tar"]),  # no database client: combined flags
        ("cp", ["-pr", "a", "b"]),
        ("ssh", ["-p2222", "host"]),
        ("tool", ["--no-auth", "server.py"]),
        ("tool", ["--require-password", "server.py"]),
        ("tool", ["--auth", "none"]),
        ("tool", ["--auth=oauth"]),
        ("tool", ["--auth-server", "https://auth.example.com"]),
        ("tool", ["--auth-type", "bearer"]),
        ("tool", ["--pass-through", "stdout"]),
        ("tool", ["--pass-env", "HOME"]),
        ("env", ["PWD=/home/ada", "server"]),
        ("env", ["GOOGLE_APPLICATION_CREDENTIALS=/home/ada/key.json", "server"]),
        ("tool", ["--credentials", "~/.config/gcloud/creds.json"]),
        ("tool", ["--credentials-path", "/etc/creds.json"]),
        ("tool", ["--header", "Accept: application/json"]),
        ("docker", ["run", "token-server:latest"]),
        ("tool", ["--description", "signs requests with a Bearer authentication scheme"]),
        ("tool", ["--prompt", "Enter password: "]),
    ],
)
def test_more_ordinary_arguments_are_not_secrets(command: str, args: list[str]) -> None:
    assert in_args(args, command) == []
