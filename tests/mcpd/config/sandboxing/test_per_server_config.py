"""The sandbox's keys in the config, what every sandbox hides, what check-config says of
each server's sandbox and environment, and what ``mcpd import`` writes so that an
imported server keeps the variables it relied on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mcpd.cli.check_sandbox import unscoped_warnings
from mcpd.config.loading.load import load, parse_config
from mcpd.config.sandboxing.per_server import (
    bus_paths,
    child_env,
    hidden_paths,
    limits_of,
    sandbox_of,
)
from mcpd.config.tables.model import ConfigError
from transports.stdio.sandbox import host
from transports.stdio.sandbox.machine import Machine

MCPD = [sys.executable, "-m", "mcpd"]


def stdio(**keys: Any) -> dict[str, Any]:
    return {"command": "/bin/true", **keys}


@pytest.mark.parametrize(
    ("server", "path", "message"),
    [
        (stdio(read=["relative/dir"]), "servers.s.read[0]", "absolute path"),
        (stdio(write=["/"]), "servers.s.write[0]", "everything the sandbox hides"),
        (stdio(read=["//"]), "servers.s.read[0]", "everything the sandbox hides"),
        (stdio(write=["/srv/../"]), "servers.s.write[0]", "everything the sandbox hides"),
        (stdio(sandbox="loose"), "servers.s.sandbox", "Invalid enum value"),
        (stdio(limits={"memory": "lots"}), "servers.s.limits.memory", "not a size"),
        (stdio(limits={"memory": "1M"}), "servers.s.limits.memory", "at least 16M"),
        (stdio(limits={"processes": -1}), "servers.s.limits.processes", "0 (no limit)"),
        (stdio(limits={"swap": 1}), "servers.s.limits.swap", "unknown key"),
        (stdio(inherit_env=["AWS_*", "BAD-NAME"]), "servers.s.inherit_env[1]", "pattern"),
        ({"url": "http://127.0.0.1:1/mcp", "network": False}, "servers.s.network", "stdio"),
        ({"url": "http://127.0.0.1:1/mcp", "read": ["/srv"]}, "servers.s.read", "stdio"),
    ],
)
def test_a_bad_sandbox_key_is_named(server: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"servers": {"s": server}})
    assert info.value.path == path
    assert message in info.value.message


def test_keys_set_by_mcpd_are_not_config_keys() -> None:
    for key in ("variables", "secret_files"):
        with pytest.raises(ConfigError, match="unknown key"):
            parse_config({key: {}})


def test_an_unknown_server_in_allow_servers_is_named() -> None:
    data = {"servers": {"s": stdio()}, "profiles": {"p": {"allow_servers": ["nope"]}}}
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.path == "profiles.p.allow_servers[0]"


def test_limits_come_from_the_server_then_the_daemon_then_the_default() -> None:
    config = parse_config(
        {
            "daemon": {"limits": {"cpu": 600, "processes": 0}},
            "servers": {"s": stdio(limits={"memory": "512M"}), "t": stdio()},
        }
    )
    s = limits_of("s", config.servers["s"], config)
    assert (s.memory, s.processes, s.open_files, s.cpu) == (512 << 20, None, None, 600)
    assert s.key("memory") == "servers.s.limits.memory"
    assert s.key("cpu") == "daemon.limits.cpu"
    t = limits_of("t", config.servers["t"], config)
    assert t.memory == 4 << 30  # the default, which no table set


def test_what_every_sandbox_hides(tmp_path: Path) -> None:
    config_dir = tmp_path / "mcpd"
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "SSH_AUTH_SOCK": str(tmp_path / "agent.sock"),
        "REGISTRY_AUTH_FILE": str(tmp_path / "registries.json"),
        "DOCKER_CONFIG": str(tmp_path / "docker"),
    }
    data = {
        "daemon": {"state_dir": str(tmp_path / "state"), "socket": str(tmp_path / "run/mcpd/s")},
        "servers": {"s": stdio(env={"KEY": f"${{file:{tmp_path}/key}}"})},
    }
    (tmp_path / "key").write_text("k")
    config = parse_config(data, env=env, source=str(config_dir / "config.toml"))
    paths = set(hidden_paths(config, env))
    for path in (
        tmp_path / "state",  # tokens, OAuth store, lists, the servers' homes
        config_dir,  # mcpd's own config directory, config and secrets in it
        tmp_path / "key",  # a secret file the config reads
        tmp_path / "run" / "mcpd",  # mcpd's socket directory
        tmp_path / "home" / ".ssh",
        tmp_path / "home" / ".aws",
        tmp_path / "home" / ".netrc",
        tmp_path / "home" / ".docker" / "config.json",
        tmp_path / "run" / "keyring",
        tmp_path / "run" / "systemd",  # the user's service manager runs commands
        tmp_path / "run" / "docker.sock",  # so do container engines, rootless ones too
        tmp_path / "run" / "podman",
        Path("/run/docker.sock"),  # as root, for a member of the docker group
        Path("/var/snap/lxd/common/lxd/unix.socket"),
        tmp_path / "run" / "at-spi",  # the accessibility bus reads and drives windows
        Path("/tmp/.X11-unix"),  # the display takes keystrokes
        Path(f"/tmp/tmux-{os.getuid()}"),  # so does a terminal multiplexer
        Path("/tmp/ssh-*"),  # the key agents started in a shell, or forwarded by a login
        tmp_path / "run" / "nvim.*",  # an editor runs what its socket asks
        tmp_path / "run" / "vscode-ipc-*.sock",
        Path(f"/tmp/emacs{os.getuid()}"),
        tmp_path / "run" / "mcpd-pages",  # the page mcpd dashboard opens has a code
        Path(f"/tmp/mcpd-pages-{os.geteuid()}"),  # where there is no runtime directory
        tmp_path / "home" / ".1password",
        tmp_path / "agent.sock",
        tmp_path / "home" / ".config" / "containers" / "auth.json",  # registry logins
        tmp_path / "run" / "containers" / "auth.json",  # where podman login keeps them
        tmp_path / "registries.json",
        tmp_path / "docker" / "config.json",
        tmp_path / "home" / ".pgpass",
        tmp_path / "home" / ".config" / "rclone" / "rclone.conf",
    ):
        assert str(path) in paths, path
    sandbox = sandbox_of("s", config.servers["s"], config, env)
    assert sandbox.home == str(tmp_path / "state" / "homes" / "s")


def test_the_sessions_sockets_are_hidden_where_the_login_made_them_and_where_named(
    tmp_path: Path,
) -> None:
    """mcpd told of another runtime directory (a service's, a wrapper's) still hides the
    user's session in /run/user/UID, and the session bus its environment names."""
    bus = tmp_path / "dbus bus"
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "DBUS_SESSION_BUS_ADDRESS": f"unix:abstract=/tmp/x;unix:path={tmp_path}/dbus%20bus,guid=1f",
    }
    data = {"daemon": {"state_dir": str(tmp_path / "state")}, "servers": {"s": stdio()}}
    paths = set(hidden_paths(parse_config(data, env=env), env))
    session = Path(f"/run/user/{os.getuid()}")
    for runtime in (session, tmp_path / "run"):
        for name in ("bus", "systemd", "gnupg", "p11-kit"):
            assert str(runtime / name) in paths, runtime / name
    assert str(bus) in paths
    assert "/tmp/dbus-*" in paths  # a bus dbus-launch started, named or not
    assert bus_paths("tcp:host=localhost,port=1;unix:abstract=/tmp/dbus-x") == []


