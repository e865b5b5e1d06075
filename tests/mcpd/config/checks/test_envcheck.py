"""Which of mcpd's environment variables a stdio server seems to rely on and would not
get: named for a shell in its command line, or named after the server (its alias,
program or arguments), and not already given it by the default set, its ``env`` or
its ``inherit_env``. ``check-config`` warns of each; ``mcpd import`` keeps them."""

from __future__ import annotations

from typing import Any

import pytest

from mcpd.config.checks.envcheck import gets, relied_on
from mcpd.config.tables.servertable import ServerConfig

GITHUB = ServerConfig(command="npx", args=["-y", "@modelcontextprotocol/server-github"])


def stdio(command: str = "npx", *args: str, **keys: Any) -> ServerConfig:
    return ServerConfig(command=command, args=list(args), **keys)


def test_a_variable_named_after_the_servers_package_is_relied_on() -> None:
    env = {"GITHUB_PERSONAL_ACCESS_TOKEN": "t", "SLACK_TOKEN": "s", "HOME": "/h"}
    assert relied_on("gh", GITHUB, env) == ["GITHUB_PERSONAL_ACCESS_TOKEN"]


def test_a_variable_named_after_the_alias_is_relied_on() -> None:
    env = {"NOTES_DIR": "/n", "OTHER_DIR": "/o"}
    assert relied_on("my-notes", stdio("node", "index.js"), env) == ["NOTES_DIR"]


def test_a_variable_named_after_the_program_is_relied_on_but_not_its_folder() -> None:
    cfg = stdio("/opt/acme/bin/slack-bridge")
    env = {"SLACK_TOKEN": "s", "BRIDGE_MODE": "m", "ACME_KEY": "a"}
    assert relied_on("x", cfg, env) == ["BRIDGE_MODE", "SLACK_TOKEN"]


@pytest.mark.parametrize("ref", ["$API_HOST", "${API_HOST}", "--host=${API_HOST}:443"])
def test_a_variable_a_shell_would_expand_in_the_command_line_is_relied_on(ref: str) -> None:
    cfg = stdio("sh", "-c", f"exec server {ref}")
    assert relied_on("x", cfg, {"API_HOST": "h", "API_PORT": "1"}) == ["API_HOST"]


def test_a_variable_a_shell_keeps_for_itself_is_never_relied_on() -> None:
    # "pwd" is a word of the command line, and $PWD a reference: the server's own shell
    # sets it anew, and mcpd's is of no use to it.
    cfg = stdio("/bin/sh", "-c", "pwd >&2; cd $OLDPWD; echo $SHLVL $_; sleep 1000")
    env = {"PWD": "/w", "OLDPWD": "/o", "SHLVL": "2", "_": "/usr/bin/mcpd", "SLEEP_MS": "5"}
    assert relied_on("relcwd", cfg, env) == ["SLEEP_MS"]


def test_a_shell_reference_in_the_command_itself_counts() -> None:
    assert relied_on("x", stdio("$TOOLS_BIN/run"), {"TOOLS_BIN": "/t"}) == ["TOOLS_BIN"]


@pytest.mark.parametrize(
    "name",
    [
        "MCP_DEBUG",  # words every server has say nothing of which server
        "SERVER_PORT",
        "NPX_FLAGS",
        "API_KEY",
        "GH_TOKEN",  # a first word under three letters matches too much
        "GITHUBX_TOKEN",
    ],
)
def test_a_variable_not_named_for_the_server_is_not_relied_on(name: str) -> None:
    cfg = stdio("npx", "-y", "@modelcontextprotocol/server-github", "--api-key", "x")
    assert relied_on("gh", cfg, {name: "v"}) == []


@pytest.mark.parametrize(
    "keys",
    [
        {"env": {"GITHUB_TOKEN": "own"}},
        {"inherit_env": ["GITHUB_TOKEN"]},
        {"inherit_env": ["GITHUB_*"]},
        {"inherit_env": True},
    ],
)
def test_a_variable_the_server_gets_is_not_reported(keys: dict[str, Any]) -> None:
    cfg = stdio("npx", "@modelcontextprotocol/server-github", **keys)
    assert relied_on("github", cfg, {"GITHUB_TOKEN": "t"}) == []
    assert gets("GITHUB_TOKEN", cfg)


def test_a_pattern_of_another_prefix_does_not_give_it() -> None:
    cfg = stdio("x", inherit_env=["GIT_*", "GITHUB"])
    assert not gets("GITHUB_TOKEN", cfg)
    assert relied_on("github", cfg, {"GITHUB_TOKEN": "t"}) == ["GITHUB_TOKEN"]


@pytest.mark.parametrize("name", ["HOME", "PATH", "LANG", "LC_ALL", "HTTPS_PROXY", "TZ"])
def test_the_default_set_is_always_given(name: str) -> None:
    cfg = stdio("sh", "-c", f"echo ${name}")
    assert gets(name, cfg)
    assert relied_on("x", cfg, {name: "v"}) == []


@pytest.mark.parametrize(
    "name", ["MCPD_SOCKET", "CREDENTIALS_DIRECTORY", "NOTIFY_SOCKET", "LISTEN_FDS"]
)
def test_what_mcpd_never_hands_on_is_not_reported_even_when_named(name: str) -> None:
    cfg = stdio("sh", "-c", f"echo ${name}", inherit_env=False)
    assert relied_on("x", cfg, {name: "v"}) == []


def test_an_http_server_relies_on_nothing() -> None:
    cfg = ServerConfig(url="https://github.example.test/mcp")
    assert relied_on("github", cfg, {"GITHUB_TOKEN": "t"}) == []


def test_what_is_relied_on_is_listed_by_name() -> None:
    cfg = stdio("node", "github.js", "$ZED_HOME", "$ALPHA")
    env = {"ZED_HOME": "z", "GITHUB_B": "b", "ALPHA": "a", "GITHUB_A": "a"}
    assert relied_on("x", cfg, env) == ["ALPHA", "GITHUB_A", "GITHUB_B", "ZED_HOME"]


def test_names_are_matched_whatever_their_case_in_the_command() -> None:
    cfg = stdio("npx", "@Acme/Weather-Tool")
    assert relied_on("x", cfg, {"WEATHER_KEY": "k", "weather_region": "r"}) == [
        "WEATHER_KEY",
        "weather_region",
    ]
