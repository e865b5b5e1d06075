"""The real `mcpd serve` under a real systemd 252 (Debian bookworm booted with
systemd-nspawn), installed with the shipped units, mcpd.sysusers and a config with two
demo servers: `notes` (stdio, a child of mcpd) and `tickets` (Streamable HTTP, its own
unit in the container, so a check can take it down and bring it back).

Each test boots a fresh overlay of the cached rootfs and runs one check script as root
inside it (see harness.py and container/mcpdcheck.py); a failure prints the check's
output and the container's journal.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.systemd import harness
from tests.systemd.service_machine import PY, machine, run_check

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_start_status_outage_and_journal(systemd_rootfs: harness.Rootfs) -> None:
    """`systemctl start` returns after READY=1 with the summary in STATUS=; the summary
    follows a server going down and coming back, and the journal has the outage with
    its fields, queried as docs/operations.md shows."""
    check = r"""
    step("systemd-analyze verify, with the real ExecStart and ExecReload")
    units = ["/etc/systemd/system/mcpd.service", "/etc/systemd/system/mcpd.socket"]
    verify = subprocess.run(["systemd-analyze", "verify", "--man=no", *units],
                            capture_output=True, text=True)
    assert (verify.returncode, verify.stdout + verify.stderr) == (0, ""), verify

    step("start")
    started = time.monotonic()
    sh("systemctl", "start", "mcpd")
    # start returned, so READY=1 arrived: every server has had its first attempt.
    assert active("mcpd") == "active"
    assert show("StatusText") == "2 servers: 2 ready", show("StatusText")
    pid = show("MainPID")
    assert sh("ps", "-o", "user=", "-p", pid) == "mcpd"
    names = tool_names()
    assert "mcp__notes__search" in names and "mcp__tickets__search" in names, names
    out = mcpd("call", "mcp__tickets__search", '{"query": "login"}').stdout
    assert "T-1" in out, out
    print(f"started in {time.monotonic() - started:.1f}s, pid {pid}, {len(names)} tools")

    step("the stdio server's environment")
    (notes_pid,) = [p for p, a in server_pids(pid).items() if "mcpd.demo.notes" in a]
    env = environ_of(notes_pid)
    leaked = sorted(k for k in env if k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
                                            "LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM"))
    assert not leaked, leaked
    assert env["HOME"] == "/var/lib/mcpd/homes/notes", env
    assert sh("ps", "-o", "user=", "-p", str(notes_pid)) == "mcpd"

    step("tickets goes down")
    follow = subprocess.Popen(
        ["journalctl", "-u", "mcpd", "MCPD_SERVER=tickets", "-f", "-n", "0", "-o", "cat"],
        stdout=subprocess.PIPE, text=True)
    sh("systemctl", "stop", "tickets")
    call = mcpd("call", "mcp__tickets__search", '{"query": "login"}', check=False)
    assert call.returncode == 1 and "unavailable" in call.stdout, call
    status_becomes("2 servers: 1 ready, 1 unreachable (mcpd status and the journal say which)")
    # `journalctl -u mcpd MCPD_SERVER=tickets -f` printed the outage as it happened.
    import select
    assert select.select([follow.stdout], [], [], 10)[0], "journalctl -f printed nothing"
    line = follow.stdout.readline()
    follow.terminate()
    assert line.startswith("tickets: "), line
    print("followed:", line.strip())
    outages = journal("MCPD_EVENT=outage")
    assert outages, "no MCPD_EVENT=outage entry"
    e = outages[0]
    assert e["MCPD_SERVER"] == "tickets" and e["_SYSTEMD_UNIT"] == "mcpd.service", e
    assert e["_PID"] == pid and e["SYSLOG_IDENTIFIER"] == "mcpd" and e["PRIORITY"] == "4", e
    assert e["MESSAGE"].startswith("tickets: unavailable: "), e["MESSAGE"]
    assert "127.0.0.1" in e["MCPD_REASON"], e
    assert journal("MCPD_EVENT=outage", "MCPD_SERVER=notes") == []
    plain = sh("journalctl", "-u", "mcpd", "MCPD_EVENT=outage", "--no-pager")
    assert "tickets: unavailable" in plain, plain
    print("journal:", e["MESSAGE"])

    step("tickets comes back")
    sh("systemctl", "start", "tickets")
    wait_for("a recovered entry", lambda: journal("MCPD_EVENT=recovered", "MCPD_SERVER=tickets"))
    # Degraded until a call succeeds (the call that failed while it was down is the
    # last it knows of its calls), then ready.
    assert "T-1" in mcpd("call", "mcp__tickets__search", '{"query": "login"}').stdout
    status_becomes("2 servers: 2 ready")
    assert show("MainPID") == pid
    """
    run_check(machine(systemd_rootfs), check)


def test_reload_keeps_the_pid_and_applies_the_new_config(systemd_rootfs: harness.Rootfs) -> None:
    """`systemctl reload` returns with the new config live (a server it adds is in
    `mcpd tools`), the same pid, untouched servers keeping theirs; a bad config fails the
    reload and the running one stays; SIGHUP does the same as reload."""
    check = rf"""
    CONFIG = "/etc/mcpd/config.toml"
    original = open(CONFIG).read()
    sh("systemctl", "start", "mcpd")
    pid = show("MainPID")
    (notes_pid,) = server_pids(pid)

    step("reload adds a server")
    added = '[servers.extra]\ncommand = "{PY}"\nargs = ["-m", "mcpd.demo.notes"]\n'
    write(CONFIG, original + added)
    sh("systemctl", "reload", "mcpd")
    assert show("MainPID") == pid
    assert show("StatusText") == "3 servers: 3 ready", show("StatusText")
    names = tool_names()
    assert "mcp__extra__search" in names and len(names) == 9, names
    assert notes_pid in server_pids(pid), "the unchanged server was restarted"
    assert len(server_pids(pid)) == 2
    (e,) = journal("MCPD_EVENT=reload")
    assert "added extra;" in e["MESSAGE"], e["MESSAGE"]
    print("reloaded:", e["MESSAGE"])

    step("a config with an error fails the reload; the running one stays")
    write(CONFIG, original + '[servers.broken]\ncomand = "x"\n')
    failed = subprocess.run(["systemctl", "reload", "mcpd"], capture_output=True, text=True)
    assert failed.returncode != 0, failed
    assert active("mcpd") == "active" and show("MainPID") == pid
    assert tool_names() == names
    log = sh("journalctl", "-u", "mcpd", "--no-pager", "-o", "cat")
    assert "servers.broken.comand: unknown key" in log, log
    print("refused:", [l for l in log.splitlines() if "unknown key" in l][0])

    step("SIGHUP re-reads the config too")
    write(CONFIG, original)
    extra = [p for p in server_pids(pid) if p != notes_pid]
    os.kill(int(pid), signal.SIGHUP)
    status_becomes("2 servers: 2 ready")
    wait_for("the removed server's process to exit", lambda: not any(map(alive, extra)))
    assert "mcp__extra__search" not in tool_names()
    assert show("MainPID") == pid and list(server_pids(pid)) == [notes_pid]
    """
    run_check(machine(systemd_rootfs), check)


WATCHDOG_DROPIN = """\
[Service]
WatchdogSec=3s
RestartSec=1s
Environment=MCPD_TEST_FAULTS=wedge_on_sigusr2
"""


def test_watchdog_restarts_a_wedged_daemon(systemd_rootfs: harness.Rootfs) -> None:
    """With the event loop wedged (the test-only fault, switched on by a drop-in) the
    watchdog pings stop; systemd kills mcpd and its servers and starts it again. A mcpd
    killed outright comes back on the same socket, which mcpd.socket keeps."""
    check = r"""
    sh("systemctl", "start", "mcpd")
    pid = show("MainPID")
    children = list(server_pids(pid))
    assert len(children) == 1

    step("wedge the event loop")
    os.kill(int(pid), signal.SIGUSR2)
    wait_for("a watchdog restart",
             lambda: show("NRestarts") == "1" and show("MainPID") not in ("0", pid))
    status_becomes("2 servers: 2 ready")
    log = sh("journalctl", "-u", "mcpd", "--no-pager")
    assert "mcpd.service: Watchdog timeout (limit 3s)!" in log, log
    assert not any(map(alive, children)), "a server of the killed mcpd survived"
    new_pid = show("MainPID")
    assert len(tool_names()) == 6
    print("watchdog restart:", pid, "->", new_pid)

    step("kill -9: the restarted mcpd serves on mcpd.socket's socket again")
    children = list(server_pids(new_pid))
    os.kill(int(new_pid), signal.SIGKILL)
    wait_for("a restart",
             lambda: show("NRestarts") == "2" and show("MainPID") not in ("0", new_pid))
    status_becomes("2 servers: 2 ready")
    assert not any(map(alive, children))
    assert len(tool_names()) == 6

    step("stop")
    children = list(server_pids(show("MainPID")))
    sh("systemctl", "stop", "mcpd")
    assert not any(map(alive, children))
    assert active("mcpd.socket") == "active" and os.path.exists(SOCKET)
    """
    run_check(machine(systemd_rootfs, WATCHDOG_DROPIN), check)


def test_socket_activation_and_stop(systemd_rootfs: harness.Rootfs) -> None:
    """mcpd.socket owns /run/mcpd/mcpd.sock (group mcpd-agents may connect) in a
    directory of root's that the service's user cannot write, also once mcpd runs; the
    first connection starts mcpd, which adopts the socket; the agents' group may use mcpd
    but not read its config; `systemctl stop` leaves no server process and no outage in
    the journal, and the socket keeps listening for the next start."""
    check = r"""
    sh("systemctl", "start", "mcpd.socket")
    assert active("mcpd") == "inactive"
    st = os.stat(SOCKET)
    assert oct(st.st_mode & 0o777) == "0o660", oct(st.st_mode)
    assert st.st_gid == int(sh("getent", "group", "mcpd-agents").split(":")[2])

    step("the first connection starts mcpd")
    assert len(tool_names()) == 6
    assert active("mcpd") == "active"
    pid = show("MainPID")
    assert show("StatusText") == "2 servers: 2 ready"
    log = sh("journalctl", "-u", "mcpd", "--no-pager", "-o", "cat")
    assert f"listening on {SOCKET}; 2 servers: 2 ready" in log, log

    step("the socket's directory is root's: the service's user cannot replace the socket")
    st = os.stat("/run/mcpd")
    assert (st.st_uid, oct(st.st_mode & 0o7777)) == (0, "0o755"), (st.st_uid, oct(st.st_mode))
    assert os.stat(SOCKET).st_uid == 0
    # As the service's user in mcpd's own mount namespace: what a server with
    # sandbox = "off" is, and can do.
    as_service = ["nsenter", f"--target={pid}", "--mount", "setpriv", "--reuid=mcpd",
                  "--regid=mcpd", "--clear-groups"]
    for attempt in (["rm", "-f", SOCKET], ["touch", "/run/mcpd/other.sock"]):
        done = subprocess.run([*as_service, *attempt], capture_output=True, text=True)
        assert done.returncode != 0, (attempt, done)
    assert os.path.exists(SOCKET) and os.listdir("/run/mcpd") == ["mcpd.sock"]
    assert len(tool_names()) == 6

    step("members of the group mcpd-agents may connect (allow_groups), others not")
    with open("/etc/mcpd/config.toml") as f:
        assert 'allow_groups = ["mcpd-agents"]' in f.read()
    sh("useradd", "-G", "mcpd-agents", "alice")
    sh("useradd", "bob")
    assert "6 tools" in mcpd("tools", "--socket", SOCKET, user="alice").stdout
    refused = mcpd("tools", "--socket", SOCKET, user="bob", check=False)
    assert refused.returncode == 3 and "not allowed" in refused.stderr, refused
    assert "file permissions" in refused.stderr, refused
    assert "ask to be added to group mcpd-agents" in refused.stderr, refused

    step("an agent's user may not read the config, which the service's group reads")
    st = os.stat("/etc/mcpd/config.toml")
    service_gid = int(sh("getent", "group", "mcpd").split(":")[2])
    assert (st.st_gid, oct(st.st_mode & 0o777)) == (service_gid, "0o640")
    for user in ("alice", "bob"):
        read = subprocess.run(["runuser", "-u", user, "--", "cat", "/etc/mcpd/config.toml"],
                              capture_output=True, text=True)
        assert read.returncode != 0 and "Permission denied" in read.stderr, (user, read)
    assert "mcpd-agents" not in sh("id", "-nG", "mcpd").split()
    elsewhere = mcpd("tools", user="alice", check=False)  # her own default socket
    assert elsewhere.returncode == 3, elsewhere
    assert f"a system mcpd listens on {SOCKET}: use --socket" in elsewhere.stderr, elsewhere

    step("stop")
    children = list(server_pids(pid))
    assert children
    sh("systemctl", "stop", "mcpd")
    assert active("mcpd") == "inactive"
    assert not any(map(alive, children)), "a server process survived the stop"
    assert sh("pgrep", "-f", "mcpd.demo.notes", check=False) == ""
    assert journal("MCPD_EVENT=outage") == [], "stopping logged an outage"
    assert active("mcpd.socket") == "active" and os.path.exists(SOCKET)

    step("the next connection starts it again; a restart passes the socket on")
    assert len(tool_names()) == 6 and show("MainPID") not in ("0", pid)
    sh("systemctl", "restart", "mcpd")
    assert len(tool_names()) == 6
    children = list(server_pids(show("MainPID")))
    sh("systemctl", "stop", "mcpd.socket", "mcpd")
    assert active("mcpd") == "inactive" and not any(map(alive, children))
    """
    run_check(machine(systemd_rootfs), check)


def test_a_config_error_keeps_the_socket_and_a_reload_recovers(
    systemd_rootfs: harness.Rootfs,
) -> None:
    """With a broken config, a restart does not end in a start loop that fails
    mcpd.socket: mcpd stays up saying why it does not serve, the error is in the
    journal at error level, and `systemctl reload` with the config fixed serves it."""
    check = r"""
    CONFIG = "/etc/mcpd/config.toml"
    original = open(CONFIG).read()
    sh("systemctl", "start", "mcpd.socket", "mcpd")
    write(CONFIG, original + '[servers.oops]\ncommand = 5\n')
    sh("systemctl", "restart", "mcpd")
    pid = show("MainPID")

    step("every request is told the config error and what to do")
    for _ in range(8):
        out = mcpd("status", check=False)
        assert out.returncode == 78, out
        assert "servers.oops.command" in out.stderr and "systemctl reload mcpd" in out.stderr, out
    assert active("mcpd") == "active" and active("mcpd.socket") == "active"
    assert show("MainPID") == pid and show("NRestarts") == "0"
    # Every local user reads STATUS=: the error's words are the journal's and mcpd's.
    assert show("StatusText") == "config error (mcpd status and the journal say what)"
    errors = sh("journalctl", "-p", "err", "-u", "mcpd", "--no-pager", "-o", "cat")
    assert f"config error: {CONFIG}: servers.oops.command" in errors, errors
    print("refused:", out.stderr.strip())

    step("a reload that still fails keeps it so; one with the config fixed serves")
    failed = subprocess.run(["systemctl", "reload", "mcpd"], capture_output=True, text=True)
    assert failed.returncode != 0 and active("mcpd") == "active", failed
    write(CONFIG, original)
    sh("systemctl", "reload", "mcpd")
    assert show("MainPID") == pid
    assert show("StatusText") == "2 servers: 2 ready", show("StatusText")
    assert len(tool_names()) == 6
    """
    run_check(machine(systemd_rootfs), check)


NODE_SERVER = """
[servers.memory]
command = "/opt/node/node"
args = ["/opt/peers/node_modules/@modelcontextprotocol/server-memory/dist/index.js"]
# In its own home: the rest of the state directory is hidden from it.
env = { MEMORY_FILE_PATH = "/var/lib/mcpd/homes/memory/memory.jsonl" }
"""


def test_the_confined_service_still_serves_node_and_python_servers(
    systemd_rootfs: harness.Rootfs,
) -> None:
    """The unit's system call filter, core limit, IPC removal and unit-wide limits are in
    force on mcpd and on every server it starts, and a Node server (which probes for
    system calls the filter refuses) and a Python one still answer calls."""
    node = shutil.which("node")
    peers = ROOT / "tests/peers/node_modules/@modelcontextprotocol/server-memory"
    if node is None or not peers.is_dir():
        pytest.skip("needs node and tests/peers/node_modules (the interop peers)")
    m = machine(systemd_rootfs)
    m.bind_ro(Path(node), "/opt/node/node")
    m.bind_ro(ROOT / "tests/peers/node_modules", "/opt/peers/node_modules")
    check = rf"""
    write("/etc/mcpd/config.toml", open("/etc/mcpd/config.toml").read() + {NODE_SERVER!r})
    sh("systemctl", "start", "mcpd")
    assert show("StatusText") == "3 servers: 3 ready", show("StatusText")

    step("the unit's settings, as systemd applies them")
    expected = {{"SystemCallErrorNumber": "1", "LimitCORE": "0", "RemoveIPC": "yes",
                "TasksMax": "4096", "MemoryMax": str(8 << 30), "OOMPolicy": "continue",
                "NoNewPrivileges": "yes"}}
    shown = {{k: show(k) for k in expected}}
    assert shown == expected, shown
    allowed = show("SystemCallFilter").split()
    assert "read" in allowed and "clone3" in allowed, allowed
    refused = [c for c in ("ptrace", "reboot", "init_module", "swapon") if c in allowed]
    assert not refused, refused
    # Mounting is the servers' sandboxes', in namespaces of their own.
    assert "mount" in allowed and "pivot_root" in allowed, allowed

    step("on mcpd and each of its servers")
    pid = show("MainPID")
    servers = server_pids(pid)
    assert len(servers) == 2 and any("/opt/node/node" in a for a in servers.values()), servers
    for p in [int(pid), *servers]:
        status = dict(l.split(":", 1) for l in open(f"/proc/{{p}}/status").read().splitlines())
        assert status["Seccomp"].strip() == "2" and status["NoNewPrivs"].strip() == "1", p
        (core,) = [l for l in open(f"/proc/{{p}}/limits") if l.startswith("Max core file size")]
        assert core.split()[4:6] == ["0", "0"], core

    step("calls through the Node server and the Python one")
    made = mcpd("call", "mcp__memory__create_entities", json.dumps({{"entities": [
        {{"name": "mcpd", "entityType": "daemon", "observations": ["confined"]}}]}})).stdout
    assert "confined" in made, made
    assert "confined" in mcpd("call", "mcp__memory__read_graph", "{{}}").stdout
    assert "welcome" in mcpd("call", "mcp__notes__search", '{{"query": "welcome"}}').stdout
    assert show("NRestarts") == "0" and len(server_pids(pid)) == 2

    step("IPC objects of the service's user go when it stops")
    sh("runuser", "-u", "mcpd", "--", "ipcmk", "-M", "4096")
    sh("runuser", "-u", "mcpd", "--", "sh", "-c", "echo x > /dev/shm/mcpd-probe")
    owners = lambda: sh("ipcs", "-m", "-c").splitlines()[2:]  # after the two header lines
    assert any(" mcpd " in l for l in owners()) and os.path.exists("/dev/shm/mcpd-probe")
    sh("systemctl", "stop", "mcpd")
    assert not any(" mcpd " in l for l in owners()), owners()
    assert not os.path.exists("/dev/shm/mcpd-probe")
    """
    run_check(m, check)
