"""docs/operations.md "Run as a service", word for word: its install commands, for the
machine and for one user, run in a container booted with a real systemd, from a copy of
this checkout (pip installs offline from the rootfs's wheelhouse), and its journalctl
lines are run against a real outage."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tests.systemd import harness
from tests.systemd.service_machine import machine, run_check

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

OFFLINE = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": harness.WHEELHOUSE}


def readme_blocks() -> list[str]:
    """The bash blocks of "Run as a service" in docs/operations.md: system install,
    journalctl examples, user install."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("\n## Run as a service\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) == 3, blocks
    return blocks


def test_readme_blocks_are_what_the_tests_run() -> None:
    system, journal, user = readme_blocks()
    assert "systemctl daemon-reload && systemctl enable --now mcpd.socket mcpd.service" in system
    assert len(system.strip().splitlines()) == 4
    assert "journalctl -u mcpd MCPD_EVENT=outage" in journal
    assert "journalctl -u mcpd MCPD_SERVER=tickets -f" in journal
    assert "systemctl --user" in user


def _with_blocks(m: harness.Machine) -> harness.Machine:
    for name, block in zip(("system", "journal", "user"), readme_blocks(), strict=True):
        m.add_file(f"/opt/checks/readme-{name}.sh", text=block)
    m.env.update(OFFLINE)
    return m


def test_readme_system_install_and_journal_queries(systemd_rootfs: harness.Rootfs) -> None:
    check = r"""
    step("the documented four commands, as root in the checkout")
    run = subprocess.run(["bash", "-ex", "/opt/checks/readme-system.sh"], cwd="/src/mcpd",
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    for unit in ("mcpd.socket", "mcpd.service"):
        assert sh("systemctl", "is-enabled", unit) == "enabled", unit
        assert active(unit) == "active", unit
    assert os.path.realpath(MCPD) == "/opt/mcpd/bin/mcpd"
    assert len(tool_names()) == 6
    assert show("StatusText") == "2 servers: 2 ready"

    step("an outage, then the documented journalctl lines")
    sh("systemctl", "stop", "tickets")
    assert mcpd("call", "mcp__tickets__search", '{"query": "x"}', check=False).returncode == 1
    line = "2 servers: 1 ready, 1 unreachable (mcpd status and the journal say which)"
    status_becomes(line)
    status = sh("systemctl", "status", "mcpd", "--no-pager", check=False)
    assert f'Status: "{line}"' in status, status
    for line in open("/opt/checks/readme-journal.sh").read().splitlines():
        command = line.split("  #")[0].strip()
        # -f follows for ever: give it 3 s to print what is there.
        out = subprocess.run(["timeout", "3", "bash", "-c", command],
                             capture_output=True, text=True)
        assert out.returncode == (124 if " -f" in command else 0), (command, out)
        assert "tickets: unavailable: " in out.stdout, (command, out.stdout)
        if "-o verbose" in command:
            assert "MCPD_SERVER=tickets" in out.stdout and "MCPD_REASON=" in out.stdout
        print("ran:", command)
    """
    run_check(_with_blocks(machine(systemd_rootfs, installed=False)), check, timeout=300)


def test_readme_user_install(systemd_rootfs: harness.Rootfs) -> None:
    check = r"""
    step("a user with a running user manager")
    sh("useradd", "--create-home", "alice")
    sh("loginctl", "enable-linger", "alice")
    wait_for("alice's systemd", lambda: os.path.exists("/run/user/1000/systemd/private"))
    sh("cp", "-r", "/src/mcpd", "/home/alice/mcpd")
    config = open("/etc/mcpd/config.toml").read().replace('allow_groups = ["mcpd-agents"]\n', "")
    write("/home/alice/.config/mcpd/config.toml", config)
    sh("chown", "-R", "alice:alice", "/home/alice")
    env = ["env", "HOME=/home/alice", "XDG_RUNTIME_DIR=/run/user/1000",
           "PIP_NO_INDEX=1", f"PIP_FIND_LINKS={os.environ['PIP_FIND_LINKS']}"]

    def alice(*cmd, check=True):
        proc = subprocess.run(["runuser", "-u", "alice", "--", *env, *cmd],
                              cwd="/home/alice/mcpd", capture_output=True, text=True)
        assert not check or proc.returncode == 0, (cmd, proc.stdout + proc.stderr)
        return proc.stdout.strip()

    step("the documented user commands, as alice in her checkout")
    alice("bash", "-ex", "/opt/checks/readme-user.sh")
    assert alice("systemctl", "--user", "is-active", "mcpd.socket", "mcpd") == "active\nactive"
    assert "6 tools" in alice("/home/alice/.local/bin/mcpd", "tools")
    assert alice("systemctl", "--user", "show", "-p", "StatusText", "--value", "mcpd") == \
        "2 servers: 2 ready"
    pid = alice("systemctl", "--user", "show", "-p", "MainPID", "--value", "mcpd")
    assert sh("ps", "-o", "user=", "-p", pid) == "alice"

    step("the user unit's system call filter and limits, on mcpd and its server")
    shown = alice("systemctl", "--user", "show", "mcpd", "-p",
                  "SystemCallErrorNumber,LimitCORE,TasksMax,MemoryMax,OOMPolicy")
    assert sorted(shown.splitlines()) == ["LimitCORE=0", f"MemoryMax={8 << 30}",
        "OOMPolicy=continue", "SystemCallErrorNumber=1", "TasksMax=4096"], shown
    for p in [pid, *map(str, server_pids(pid))]:
        status = open(f"/proc/{p}/status").read()
        assert "\nSeccomp:\t2\n" in status and "\nNoNewPrivs:\t1\n" in status, p

    step("an outage in alice's journal")
    sh("systemctl", "stop", "tickets")
    alice("/home/alice/.local/bin/mcpd", "call", "mcp__tickets__search", "{}", check=False)
    wait_for("the outage in the user journal", lambda: "tickets: unavailable: " in alice(
        "journalctl", "--user", "-u", "mcpd", "MCPD_EVENT=outage", "--no-pager"))
    """
    run_check(_with_blocks(machine(systemd_rootfs, installed=False)), check, timeout=300)
