"""Secrets in a stdio server's arguments (every local user can read a command line) and
in a URL (which ends up in logs): ``mcpd import`` and ``mcpd check-config`` warn of each,
naming the server and the position and never showing the value; ``mcpd import`` also
keeps a literal one out of the config it prints, behind a reference that mcpd expands
back into the same argument, and leaves out a server whose own URL holds a password
(mcpd refuses such a config), saying so. Ordinary arguments raise nothing."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from mcpd.config.credentials.exposure import in_args, in_url
from mcpd.config.loading.load import load, parse_config
from tests.support.cli.import_commands import mcpd, warned

SAMPLES = Path(__file__).resolve().parents[3] / "support" / "import_samples"

OPENAI = "sk-proj4f9a8b7c6d5e4f3a2b1c0d9e"
GITHUB = "ghp_R8x2Kq9ZtLmN4vB7cD1eF3gH5jK6lM0pQ2rS"
DB_PASSWORD = "hunter2-db"
WEATHER_KEY = "w3ather-k3y-123"
BASIC_PASSWORD = "b4sic-pass"
SECRETS = [OPENAI, GITHUB, DB_PASSWORD, WEATHER_KEY, BASIC_PASSWORD]

HOST_FILE = {
    "mcpServers": {
        "search": {"command": "npx", "args": ["-y", "search-mcp", "--api-key", OPENAI]},
        "gh": {
            "command": "docker",
            "args": ["run", "-i", "--rm", "-e", f"GITHUB_TOKEN={GITHUB}", "ghcr.io/x/gh"],
        },
        "db": {"command": "dbhub", "args": ["--dsn", f"postgres://ada:{DB_PASSWORD}@db/app"]},
        "ref": {"command": "tool", "args": ["--token", "${env:MY_TOKEN}"]},
        "weather": {"url": f"https://weather.example.com/mcp?api_key={WEATHER_KEY}&units=si"},
        "basic": {"url": f"https://ada:{BASIC_PASSWORD}@mcp.example.com/mcp"},
    }
}
# Where each warning points, and what it shows in place of the value.
EXPECTED = [
    ("servers.search.args[3]: the value of --api-key", '("***")', "[servers.search.env]"),
    ("servers.gh.args[4]: the value of GITHUB_TOKEN", '("GITHUB_TOKEN=***")', "GITHUB_TOKEN alone"),
    ("servers.db.args[1]: the password in the URL", '("postgres://ada:***@db/app")', "env]"),
    ("servers.ref.args[1]: the value of --token", "", "[servers.ref.env]"),
    # A URL is shown as scheme://host[:port]/path, whatever the warning is about.
    ("servers.weather.url: the query parameter api_key", "(\"https://weather.example.com/mcp\")",
     "headers]"),
]  # fmt: skip
# What import says of the server it leaves out, in place of a warning.
LEFT_OUT = (
    "mcpServers.basic.url: holds a user name and password, which mcpd refuses to send in a "
    "URL; skipped (give them in an Authorization header instead)"
)


def assert_warnings(lines: list[str], expected: list[tuple[str, str, str]] = EXPECTED) -> None:
    assert len(lines) == len(expected), lines
    for (where, shown, advice), line in zip(expected, sorted(lines, key=_order), strict=True):
        assert where in line and shown in line and advice in line, (where, line)
        if ".args[" in where:
            assert "every local user can read" in line and "/proc/PID/cmdline" in line
        else:
            assert "can end up in logs" in line


def _order(line: str) -> int:
    return next(i for i, (where, _, _) in enumerate(EXPECTED) if where in line)


def host_file(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(HOST_FILE))
    return path


def test_import_warns_and_prints_no_secret(tmp_path: Path) -> None:
    proc = mcpd("import", str(host_file(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    for secret in SECRETS:
        assert secret not in proc.stdout and secret not in proc.stderr, secret
    assert_warnings(warned(proc.stderr))
    assert f"#   {LEFT_OUT}" in proc.stdout
    data = tomllib.loads(proc.stdout)
    servers = data["servers"]
    assert sorted(servers) == ["db", "gh", "ref", "search", "weather"]
    assert servers["search"]["args"] == ["-y", "search-mcp", "--api-key", "${SEARCH_API_KEY}"]
    assert servers["gh"]["args"][4] == "GITHUB_TOKEN=${GH_GITHUB_TOKEN}"
    assert servers["db"]["args"][1] == "postgres://ada:${DB_PASSWORD}@db/app"
    assert servers["ref"]["args"] == ["--token", "${MY_TOKEN}"]  # a reference stays as it was
    assert servers["weather"]["url"].endswith("?api_key=${WEATHER_API_KEY}&units=si")
    assert "#   SEARCH_API_KEY  (servers.search.args[3])" in proc.stdout
    assert "#   DB_PASSWORD  (servers.db.args[1])" in proc.stdout
    assert "BASIC_PASSWORD" not in proc.stdout
    # Once the variables are set, each server gets what the other host gave it.
    env = {
        "SEARCH_API_KEY": OPENAI,
        "GH_GITHUB_TOKEN": GITHUB,
        "DB_PASSWORD": DB_PASSWORD,
        "MY_TOKEN": "t",
        "WEATHER_API_KEY": WEATHER_KEY,
    }
    original = HOST_FILE["mcpServers"]
    config = parse_config(data, env=env)
    for alias in ("search", "gh", "db"):
        assert config.servers[alias].args == original[alias]["args"], alias
    assert config.servers["weather"].url == original["weather"]["url"]


def test_import_to_a_file_moves_them_aside_and_the_config_works(tmp_path: Path) -> None:
    out = tmp_path / "mcpd.toml"
    made = mcpd("import", str(host_file(tmp_path)), "-o", str(out))
    assert made.returncode == 0, made.stderr
    text = out.read_text()
    for secret in SECRETS:
        assert secret not in text and secret not in made.stderr, secret
    assert "4 secret(s) moved to" in made.stderr and "1 note(s)" in made.stderr
    assert f"servers.search.args[3] -> {tmp_path}/mcpd.secrets/search.args.3" in made.stderr
    # A password in a URL given to a stdio server as an argument is moved as any other.
    assert f"servers.db.args[1] -> {tmp_path}/mcpd.secrets/db.args.1" in made.stderr
    assert f"servers.weather.url.api_key -> {tmp_path}/mcpd.secrets/weather.url.api_key" in (
        made.stderr
    )
    assert_warnings(warned(made.stderr))
    assert f"#   {LEFT_OUT}" in text
    # The config works as written: check-config takes it, and each server gets what the
    # other host gave it.
    checked = mcpd("check-config", "--config", str(out), MY_TOKEN="t")
    assert checked.returncode == 0, checked.stderr
    config = load(str(out), env={"MY_TOKEN": "t"})
    assert sorted(config.servers) == ["db", "gh", "ref", "search", "weather"]
    original = HOST_FILE["mcpServers"]
    assert config.servers["search"].args == original["search"]["args"]
    assert config.servers["gh"].args == original["gh"]["args"]
    assert config.servers["db"].args == original["db"]["args"]
    assert config.servers["weather"].url == original["weather"]["url"]


def test_check_config_warns_and_shows_no_secret(tmp_path: Path) -> None:
    config = tmp_path / "mcpd.toml"
    config.write_text(
        "[servers.search]\n"
        f'command = "npx"\nargs = ["-y", "search-mcp", "--api-key", "{OPENAI}"]\n'
        "[servers.gh]\n"
        'command = "docker"\n'
        'args = ["run", "-i", "--rm", "-e", "GITHUB_TOKEN=${GH}", "ghcr.io/x/gh"]\n'
        "[servers.db]\n"
        f'command = "dbhub"\nargs = ["--dsn", "postgres://ada:{DB_PASSWORD}@db/app"]\n'
        "[servers.ref]\n"
        'command = "tool"\nargs = ["--token", "${file:' + str(tmp_path / "token") + '}"]\n'
        "[servers.weather]\n"
        f'url = "https://weather.example.com/mcp?api_key={WEATHER_KEY}&units=si#top"\n'
    )
    (tmp_path / "token").write_text("t0ken-from-a-file\n")
    (tmp_path / "token").chmod(0o600)
    proc = mcpd("check-config", "--config", str(config), GH=GITHUB)
    assert proc.returncode == 0, proc.stderr
    for secret in [*SECRETS, "t0ken-from-a-file"]:
        assert secret not in proc.stdout and secret not in proc.stderr, secret
    assert_warnings(warned(proc.stderr))
    # The listing shows each server's command line masked, and its URL as
    # scheme://host[:port]/path, without query or fragment.
    assert "npx -y search-mcp --api-key ***" in proc.stdout
    assert "docker run -i --rm -e GITHUB_TOKEN=*** ghcr.io/x/gh" in proc.stdout
    assert " https://weather.example.com/mcp\n" in proc.stdout
    assert "units=si" not in proc.stdout + proc.stderr and "#top" not in proc.stdout


@pytest.mark.parametrize(
    "url",
    [
        "https://ada:${BASIC}@mcp.example.com/mcp",
        "https://ada@mcp.example.com/mcp",  # a user name alone is not sent either
    ],
)
def test_check_config_refuses_credentials_in_a_url_and_shows_none(tmp_path: Path, url: str) -> None:
    """The daemon sends no credentials in a URL: the config that has them is refused
    where it is checked, naming the key, not each time the server would start."""
    config = tmp_path / "mcpd.toml"
    config.write_text(f'[servers.basic]\nurl = "{url}"\n')
    proc = mcpd("check-config", "--config", str(config), BASIC=BASIC_PASSWORD)
    assert proc.returncode == 78, proc.stderr
    assert "servers.basic.url: credentials in the URL are not supported" in proc.stderr
    assert BASIC_PASSWORD not in proc.stderr and "ada" not in proc.stderr + proc.stdout


@pytest.mark.parametrize("sample", sorted(str(p.relative_to(SAMPLES)) for p in
                                         SAMPLES.rglob("*.json")))  # fmt: skip
def test_the_import_samples_raise_no_warning(sample: str) -> None:
    proc = mcpd("import", str(SAMPLES / sample))
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower() and "Warnings:" not in proc.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["-y", "@modelcontextprotocol/server-github"],
        ["--port", "8080"],
        ["-m", "my_mcp_server", "--port", "8080"],
        ["--directory", "/Users/ada/weather", "run", "weather.py"],
        ["--db-path", "/home/ada/test.db"],
        ["--token-file", "/run/credentials/mcpd/token"],
        ["--api-key-env", "OPENAI_API_KEY"],
        ["--max-tokens", "4096", "--token-limit", "1000"],
        ["--password-stdin"],
        ["--token", "--verbose"],
        ["-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
        ["--url", "https://api.example.com/mcp?units=metric&page=2"],
        ["https://user@git.example.com/repo.git", "task-runner-skill-generator-2024-v1"],
    ],
)
def test_ordinary_arguments_are_not_secrets(args: list[str]) -> None:
    assert in_args(args) == []


@pytest.mark.parametrize(
    ("args", "index", "what"),
    [
        (["--api-key", "v"], 1, "the value of --api-key"),
        (["--apiKey=v"], 0, "the value of --apiKey"),
        (["-access_token", "v"], 1, "the value of -access_token"),
        (["--client-secret=v"], 0, "the value of --client-secret"),
        (["env", "OPENAI_API_KEY=v", "server"], 1, "the value of OPENAI_API_KEY"),
        (["--password", "${DB_PASSWORD}"], 1, "the value of --password"),
        (["--header", f"Authorization: Bearer {GITHUB}"], 1, "a GitHub token"),
        (["x", f"--key={OPENAI}"], 1, "an OpenAI or Anthropic key"),
        (["xoxb-1234567890-abcdefghij"], 0, "a Slack token"),
        (["AKIAIOSFODNN7EXAMPLE"], 0, "an AWS access key"),
        (["glpat-abcdefghij0123456789"], 0, "a GitLab token"),
        (["mysql://root:pw@localhost/db"], 0, "the password in the URL"),
        (["--endpoint", "https://h/mcp?access_token=v"], 1, "the query parameter access_token"),
    ],
)
def test_secret_arguments_are_found(args: list[str], index: int, what: str) -> None:
    (found,) = in_args(args)
    assert (found.index, found.what) == (index, what)


def test_urls_without_secrets_and_with() -> None:
    assert in_url("https://mcp.sentry.dev/mcp") == []
    assert in_url("${API_BASE_URL:-https://api.example.com}/mcp") == []
    assert in_url("https://user@mcp.example.com/mcp?units=si#key=x") == []
    found = in_url("https://u:p@h/mcp?key=AIzaSyA-abcdefghijklmnopqrstuvwxyz012345&sig=s")
    assert [f.what for f in found] == [
        "the password in the URL",
        "the query parameter key",
        "the query parameter sig",
    ]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("word", ["x" * 1_000_000, "1a+" * 300_000, "a://" * 100_000])
def test_a_long_word_is_read_once_not_once_per_letter(word: str) -> None:
    """An argument of a megabyte, as a hostile host file may hold, is judged in about as
    long as it takes to read, and a URL in it is still found where it begins."""
    assert in_args([word]) == []
    found = in_args([f"{word} https://u:p@h/mcp"])
    assert [f.what for f in found] == ["the password in the URL"]
