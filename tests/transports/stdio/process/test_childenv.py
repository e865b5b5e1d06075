"""What a stdio server's environment holds: the default set, what its ``inherit_env``
names (a name or a ``PREFIX_*`` pattern, or everything), what mcpd provides and its own
variables last; never what systemd or mcpd keep for themselves, and a variable the
config resolves for another server only when named exactly."""

from __future__ import annotations

import pytest

from transports.stdio.process.childenv import (
    environment,
    in_default_set,
    matches,
    never_inherited,
)

BASE = {
    "HOME": "/home/ann",
    "PATH": "/usr/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C",
    "HTTPS_PROXY": "http://proxy:3128",
    "GITHUB_TOKEN": "ghp",
    "GITHUB_HOST": "github.example.test",
    "AWS_KEY": "aws",
    "NOTIFY_SOCKET": "/run/systemd/notify",
    "LISTEN_FDS": "1",
    "CREDENTIALS_DIRECTORY": "/run/credentials/mcpd.service",
    "MCPD_CONFIG": "/etc/mcpd/config.toml",
    "OTHER_SERVERS_SECRET": "s3",
}


def test_by_default_a_server_gets_only_the_default_set() -> None:
    assert environment(False, None, BASE) == {
        "HOME": "/home/ann",
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "HTTPS_PROXY": "http://proxy:3128",
    }


def test_names_and_prefix_patterns_add_to_it() -> None:
    env = environment(["GITHUB_*", "AWS_KEY", "NOT_SET"], None, BASE)
    assert {"GITHUB_TOKEN", "GITHUB_HOST", "AWS_KEY"} <= env.keys()
    assert "NOT_SET" not in env and "OTHER_SERVERS_SECRET" not in env


def test_everything_is_inherited_but_what_mcpd_and_systemd_keep() -> None:
    env = environment(True, None, BASE)
    assert env.keys() == BASE.keys() - {
        "NOTIFY_SOCKET",
        "LISTEN_FDS",
        "CREDENTIALS_DIRECTORY",
        "MCPD_CONFIG",
    }


@pytest.mark.parametrize(
    "inherit", [True, ["NOTIFY_SOCKET", "LISTEN_*", "MCPD_*", "CREDENTIALS_DIRECTORY"]]
)
def test_what_systemd_hands_mcpd_alone_is_never_passed_on(inherit: bool | list[str]) -> None:
    env = environment(inherit, None, BASE)
    assert not {"NOTIFY_SOCKET", "LISTEN_FDS", "CREDENTIALS_DIRECTORY", "MCPD_CONFIG"} & env.keys()


def test_a_withheld_variable_reaches_a_server_only_by_its_exact_name() -> None:
    withheld = {"OTHER_SERVERS_SECRET", "GITHUB_TOKEN"}
    assert "OTHER_SERVERS_SECRET" not in environment(True, None, BASE, withheld=withheld)
    assert "GITHUB_TOKEN" not in environment(["GITHUB_*"], None, BASE, withheld=withheld)
    named = environment(["OTHER_SERVERS_SECRET"], None, BASE, withheld=withheld)
    assert named["OTHER_SERVERS_SECRET"] == "s3"


def test_a_withheld_name_of_the_default_set_is_still_given() -> None:
    env = environment(False, None, BASE, withheld={"HTTPS_PROXY"})
    assert env["HTTPS_PROXY"] == "http://proxy:3128"


def test_what_mcpd_provides_and_the_servers_own_come_last_in_that_order() -> None:
    env = environment(
        False,
        {"HOME": "/srv/own-home", "API_KEY": "own"},
        BASE,
        provided={"HOME": "/var/lib/mcpd/home", "XDG_CACHE_HOME": "/var/cache/x"},
    )
    assert env["HOME"] == "/srv/own-home"  # its own env wins
    assert env["XDG_CACHE_HOME"] == "/var/cache/x"
    assert env["API_KEY"] == "own"


def test_its_own_variables_may_set_even_what_is_never_inherited() -> None:
    env = environment(False, {"MCPD_MODE": "child"}, BASE)
    assert env["MCPD_MODE"] == "child"


@pytest.mark.parametrize(
    ("name", "pattern", "matched"),
    [
        ("GITHUB_TOKEN", "GITHUB_*", True),
        ("GITHUB_TOKEN", "GITHUB_TOKEN", True),
        ("GITHUB", "GITHUB_*", False),
        ("GITHUBX_TOKEN", "GITHUB_*", False),
        ("GITHUB_TOKEN", "GITHUB", False),
        ("ANY", "*", True),
    ],
)
def test_a_pattern_is_a_name_or_a_prefix(name: str, pattern: str, matched: bool) -> None:
    assert matches(name, pattern) is matched


def test_the_sets_named_in_the_docs() -> None:
    for name in ("HOME", "PATH", "LC_TIME", "no_proxy", "SSL_CERT_FILE", "UV_CACHE_DIR"):
        assert in_default_set(name), name
    for name in ("SHELLX", "LC", "AWS_KEY"):
        assert not in_default_set(name), name
    for name in ("MCPD_ANYTHING", "LISTEN_PID", "WATCHDOG_USEC", "STATE_DIRECTORY"):
        assert never_inherited(name), name
    assert not never_inherited("HOME")


def test_the_process_environment_is_the_default_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPD_TEST_CHILDENV", "x")
    monkeypatch.setenv("CHILDENV_PROBE", "y")
    env = environment(["CHILDENV_*", "MCPD_TEST_CHILDENV"], None)
    assert env["CHILDENV_PROBE"] == "y" and "MCPD_TEST_CHILDENV" not in env
