"""The servers' sandbox under the shipped mcpd.service, in a real systemd 252 (Debian
bookworm booted with systemd-nspawn, bubblewrap installed): the unit's hardening lets
bubblewrap make its namespaces, so a default-level and a strict server both run
sandboxed, nothing unprotected, each seeing only what its level shows, with its own
home and package caches, no user's home, its limits in force, no user namespaces of
its own, no keyrings and, for the strict one, no network; and bubblewrap's command line
shows none of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
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

    # A user's file anyone may read, with a token in it, as hosts write them.
    sh("useradd", "--create-home", "alice")
    write("/home/alice/.cursor/mcp.json", '{{"env": {{"GITHUB_TOKEN": "ghp_alice"}}}}')
    os.chmod("/home/alice/.cursor/mcp.json", 0o644)
    sh("chown", "-R", "alice:", "/home/alice/.cursor")

    step("start, with a default-level and a strict stdio server")
    sh("systemctl", "start", "mcpd")
    status_becomes("3 servers: 3 ready")
    rows = {{s["alias"]: s for s in json.loads(mcpd("status", "--json").stdout)["servers"]}}
    for alias, level in (("notes", "default"), ("vault", "strict")):
        box = rows[alias]["sandbox"]
        assert box["level"] == level and box["unprotected"] is None, (alias, box)
    journal = sh("journalctl", "-u", "mcpd", "--no-pager", "-o", "cat")
    assert "unprotected" not in journal
    # The unit lets mcpd scope the servers' Landlock domain (where the kernel can).
    assert "abstract Unix sockets" not in journal, journal
    main = show("MainPID")

    def view(pid, path):
        return sorted(os.listdir(f"/proc/{{pid}}/root{{path}}"))

    step("ps shows each server's command, not its sandbox's paths")
    shown = sh("runuser", "-u", "alice", "--", "ps", "-eo", "args").splitlines()
    wrapped = [line for line in shown if line.startswith("/usr/bin/bwrap ")]
    assert len(wrapped) == 4, shown  # bubblewrap, and its first process in the sandbox
    assert all(line.startswith("/usr/bin/bwrap --args ") for line in wrapped), wrapped
    assert any("-m mcpd.demo.notes" in line for line in wrapped), wrapped
    assert not [line for line in shown if "/var/lib/mcpd" in line], shown

    step("the default level: the machine, without mcpd's files")
    pid = rows["notes"]["pid"]
    assert sh("ps", "-o", "user=", "-p", str(pid)) == "mcpd"
    assert os.readlink(f"/proc/{{pid}}/ns/pid") != os.readlink(f"/proc/{{main}}/ns/pid")
    assert view(pid, "/var/lib/mcpd") == ["homes"], view(pid, "/var/lib/mcpd")
    assert view(pid, "/var/lib/mcpd/homes") == ["notes"]
    assert view(pid, "/etc/mcpd") == [] and view(pid, "/run/mcpd") == []
    assert "mcpd" in view(pid, "/etc")  # the directory is there, empty
    # No user's home, for mcpd or its servers (ProtectHome=yes).
    assert view(main, "/home") == [] and view(pid, "/home") == [], view(pid, "/home")
    assert view(main, "/root") == [] and view(pid, "/root") == []
    read = subprocess.run(["nsenter", f"--target={{main}}", "--mount", "setpriv",
                           "--reuid=mcpd", "--regid=mcpd", "--clear-groups", "cat",
                           "/home/alice/.cursor/mcp.json"], capture_output=True, text=True)
    assert read.returncode != 0 and "ghp_alice" not in read.stdout, read
    assert "os-release" in view(pid, "/etc")
    assert environ_of(pid)["HOME"] == "/var/lib/mcpd/homes/notes"
    assert os.readlink(f"/proc/{{pid}}/cwd") == "/var/lib/mcpd/homes/notes"

    step("each server's package caches in its own home, none shared")
    for alias, p in (("notes", pid), ("vault", rows["vault"]["pid"])):
        env = environ_of(p)
        home = f"/var/lib/mcpd/homes/{{alias}}"
        assert env["npm_config_cache"] == f"{{home}}/.npm", env
        assert env["UV_CACHE_DIR"] == f"{{home}}/.cache/uv", env
    assert not os.path.exists("/var/cache/mcpd")
    # Its home is writable in its sandbox, and the other server's is not there at all.
    with open(f"/proc/{{pid}}/mountinfo") as f:
        (home_mount,) = [l.split() for l in f if l.split()[4] == "/var/lib/mcpd/homes/notes"]
    assert home_mount[5].split(",")[0] == "rw", home_mount
    assert view(rows["vault"]["pid"], "/var/lib/mcpd/homes") == ["vault"]
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

    step("neither may make user namespaces of its own, nor use the kernel's keyrings")

    def filters(pid):
        status = open(f"/proc/{{pid}}/status").read()
        return int(re.search(r"Seccomp_filters:\s+(\d+)", status).group(1))

    for server in (pid, spid):
        # As the service's user, in the server's own user namespace.
        made = subprocess.run(
            ["setpriv", "--reuid=mcpd", "--regid=mcpd", "--clear-groups", "nsenter",
             f"--target={{server}}", "--user", "--preserve-credentials", "unshare", "--user",
             "true"], capture_output=True, text=True)
        assert made.returncode != 0 and "No space left on device" in made.stderr, made
        # One filter more than mcpd is under: the one that refuses the keyrings.
        assert filters(server) > filters(main), (filters(server), filters(main))
    """
    run_check(machine(systemd_rootfs), check.replace("import json", "import json, re"))


