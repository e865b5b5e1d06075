"""The servers' sandbox under the shipped mcpd.service, in a real systemd 252 (Debian
bookworm booted with systemd-nspawn, bubblewrap installed): the unit's hardening lets
bubblewrap make its namespaces, so a default-level and a strict server both run
sandboxed, nothing unprotected, each seeing only what its level shows, with its own
home, its limits in force and, for the strict one, no network."""

from __future__ import annotations

import pytest

from tests.systemd import harness
from tests.systemd.service_machine import PY, machine, run_check

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

STRICT = f"""
[servers.vault]
command = "{PY}"
args = ["-m", "mcpd.demo.notes"]
sandbox = "strict"
network = false
limits = {{ open_files = 256 }}
"""


def test_servers_run_sandboxed_under_the_shipped_unit(systemd_rootfs: harness.Rootfs) -> None:
    check = rf"""
    import json
    with open("/etc/mcpd/config.toml", "a") as f:
        f.write({STRICT!r})

    step("start, with a default-level and a strict stdio server")
    sh("systemctl", "start", "mcpd")
    status_becomes("3 servers: 3 ready")
    rows = {{s["alias"]: s for s in json.loads(mcpd("status", "--json").stdout)["servers"]}}
    for alias, level in (("notes", "default"), ("vault", "strict")):
        box = rows[alias]["sandbox"]
        assert box["level"] == level and box["unprotected"] is None, (alias, box)
    assert "unprotected" not in sh("journalctl", "-u", "mcpd", "--no-pager", "-o", "cat")
    main = show("MainPID")

    def view(pid, path):
        return sorted(os.listdir(f"/proc/{{pid}}/root{{path}}"))

    step("the default level: the machine, without mcpd's files")
    pid = rows["notes"]["pid"]
    assert sh("ps", "-o", "user=", "-p", str(pid)) == "mcpd"
    assert os.readlink(f"/proc/{{pid}}/ns/pid") != os.readlink(f"/proc/{{main}}/ns/pid")
    assert view(pid, "/var/lib/mcpd") == ["homes"], view(pid, "/var/lib/mcpd")
    assert view(pid, "/var/lib/mcpd/homes") == ["notes"]
    assert view(pid, "/etc/mcpd") == [] and view(pid, "/run/mcpd") == []
    assert "mcpd" in view(pid, "/etc")  # the directory is there, empty
    assert "os-release" in view(pid, "/etc")
    assert environ_of(pid)["HOME"] == "/var/lib/mcpd/homes/notes"
    assert os.readlink(f"/proc/{{pid}}/cwd") == "/var/lib/mcpd/homes/notes"
    limits = open(f"/proc/{{pid}}/limits").read()
    assert re.search(r"Max data size\s+4294967296\s+4294967296", limits), limits
    assert re.search(r"Max processes\s+1024\s+1024", limits), limits

    step("the strict level: the system, its home, nothing else, no network")
    spid = rows["vault"]["pid"]
    top = view(spid, "/")
    assert "root" not in top and "home" not in top and "srv" not in top, top
    assert {{"usr", "etc", "tmp", "opt", "proc", "dev"}} <= set(top), top
    assert view(spid, "/var/lib/mcpd/homes") == ["vault"]
    assert view(spid, "/var") == ["lib"]
    with open(f"/proc/{{spid}}/net/dev") as f:
        interfaces = [line.split(":")[0].strip() for line in f.readlines()[2:]]
    assert interfaces == ["lo"], interfaces
    assert re.search(r"Max open files\s+256\s+256", open(f"/proc/{{spid}}/limits").read())
    assert "T-1" in mcpd("call", "mcp__tickets__search", '{{"query": "login"}}').stdout
    found = mcpd("call", "mcp__vault__search", '{{"query": "mcpd"}}')
    assert found.returncode == 0, found
    """
    run_check(machine(systemd_rootfs), check.replace("import json", "import json, re"))
