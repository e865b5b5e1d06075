"""The ``host_loopback`` key: what the config accepts, the errors that name it, and how
``check-config`` shows the grant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpd.config.loading.load import parse_config
from mcpd.config.sandboxing.per_server import sandbox_of
from mcpd.config.tables.model import ConfigError


def stdio(**keys: Any) -> dict[str, Any]:
    return {"command": "/bin/true", **keys}


@pytest.mark.parametrize(
    ("server", "path", "message"),
    [
        (stdio(host_loopback=[5432]), "servers.s.host_loopback", "needs network = false"),
        (
            stdio(network=False, host_loopback=[0]),
            "servers.s.host_loopback[0]",
            "from 1 to 65535",
        ),
        (
            stdio(network=False, host_loopback=[5432, 70000]),
            "servers.s.host_loopback[1]",
            "from 1 to 65535",
        ),
        (
            stdio(network=False, host_loopback=["10.0.0.1:5432"]),
            "servers.s.host_loopback[0]",
            "not a host loopback port",
        ),
        (
            stdio(network=False, host_loopback=["127.0.0.1:db"]),
            "servers.s.host_loopback[0]",
            "from 1 to 65535",
        ),
        (
            stdio(network=False, host_loopback=["127.0.0.1:٥٤٣٢"]),
            "servers.s.host_loopback[0]",
            "from 1 to 65535",
        ),
        (
            stdio(network=False, host_loopback=["localhost"]),
            "servers.s.host_loopback[0]",
            "not a host loopback port",
        ),
        (
            stdio(network=False, host_loopback=[5432, "127.0.0.1:5432"]),
            "servers.s.host_loopback[1]",
            "granted twice",
        ),
        (
            {"url": "http://127.0.0.1:1/mcp", "host_loopback": [5432]},
            "servers.s.host_loopback",
            "stdio",
        ),
    ],
)
def test_a_bad_grant_is_named(server: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"servers": {"s": server}})
    assert info.value.path == path
    assert message in info.value.message


def test_a_grant_of_mcpds_own_endpoint_port_is_refused() -> None:
    servers = {"s": stdio(network=False, host_loopback=[5432, "127.0.0.1:18731"])}
    with pytest.raises(ConfigError) as info:
        parse_config({"daemon": {"http_listen": "127.0.0.1:18731"}, "servers": servers})
    assert info.value.path == "servers.s.host_loopback[1]"
    assert "port 18731 is mcpd's own HTTP endpoint" in info.value.message
    assert "s would reach it as mcpd" in info.value.message
    # Another port, or no endpoint, is granted as before.
    parse_config({"daemon": {"http_listen": "127.0.0.1:18732"}, "servers": servers})
    parse_config({"servers": servers})


def test_a_grant_is_a_port_or_a_host_loopback_address() -> None:
    config = parse_config(
        {"servers": {"s": stdio(network=False, host_loopback=[5432, "127.0.0.1:80"])}}
    )
    assert sandbox_of("s", config.servers["s"], config).loopback == (5432, 80)


def test_check_config_shows_the_grant(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
        '[servers.db]\ncommand = "/bin/true"\nnetwork = false\n'
        'host_loopback = [5432, "127.0.0.1:8080"]\n'
    )
    checked = subprocess.run(
        [sys.executable, "-m", "mcpd", "check-config", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    assert "no network but host loopback ports 5432, 8080;" in checked.stdout