FILESYSTEM = """
[servers.files]
command = "/opt/node/node"
args = [
    "/opt/peers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    "/srv/notes",
]
sandbox = "strict"
read = ["/opt/node", "/opt/peers/node_modules"]
write = ["/srv/notes"]
"""


def test_the_filesystem_server_works_strictly_sandboxed_under_the_unit(
    systemd_rootfs: harness.Rootfs,
) -> None:
    """The npm filesystem server, strict, with one granted folder: it reads and writes
    there and is refused elsewhere, under the shipped unit (which lets mcpd write to
    the folder with ReadWritePaths=)."""
    node = shutil.which("node")
    peers = ROOT / "tests/peers/node_modules/@modelcontextprotocol/server-filesystem"
    if node is None or not peers.is_dir():
        pytest.skip("needs node and tests/peers/node_modules (the interop peers)")
    m = machine(systemd_rootfs, "[Service]\nReadWritePaths=/srv/notes\n")
    m.bind_ro(Path(node), "/opt/node/node")
    m.bind_ro(ROOT / "tests/peers/node_modules", "/opt/peers/node_modules")
    check = rf"""
    import json
    os.makedirs("/srv/notes")
    os.makedirs("/srv/private")
    write("/srv/notes/hello.txt", "hello from a file")
    write("/srv/private/secret.txt", "not for it")
    sh("chown", "-R", "mcpd:mcpd", "/srv/notes")
    write("/etc/mcpd/config.toml", open("/etc/mcpd/config.toml").read() + {FILESYSTEM!r})
    sh("systemctl", "start", "mcpd")
    status_becomes("3 servers: 3 ready")
    row = [s for s in json.loads(mcpd("status", "--json").stdout)["servers"]
           if s["alias"] == "files"][0]
    assert row["sandbox"]["level"] == "strict" and row["sandbox"]["unprotected"] is None, row

    step("reads and writes in its folder")
    out = mcpd("call", "mcp__files__read_text_file", '{{"path": "/srv/notes/hello.txt"}}')
    assert "hello from a file" in out.stdout, out
    mcpd("call", "mcp__files__write_file",
         '{{"path": "/srv/notes/new.txt", "content": "written"}}')
    assert open("/srv/notes/new.txt").read() == "written"

    step("refused elsewhere")
    out = mcpd("call", "mcp__files__read_text_file", '{{"path": "/srv/private/secret.txt"}}',
               check=False)
    assert out.returncode != 0 and "not for it" not in out.stdout, out
    assert "private" not in os.listdir(f"/proc/{{row['pid']}}/root/srv")
    """
    run_check(m, check)
