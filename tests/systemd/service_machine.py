"""Setting up a container for the real `mcpd serve` under systemd: a config with two demo
servers, `notes` (stdio, a child of mcpd) and `tickets` (Streamable HTTP, its own unit in
the container, so a check can take it down and bring it back), the helpers for check
scripts (container/mcpdcheck.py), and running a check with a full report on failure."""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path

from tests.conftest import ROOT
from tests.systemd import harness

HERE = Path(__file__).parent
PY = f"{harness.VENV}/bin/python"

TICKETS_UNIT = f"""\
[Unit]
Description=the tickets demo MCP server over Streamable HTTP

[Service]
ExecStart={PY} -m mcpd.demo.tickets --http 127.0.0.1:${{TICKETS_PORT}}
EnvironmentFile=/etc/tickets.env
"""

CONFIG = f"""\
[daemon]
allow_groups = ["mcpd-agents"]
backoff_base = 0.5
backoff_cap = 2.0

[servers.notes]
command = "{PY}"
args = ["-m", "mcpd.demo.notes"]

[servers.tickets]
url = "http://127.0.0.1:${{TICKETS_PORT}}/mcp"
"""

# The check scripts' common head: the helpers, the config readable by the service's
# group alone where mcpd is installed (as docs/operations.md has it, whose commands the
# other checks run themselves), and tickets up before mcpd starts.
PROLOGUE = f"""\
#!{PY}
import os, signal, subprocess, sys, time
sys.path.insert(0, "/opt/checks")
from mcpdcheck import *

PORT = int(os.environ["TICKETS_PORT"])
sh("systemd-sysusers")
if os.path.exists("/usr/lib/sysusers.d/mcpd.conf"):
    sh("chgrp", "mcpd", "/etc/mcpd/config.toml")
    os.chmod("/etc/mcpd/config.toml", 0o640)
sh("systemctl", "start", "tickets")
wait_port(PORT)
"""


def free_port() -> int:
    # The container shares the host's network: pick a port nothing on the host uses.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def machine(rootfs: harness.Rootfs, *dropins: str, installed: bool = True) -> harness.Machine:
    """A container with the demo servers and the config. ``installed``: mcpd is in
    /usr/local/bin with the shipped units, sysusers entry and ``dropins`` for mcpd.service
    in place; otherwise only this checkout is, at /src/mcpd, to be installed from."""
    port = free_port()
    m = harness.Machine(rootfs)
    m.install_mcpd(command=installed)
    if installed:
        m.add_unit(ROOT / "systemd/mcpd.service")
        m.add_unit(ROOT / "systemd/mcpd.socket")
        for i, text in enumerate(dropins):
            m.add_unit(f"mcpd.service.d/test-{i}.conf", text=text)
        m.add_file("/usr/lib/sysusers.d/mcpd.conf", ROOT / "systemd/mcpd.sysusers")
    else:
        m.add_checkout("/src/mcpd")
    m.add_unit("tickets.service", text=TICKETS_UNIT)
    m.add_file("/etc/tickets.env", text=f"TICKETS_PORT={port}\n")
    m.add_file("/etc/mcpd/config.toml", text=CONFIG.replace("${TICKETS_PORT}", str(port)))
    m.add_file("/opt/checks/mcpdcheck.py", HERE / "container" / "mcpdcheck.py")
    m.env["TICKETS_PORT"] = str(port)
    return m


def run_check(m: harness.Machine, check: str, timeout: float = 180) -> harness.RunResult:
    result = m.run(PROLOGUE + textwrap.dedent(check) + '\nprint("CHECK-OK")\n', timeout=timeout)
    assert result.rc == 0 and "CHECK-OK" in result.check_log, result.report(150)
    print(result.check_log)
    return result
