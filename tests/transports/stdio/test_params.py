from __future__ import annotations

from transports.stdio.params import StdioParams, child_environment


def test_child_environment_drops_systemd_variables() -> None:
    base = {
        "PATH": "/bin",
        "NOTIFY_SOCKET": "/run/x",
        "WATCHDOG_USEC": "1",
        "LISTEN_FDS": "1",
        "HOME": "/root",
    }
    env = child_environment(StdioParams(command="x", env={"TOKEN": "t"}), base)
    assert env == {"PATH": "/bin", "HOME": "/root", "TOKEN": "t"}
