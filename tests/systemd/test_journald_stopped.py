"""journald stopped under a real systemd 252 (its sockets with it), with the shipped
units: the calls made then are answered and the daemon is the same process after; the
entries it could not write are counted in one that journald gets once it is back; and
an mcpd systemd starts while journald is down (its stderr /dev/null, no journal stream)
logs to journald once journald is back."""

from __future__ import annotations

import pytest

from tests.systemd import harness
from tests.systemd.service_machine import machine, run_check

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_journald_stopped_costs_entries_never_the_daemon(systemd_rootfs: harness.Rootfs) -> None:
    check = r"""
    JOURNALD = ["systemd-journald.socket", "systemd-journald-dev-log.socket",
                "systemd-journald.service"]
    SEARCH = ("call", "mcp__tickets__search", '{"query": "login"}')

    step("start")
    sh("systemctl", "start", "mcpd")
    pid = show("MainPID")
    assert "T-1" in mcpd(*SEARCH).stdout
    wait_for("the call's entry", lambda: journal("MCPD_EVENT=call"))

    step("journald stopped, its sockets with it")
    sh("systemctl", "stop", *JOURNALD)
    for _ in range(2):
        assert "T-1" in mcpd(*SEARCH).stdout
    # The audit writer's batch goes within a fraction of a second; a daemon it stopped
    # would be restarted a second after (RestartSec).
    time.sleep(2)
    assert (active("mcpd"), show("MainPID"), show("NRestarts")) == ("active", pid, "0")

    step("journald back")
    sh("systemctl", "start", *JOURNALD)
    assert "T-1" in mcpd(*SEARCH).stdout
    (lost,) = wait_for("the count of entries lost", lambda: journal("MCPD_EVENT=dropped"))
    assert lost["_PID"] == pid, lost
    assert "neither journald nor stderr could take them" in lost["MESSAGE"], lost
    assert "2 call records, which the audit file keeps" in lost["MESSAGE"], lost
    print("journal:", lost["MESSAGE"])

    step("mcpd started while journald is down")
    sh("systemctl", "stop", *JOURNALD)
    sh("systemctl", "restart", "mcpd")
    again = show("MainPID")
    assert os.readlink(f"/proc/{again}/fd/2") == "/dev/null"
    sh("systemctl", "start", *JOURNALD)
    sh("systemctl", "stop", "tickets")
    mcpd(*SEARCH, check=False)
    outage = wait_for("an outage entry of the new daemon",
                      lambda: journal(f"_PID={again}", "MCPD_EVENT=outage"))
    assert outage[0]["MCPD_SERVER"] == "tickets", outage
    """
    run_check(machine(systemd_rootfs), check)
