"""The daemon and the commands find the same socket and the same config: a daemon
started the way docs/guide.md says is the one `mcpd status`, `mcpd token` and `mcpd
connect` then reach, with no --socket or --config repeated. Real `mcpd serve`
processes, and the commands as a user types them."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mcpd.config.loading.paths import client_socket_path, daemon_socket_path, systemd_socket
from mcpd.config.tables.model import default_socket_path
from tests.support.servers.counting_starts import counted_server, starts
from tests.support.system.procs import SCRIPTED

MCPD = [sys.executable, "-m", "mcpd"]
ROOT = Path(__file__).resolve().parents[4]
GUIDE = ROOT / "docs" / "guide.md"
DISCOVERY_VARS = ("MCPD_SOCKET", "MCPD_CONFIG", "RUNTIME_DIRECTORY", "LISTEN_FDS", "LISTEN_PID")


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="mcpd-dc-") as d:
        (Path(d) / "xdg").mkdir()
        yield Path(d)


def environ(tmp: Path, **extra: str) -> dict[str, str]:
    """The test run's environment with none of the variables that say where mcpd is,
    and a config home of its own, so only what a test sets can lead a command."""
    env = {k: v for k, v in os.environ.items() if k not in DISCOVERY_VARS}
    env["XDG_CONFIG_HOME"] = str(tmp / "xdg")
    # Some commands run elsewhere than here: they still import this tree's mcpd.
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return {**env, **extra}


def mcpd(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPD, *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd
    )


class Serve:
    """``mcpd serve ARGS`` until the test ends; ``socket`` is where it says it listens."""

    def __init__(self, *args: str, env: dict[str, str], cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [*MCPD, "serve", *args, "--log", "stderr"],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        assert self.proc.stderr is not None
        said = []
        for line in self.proc.stderr:
            found = re.search(r"listening on (\S+?);", line)
            if found:
                self.socket = found.group(1)
                return
            said.append(line)
        self.proc.wait()
        pytest.fail("mcpd serve exited before it was ready:\n" + "".join(said))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


@pytest.fixture
def served() -> Iterator[list[Serve]]:
    daemons: list[Serve] = []
    yield daemons
    for d in daemons:
        d.stop()


def serve(served: list[Serve], *args: str, env: dict[str, str], cwd: Path | None = None) -> Serve:
    daemon = Serve(*args, env=env, cwd=cwd)
    served.append(daemon)
    return daemon


def status(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return mcpd("status", "--json", env=env)


# -- the rule itself --


def test_the_daemons_order() -> None:
    env = {"MCPD_SOCKET": "/e.sock", "XDG_RUNTIME_DIR": "/run/user/1"}
    sd = "/run/mcpd/mcpd.sock"
    assert daemon_socket_path("/x.sock", "/c.sock", systemd=sd, env=env) == "/x.sock"
    assert daemon_socket_path(None, "/c.sock", systemd=sd, env=env) == "/e.sock"
    assert daemon_socket_path(None, "/c.sock", systemd=sd, env={}) == "/c.sock"
    assert daemon_socket_path(None, None, systemd=sd, env=env) == "/e.sock"
    assert daemon_socket_path(None, None, systemd=sd, env={}) == sd
    assert daemon_socket_path(None, None, systemd=None, env={}) == default_socket_path({})


def test_the_socket_systemd_gives_is_in_the_units_runtime_directory() -> None:
    assert systemd_socket({"RUNTIME_DIRECTORY": "/run/mcpd:/run/x"}) == "/run/mcpd/mcpd.sock"
    assert systemd_socket({}) is None
    # Sockets passed to another process are not this one's.
    assert systemd_socket({"LISTEN_PID": "1", "LISTEN_FDS": "1"}) is None


def test_the_clients_order(tmp: Path) -> None:
    config = tmp / "config.toml"
    config.write_text('[daemon]\nsocket = "${DIR}/c.sock"\n')
    env = {"MCPD_CONFIG": str(config), "DIR": "/d"}
    assert client_socket_path("/x.sock", {**env, "MCPD_SOCKET": "/e.sock"}) == "/x.sock"
    assert client_socket_path(None, {**env, "MCPD_SOCKET": "/e.sock"}) == "/e.sock"
    assert client_socket_path(None, env) == "/d/c.sock"
    # Not expandable here, not TOML, not there: the default, never an error.
    assert client_socket_path(None, {"MCPD_CONFIG": str(config)}) == default_socket_path({})
    config.write_text("[daemon\n")
    assert client_socket_path(None, env) == default_socket_path(env)
    assert client_socket_path(None, {"MCPD_CONFIG": str(tmp / "none")}) == default_socket_path({})


# -- mcpd serve --


def test_serve_listens_on_mcpd_socket_before_the_configs(tmp: Path, served: list[Serve]) -> None:
    config = tmp / "config.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp / "state"}"\n')
    env = environ(tmp, MCPD_SOCKET=str(tmp / "env.sock"))
    daemon = serve(served, "--config", str(config), env=env)
    assert daemon.socket == str(tmp / "env.sock")
    # ...where `mcpd status`, given the same environment, looks.
    found = status(env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["daemon"]["socket"] == str(tmp / "env.sock")

    # The variable comes before the config's socket, for the daemon as for the clients,
    # so the two never part ways; without it, the config's socket is the one.
    named = tmp / "named.toml"
    named.write_text(f'[daemon]\nsocket = "{tmp / "cfg.sock"}"\nstate_dir = "{tmp / "s2"}"\n')
    env2 = environ(tmp, MCPD_SOCKET=str(tmp / "env2.sock"))
    assert serve(served, "--config", str(named), env=env2).socket == str(tmp / "env2.sock")
    assert status(env2).returncode == 0
    # A restart would listen there again, so a reload has nothing to wait for.
    reloaded = mcpd("reload", env=env2)
    assert reloaded.returncode == 0 and "restart" not in reloaded.stdout, reloaded
    # Another daemon (of its own state directory, as one daemon keeps a directory's state).
    again = tmp / "again.toml"
    again.write_text(f'[daemon]\nsocket = "{tmp / "cfg.sock"}"\nstate_dir = "{tmp / "s3"}"\n')
    plain = environ(tmp)
    assert serve(served, "--config", str(again), env=plain).socket == str(tmp / "cfg.sock")


def test_a_second_daemon_on_mcpd_socket_starts_no_server_early(
    tmp: Path, served: list[Serve]
) -> None:
    # The early start checks the socket the daemon is about to take: the same path.
    counted = tmp / "a.starts"
    config = tmp / "config.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "{tmp / "state"}"\n[servers.a]\n{counted_server(counted)}'
    )
    env = environ(tmp, MCPD_SOCKET=str(tmp / "env.sock"))
    assert serve(served, "--config", str(config), env=env).socket == str(tmp / "env.sock")
    assert len(starts(counted)) == 1
    # Of a state directory of its own, or the first's lock would stop it before its socket.
    other = tmp / "other.toml"
    other.write_text(
        f'[daemon]\nstate_dir = "{tmp / "s2"}"\n[servers.a]\n{counted_server(counted)}'
    )
    second = mcpd("serve", "--config", str(other), "--log", "stderr", env=env)
    assert second.returncode == 78  # the same on every start: no use restarting
    assert "something already listens on" in second.stderr
    assert len(starts(counted)) == 1


# -- the client commands --


def test_status_finds_the_daemon_through_mcpd_configs_socket(
    tmp: Path, served: list[Serve]
) -> None:
    config = tmp / "config.toml"
    # The socket from a variable both sides have; a secret only the daemon has, which
    # the client does not need to find it.
    config.write_text(
        '[daemon]\nsocket = "${MCPD_TEST_DIR}/cfg.sock"\n'
        f'state_dir = "{tmp / "state"}"\n'
        f'[servers.api]\ncommand = {json.dumps(sys.executable)}\nargs = ["{SCRIPTED}"]\n'
        'env = { API_TOKEN = "${API_TOKEN}" }\nstart = "lazy"\n'
    )
    env = environ(tmp, MCPD_TEST_DIR=str(tmp))
    serve(served, "--config", str(config), env={**env, "API_TOKEN": "t"})
    found = status({**env, "MCPD_CONFIG": str(config)})
    assert found.returncode == 0, found.stderr
    report = json.loads(found.stdout)
    seen = report["daemon"]
    assert (seen["socket"], seen["config"]) == (str(tmp / "cfg.sock"), str(config))
    # Where the guide sends a reader for it, it is.
    named = re.search(r"\(the\s+`([\w.]+)` of `mcpd status --json`\)", GUIDE.read_text())
    assert named is not None
    for key in named[1].split("."):
        report = report[key]
    assert report == str(config)


def test_a_config_the_client_cannot_read_means_the_default_socket(tmp: Path) -> None:
    default = default_socket_path()
    if os.path.exists(default):
        pytest.skip(f"a daemon may be listening on {default}")
    broken = tmp / "config.toml"
    unreachable = f'mcpd: no mcpd is listening on "{default}" (No such file or directory)'
    for text, hint in (
        ("[daemon\nsocket = ", f"; $MCPD_CONFIG names {broken}, which could not be read as TOML"),
        ('[daemon]\nsocket = "${UNSET_HERE}/s.sock"\n', ""),
    ):
        broken.write_text(text)
        out = status(environ(tmp, MCPD_CONFIG=str(broken)))
        # Unreachable where a daemon would be by default: not a config error.
        assert out.returncode == 3, out.stderr
        assert out.stderr.strip().startswith(unreachable + hint), out.stderr


# -- mcpd token and mcpd connect --


def healthz(url: str, token: str) -> int:
    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
    try:
        conn.request("GET", "/healthz", headers={"Authorization": f"Bearer {token}"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_token_without_config_is_the_running_daemons(tmp: Path, served: list[Serve]) -> None:
    (tmp / "run").mkdir()
    (tmp / "run" / "mini.toml").write_text(
        f'[daemon]\nsocket = "{tmp / "mcpd.sock"}"\nstate_dir = "{tmp / "state"}"\n'
        'http_listen = "127.0.0.1:0"\n'
    )
    env = environ(tmp, MCPD_SOCKET=str(tmp / "mcpd.sock"))
    # Started with a relative --config, asked from elsewhere.
    serve(served, "--config", "mini.toml", env=env, cwd=tmp / "run")
    url = json.loads(status(env).stdout)["daemon"]["http"]
    got = mcpd("token", env=env, cwd=tmp)
    assert got.returncode == 0, got.stderr
    token = got.stdout.strip()
    assert healthz(url, token) == 200
    explicit = mcpd("token", "--config", "mini.toml", env=env, cwd=tmp / "run")
    assert explicit.stdout.strip() == token


def test_token_says_when_it_creates_the_file(tmp: Path) -> None:
    config = tmp / "config.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp / "state"}"\n')
    env = environ(tmp, MCPD_CONFIG=str(config))
    first = mcpd("token", env=env)
    where = tmp / "state" / "token"
    assert first.stderr == f"mcpd: there was no token yet; created {where}\n"
    assert first.stdout.strip() == where.read_text().strip()
    again = mcpd("token", env=env)
    assert (again.stdout, again.stderr) == (first.stdout, "")


def test_connect_without_config_uses_the_running_daemons(tmp: Path, served: list[Serve]) -> None:
    config = tmp / "mcpd.toml"
    config.write_text(f'[daemon]\nsocket = "{tmp / "mcpd.sock"}"\nstate_dir = "{tmp / "state"}"\n')
    env = environ(tmp, MCPD_SOCKET=str(tmp / "mcpd.sock"), HOME=str(tmp / "home"))
    serve(served, "--config", str(config), env=env)
    # A profile neither the config nor mcpd has: it would go into the daemon's config.
    out = mcpd("connect", "claude-code", "--profile", "team", env=env)
    assert out.returncode == 0, out.stderr
    assert f"\n# mcpd's config ({config}): the profile this entry uses\n" in out.stdout
    assert f'"--socket",\n        "{tmp / "mcpd.sock"}",' in out.stdout