def test_under_the_service_each_server_keeps_its_package_caches_in_its_own_home(
    tmp_path: Path,
) -> None:
    """The service's user has its home in the state directory, which servers do not
    see: each server's npm and uv caches are then in its own home, not in one that
    another server could plant a package in for this one's ``npx`` to run."""
    state = tmp_path / "state"
    env = {"HOME": str(state), "STATE_DIRECTORY": str(state), "CACHE_DIRECTORY": "/var/cache/m"}
    config = parse_config({"servers": {"a": stdio(), "b": stdio()}}, env=env)
    seen = {}
    for alias in ("a", "b"):
        sandbox = sandbox_of(alias, config.servers[alias], config, env)
        seen[alias] = child_env(alias, config.servers[alias], config, sandbox, env)
    for alias, child in seen.items():
        home = state / "homes" / alias
        assert child["HOME"] == str(home)
        assert child["npm_config_cache"] == str(home / ".npm")
        assert child["UV_CACHE_DIR"] == str(home / ".cache" / "uv")


def test_a_users_servers_share_the_users_package_caches(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state")}
    config = parse_config({"servers": {"a": stdio()}}, env=env)
    child = child_env(
        "a", config.servers["a"], config, sandbox_of("a", config.servers["a"], config, env), env
    )
    assert child["npm_config_cache"] == str(home / ".npm")
    assert child["UV_CACHE_DIR"] == str(home / ".cache" / "uv")


def test_what_every_sandbox_hides_is_found_where_a_relative_name_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A config, a credentials directory and credential stores named relatively to
    # the working directory mcpd runs in.
    (tmp_path / "mcpd").mkdir()
    (tmp_path / "mcpd" / "config.toml").write_text(
        f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
        '[servers.s]\ncommand = "/bin/true"\nenv = { KEY = "${file:key}" }\n'
    )
    (tmp_path / "creds").mkdir()
    (tmp_path / "creds" / "key").write_text("k")
    (tmp_path / "creds" / "key").chmod(0o600)
    env = {"HOME": str(tmp_path / "home"), "CREDENTIALS_DIRECTORY": "creds"}
    env |= {"KUBECONFIG": "kube/config:/etc/kube/config", "GNUPGHOME": "gnupg"}
    monkeypatch.chdir(tmp_path)
    paths = hidden_paths(load("mcpd/config.toml", env), env)
    assert all(os.path.isabs(p) for p in paths), [p for p in paths if not os.path.isabs(p)]
    for path in (
        tmp_path / "mcpd",  # mcpd's own config directory, named relatively
        tmp_path / "mcpd" / "config.toml",
        tmp_path / "creds",
        tmp_path / "creds" / "key",
        tmp_path / "kube" / "config",
        Path("/etc/kube/config"),
        tmp_path / "gnupg",
    ):
        assert str(path) in paths, path


def test_check_config_shows_the_sandbox_and_environment_names_never_values(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
        '[servers.github]\ncommand = "/bin/true"\nargs = ["@modelcontextprotocol/server-github"]\n'
        'env = { OWN_SECRET = "s3cr3t-value" }\n'
        '[servers.files]\ncommand = "/bin/true"\nsandbox = "strict"\n'
        f'read = ["{tmp_path}"]\nnetwork = false\nlimits = {{ cpu = 60 }}\n'
        '[servers.weather]\ncommand = "/bin/true"\ninherit_env = ["WEATHER_*"]\n'
    )
    env = {
        **os.environ,
        "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp-value",
        "WEATHER_API_KEY": "weather-value",
        "UNRELATED_TOKEN": "other-value",
    }
    checked = subprocess.run(
        [*MCPD, "check-config", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert checked.returncode == 0, checked.stderr
    out = checked.stdout
    assert "sandbox default; network; limits: memory 4 GiB, processes 1024" in out
    assert f"sandbox strict; read {tmp_path}; no network; limits:" in out
    assert "cpu 60 s" in out
    assert "env: the default set + OWN_SECRET\n" in out
    assert "env: the default set + WEATHER_API_KEY\n" in out
    for value in ("s3cr3t-value", "ghp-value", "weather-value", "other-value"):
        assert value not in out + checked.stderr
    # The github server's variable, named for it, is no longer inherited: said by name.
    warning = (
        "warning: servers.github: GITHUB_PERSONAL_ACCESS_TOKEN is set here but the server "
        'no longer inherits it; if it needs it, add "GITHUB_PERSONAL_ACCESS_TOKEN" to '
        "servers.github.inherit_env"
    )
    assert warning in checked.stderr
    assert "WEATHER_API_KEY is set here" not in checked.stderr  # inherited by its pattern
    assert "UNRELATED_TOKEN" not in checked.stderr


def test_import_names_what_a_server_relied_on_in_its_inherit_env(tmp_path: Path) -> None:
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "weather": {"command": "npx", "args": ["-y", "weather-mcp"]},
                    "github": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-github"],
                        "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_abc123def456ghi789jkl0"},
                    },
                }
            }
        )
    )
    env = {**os.environ, "WEATHER_API_KEY": "w", "GITHUB_PERSONAL_ACCESS_TOKEN": "g"}
    made = subprocess.run(
        [*MCPD, "import", str(source)], capture_output=True, text=True, timeout=60, env=env
    )
    assert made.returncode == 0, made.stderr
    servers = tomllib.loads(made.stdout)["servers"]
    assert servers["weather"]["inherit_env"] == ["WEATHER_API_KEY"]
    assert "inherit_env" not in servers["github"]  # its own env has it
    assert "inherits WEATHER_API_KEY from mcpd's environment" in made.stdout


