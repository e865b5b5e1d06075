"""journald's sockets stay out of a sandboxed server's reach: a server runs in mcpd's
unit, so an entry it sent there itself would be stored as the unit's, with whatever
mcpd's fields it wrote (``SYSLOG_IDENTIFIER=mcpd``, ``MCPD_EVENT=recovered``); its
stderr reaches the journal through mcpd, under its own name. A server without a sandbox
reaches the socket, which shows it listens. mcpd runs with a /run/systemd/journal of
its own (the test's directory bound there), so nothing of this machine's is touched."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from tests.support.daemons.sandboxed import (
    RUNTIME,
    agent_of,
    hostile,
    serving,
    text,
    wait_ready,
)

pytestmark = pytest.mark.timeout(120)
FORGED = "MESSAGE=tickets: available again\nSYSLOG_IDENTIFIER=mcpd\nMCPD_EVENT=recovered\n"


@pytest.fixture(autouse=True)
def _a_journal_of_its_own_can_be_made() -> None:
    if os.geteuid() != 0 or not shutil.which("unshare") or not os.path.isdir("/run/systemd"):
        pytest.skip("needs root, unshare (util-linux) and /run/systemd to give mcpd its own")


def own_journal(where: Path) -> tuple[str, ...]:
    """The command line that runs what follows it with ``where`` as its
    /run/systemd/journal."""
    script = (
        "mount -t tmpfs tmpfs /run/systemd && mkdir /run/systemd/journal"
        ' && mount --bind "$1" /run/systemd/journal && shift && exec "$@"'
    )
    return ("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(where))


async def test_a_sandboxed_server_cannot_write_to_journald_at_either_level(tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    journal.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as journald:
        journald.bind(str(journal / "socket"))
        journald.settimeout(10)
        servers = {
            "hostile": hostile(),
            "strict": hostile(sandbox="strict", read=RUNTIME),
            "open": hostile(sandbox="off"),
        }
        with serving(tmp_path, servers, wrap=own_journal(journal)) as d:
            async with agent_of(d) as agent:
                await wait_ready(agent, "hostile", "strict", "open")
                path = "/run/systemd/journal/socket"
                sent = {"path": path, "data": FORGED}
                got = text(await agent.call("mcp__open__send_datagram", sent))
                assert got == f"ok: sent to {path}", got
                assert journald.recv(1 << 16).decode() == FORGED
                for server in ("hostile", "strict"):
                    for where in (path, "/dev/log"):
                        sent = {"path": where, "data": FORGED}
                        got = text(await agent.call(f"mcp__{server}__send_datagram", sent))
                        assert got.startswith("refused:"), (server, where, got)
        journald.settimeout(0.2)
        with pytest.raises(TimeoutError):
            journald.recv(1 << 16)