def _machine(scoping: str | None) -> Machine:
    return Machine(bwrap="/usr/bin/bwrap", namespaces=None, network=None, scoping=scoping)


def test_check_config_warns_once_where_the_kernel_leaves_abstract_sockets_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = parse_config(
        {
            "daemon": {"state_dir": str(tmp_path / "state")},
            "servers": {
                "files": stdio(),
                "strict": stdio(sandbox="strict", read=[str(tmp_path)]),
                "offline": stdio(network=False),
                "open": stdio(sandbox="off"),
                "http": {"url": "http://127.0.0.1:1/mcp"},
            },
        }
    )
    why = "the kernel's Landlock is ABI 4; scoping needs ABI 6 (Linux 6.12)"
    monkeypatch.setattr(host, "_machine", [_machine(why)])
    (warning,) = unscoped_warnings(config, {})
    # Only the sandboxed servers that share the host's network are named.
    assert warning.startswith("files, strict: sandboxed, but can still connect to the host's ")
    assert warning.endswith(f"abstract address): {why}")
    monkeypatch.setattr(host, "_machine", [_machine(None)])
    assert unscoped_warnings(config, {}) == []


def test_a_config_file_linked_out_of_mcpds_directory_is_a_secret_of_its_own(
    tmp_path: Path,
) -> None:
    # Dotfiles kept in one place: ~/.config/mcpd/mcpd.toml a link to ~/dotfiles/mcpd.toml.
    (tmp_path / "dot").mkdir()
    (tmp_path / "mcpd").mkdir()
    real, linked = tmp_path / "dot" / "mcpd.toml", tmp_path / "mcpd" / "mcpd.toml"
    real.write_text("")
    linked.symlink_to(real)
    data = {"daemon": {"state_dir": str(tmp_path / "state")}, "servers": {"s": stdio()}}
    env = {"HOME": str(tmp_path / "home")}
    for source, secret in ((linked, True), (real, True), (tmp_path / "mcpd" / "c.toml", False)):
        config = parse_config(data, env=env, source=str(source))
        sandbox = sandbox_of("s", config.servers["s"], config, env)
        assert (str(source) in sandbox.secrets) is secret, (source, sandbox.secrets)


def test_paths_a_servers_environment_names_are_places_it_sees(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "data.txt").write_text("d")
    (tmp_path / "lib").mkdir()
    server_env = {
        "DATA": str(tmp_path / "proj" / "data.txt"),
        "PYTHONPATH": f"{tmp_path / 'lib'}:/nowhere-at-all",
        "TOKEN": "/not-a-path-but-a-secret-value",
    }
    data = {
        "daemon": {"state_dir": str(tmp_path / "state")},
        "servers": {"s": stdio(env=server_env)},
    }
    env = {"HOME": str(tmp_path / "home")}
    config = parse_config(data, env=env, source=str(tmp_path / "mcpd" / "c.toml"))
    sees = sandbox_of("s", config.servers["s"], config, env).sees
    named = {s.path: s.what for s in sees if ".env." in s.what}
    assert named == {
        str(tmp_path / "proj" / "data.txt"): "a path servers.s.env.DATA names",
        str(tmp_path / "lib"): "a path servers.s.env.PYTHONPATH names",
    }
