"""The sandbox as a plan: which bubblewrap and prlimit arguments a server's config gives,
what a machine without namespaces gets instead, and the words for a limit reached.
No process is started here."""

from __future__ import annotations

import signal

import msgspec
import pytest

from transports.stdio.process.childenv import environment
from transports.stdio.process.exits import exit_reason
from transports.stdio.sandbox.limits import Limits
from transports.stdio.sandbox.machine import Machine, SystemPath
from transports.stdio.sandbox.plan import (
    Mount,
    Netns,
    Resolved,
    Sandbox,
    SandboxError,
    plan,
)
from transports.stdio.sandbox.strict_view import OpenedToRun

MACHINE = Machine(
    bwrap="/usr/bin/bwrap",
    prlimit="/usr/bin/prlimit",
    namespaces=None,
    network=None,
    system=(SystemPath("/usr"), SystemPath("/bin", "usr/bin"), SystemPath("/etc")),
    nofile_hard=4096,
    userns_denial=None,
    keyring_denial=None,
    tmpfs_unsized=None,
)
HOME = "/var/lib/mcpd/homes/files"


def resolved(
    mounts: tuple[Mount, ...] = (), command: str = "/usr/bin/node", **kw: object
) -> Resolved:
    sandbox = Sandbox(home=HOME, where="servers.files", **kw)  # type: ignore[arg-type]
    return Resolved(sandbox=sandbox, home=HOME, mounts=mounts, command=command)


def binds(argv: list[str]) -> list[tuple[str, ...]]:
    """The mounts of a bubblewrap command line, in order, as (option, path...)."""
    out: list[tuple[str, ...]] = []
    i = 0
    while argv[i] != "--":
        opt = argv[i]
        if opt in ("--bind", "--ro-bind", "--ro-bind-try", "--symlink"):
            out.append((opt, argv[i + 1], argv[i + 2]))
            i += 3
        elif opt in ("--tmpfs", "--dev", "--proc", "--chdir", "--perms", "--cap-drop"):
            out.append((opt, argv[i + 1]))
            i += 2
        else:
            i += 1
    return out


def test_the_default_level_shows_the_machine_but_what_is_hidden() -> None:
    mounts = (
        Mount("/var/lib/mcpd", "hide_dir"),
        Mount("/home/u/.netrc", "hide_file"),
        Mount("/home/u/.ssh", "hide_dir"),
    )
    p = plan(resolved(mounts), ["node", "server.js"], MACHINE, HOME)
    assert p.unprotected is None
    assert p.argv[0] == "/usr/bin/bwrap"
    for flag in ("--unshare-user", "--unshare-pid", "--die-with-parent"):
        assert flag in p.argv
    assert "--unshare-net" not in p.argv
    mounted = binds(p.argv)
    assert mounted.index(("--bind", "/", "/")) == 1  # after --cap-drop ALL
    assert ("--ro-bind", "/dev/null", "/home/u/.netrc") in mounted
    # The state directory is hidden, and the server's own home in it shown again on top.
    hide = mounted.index(("--tmpfs", "/var/lib/mcpd"))
    assert mounted[hide - 1] == ("--perms", "0555")
    assert mounted.index(("--bind", HOME, HOME)) > hide
    # No limit set: the command itself, resolved, right after bubblewrap's arguments.
    assert p.argv[p.argv.index("--") + 1 :] == ["/usr/bin/node", "server.js"]


def test_a_grant_inside_what_is_hidden_is_shown_and_a_hidden_path_inside_a_grant_is_not() -> None:
    mounts = (
        Mount("/home/u/.aws", "hide_dir"),
        Mount("/home/u/.aws", "read"),
        Mount("/home/u", "write"),
        Mount("/home/u/.ssh", "hide_dir"),
    )
    mounted = binds(plan(resolved(mounts), ["x"], MACHINE, HOME).argv)
    order = [m[-1] for m in mounted if m[0] != "--perms"]
    assert order.index("/home/u") < order.index("/home/u/.ssh")
    aws = [m for m in mounted if m[-1] == "/home/u/.aws"]
    assert aws[-1] == ("--ro-bind", "/home/u/.aws", "/home/u/.aws")


def test_the_strict_level_starts_from_nothing() -> None:
    mounts = (
        Mount("/srv/docs", "read"),
        Mount("/srv/out", "write"),
        Mount("/home/u/.ssh", "hide_dir"),
    )
    p = plan(resolved(mounts, level="strict", network=False), ["node"], MACHINE, HOME)
    mounted = binds(p.argv)
    assert ("--bind", "/", "/") not in mounted
    assert ("--ro-bind", "/usr", "/usr") in mounted
    assert ("--symlink", "usr/bin", "/bin") in mounted
    assert ("--tmpfs", "/tmp") in mounted
    assert ("--ro-bind", "/srv/docs", "/srv/docs") in mounted
    assert ("--bind", "/srv/out", "/srv/out") in mounted
    # Nothing shows the home it would hide from, so nothing is mounted for it.
    assert not [m for m in mounted if "/home/u/.ssh" in m]
    assert "--unshare-net" in p.argv


# Their files are the owner's to write, and the owner is a root mcpd's server.
KERNEL = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/acpi")


@pytest.mark.parametrize("level", ["default", "strict"])
def test_the_kernels_controls_are_read_only_at_every_sandboxed_level(level: str) -> None:
    mounted = binds(plan(resolved(level=level), ["node"], MACHINE, HOME).argv)
    proc = mounted.index(("--proc", "/proc"))
    for path in KERNEL:
        # Where it exists: a kernel may lack sysrq, ACPI or a PCI bus.
        assert mounted.index(("--ro-bind-try", path, path)) > proc, path
    if level == "default":
        # The cgroup tree, the devices' and the kernel's settings, shown but not written.
        assert mounted.index(("--ro-bind-try", "/sys", "/sys")) > mounted.index(
            ("--bind", "/", "/")
        )
    else:
        assert not [m for m in mounted if m[-1].startswith("/sys")]


@pytest.mark.parametrize("root", [False, True])
def test_no_sandboxed_server_may_make_user_namespaces_of_its_own(root: bool) -> None:
    """There it would have the rights to mount the cgroup tree afresh, with mcpd's
    cgroup writable where mcpd's user owns it: as root, or under systemd --user."""
    machine = msgspec.structs.replace(MACHINE, root=root)
    for level in ("default", "strict"):
        for network in (True, False):
            r = resolved(level=level, network=network)
            assert "--disable-userns" in plan(r, ["node"], machine, HOME).argv, (level, network)
    assert "--disable-userns" not in plan(resolved(level="off"), ["node"], machine, HOME).argv
    old = msgspec.structs.replace(machine, userns_denial="bwrap: Unknown option --disable-userns")
    p = plan(resolved(), ["node"], old, HOME)
    assert "--disable-userns" not in p.argv
    assert p.unprotected == (
        "it can make user namespaces of its own, in which it may mount the cgroup tree "
        "afresh and, where mcpd's user owns mcpd's cgroup (as root, or under systemd "
        "--user), freeze or kill mcpd and every server: bwrap: Unknown option --disable-userns"
    )
    # Still in its sandbox otherwise: stopped and read as a sandboxed server is.
    assert p.wrapped and p.argv[0] == "/usr/bin/bwrap"


def test_every_sandboxed_server_has_sysv_ipc_of_its_own() -> None:
    """The host's SysV shared memory, message queues and semaphores (an X server's
    buffers, a database's) are not its to read or remove, nor another server's to meet
    it through; and what it makes there goes with its namespace, with its last process."""
    netns = Netns("/proc/7/fd/4", "/proc/7/fd/5")
    machine = msgspec.structs.replace(MACHINE, nsenter="/usr/bin/nsenter")
    for level in ("default", "strict"):
        for network in (True, False):
            argv = plan(resolved(level=level, network=network), ["node"], machine, HOME).argv
            assert "--unshare-ipc" in argv, (level, network)
        joined = resolved(level=level, network=False, loopback=(5432,))
        assert "--unshare-ipc" in plan(joined, ["node"], machine, HOME, netns).argv, level
    assert "--unshare-ipc" not in plan(resolved(level="off"), ["node"], MACHINE, HOME).argv


def test_a_sandboxed_server_is_started_from_a_thread_that_refuses_it_the_keyrings() -> None:
    for level in ("default", "strict"):
        assert plan(resolved(level=level), ["node"], MACHINE, HOME).starter == "keyless"
    # Not a server started as it is.
    assert plan(resolved(level="off"), ["node"], MACHINE, HOME).starter == "main"


def test_where_the_keyrings_cannot_be_refused_the_server_runs_and_it_is_said() -> None:
    setuid = "bwrap: Creating new namespace failed: Operation not permitted"
    machine = msgspec.structs.replace(MACHINE, keyring_denial=setuid)
    p = plan(resolved(), ["node"], machine, HOME)
    assert p.starter == "main" and p.wrapped and p.argv[0] == "/usr/bin/bwrap"
    assert p.unprotected == (
        "it can read the keys of mcpd's session keyring and of its user's keyrings, and "
        f"add keys that mcpd and other servers hold: {setuid}"
    )


def test_a_server_without_a_sandbox_is_not_wrapped() -> None:
    assert not plan(resolved(level="off"), ["node"], MACHINE, HOME).wrapped
    machine = msgspec.structs.replace(MACHINE, namespaces="No permission")
    p = plan(resolved(), ["node"], machine, HOME)
    assert not p.wrapped and p.argv == ["/usr/bin/node"] and p.starter == "main"


def test_a_strict_command_outside_its_grants_is_refused_by_name() -> None:
    with pytest.raises(SandboxError, match=r"/opt2/tool/bin/x is outside .*servers\.files\.read"):
        plan(resolved(command="/opt2/tool/bin/x", level="strict"), ["x"], MACHINE, HOME)


def test_a_strict_command_named_through_a_link_of_the_system_is_shown() -> None:
    # /bin is a link to usr/bin here, which a strict sandbox holds too: a script whose
    # #! line says /bin/sh runs.
    how = "the #! line of /usr/bin/tool names /bin/sh to run it"
    r = resolved(command="/bin/tool", level="strict")
    r = msgspec.structs.replace(r, opened=(OpenedToRun("/bin/sh", how, "/bin"),))
    assert plan(r, ["tool"], MACHINE, HOME).wrapped


def test_a_strict_command_of_an_installation_outside_its_grants_names_the_installation() -> None:
    r = resolved(command="/srv/venv/bin/tool", level="strict")
    r = msgspec.structs.replace(r, installation="/srv/venv")
    with pytest.raises(SandboxError) as refused:
        plan(r, ["tool"], MACHINE, HOME)
    assert str(refused.value) == (
        "servers.files: its command /srv/venv/bin/tool is outside what a strict sandbox "
        "shows; add the folder it is installed in, /srv/venv, to servers.files.read"
    )


def test_a_strict_command_whose_interpreter_is_outside_its_grants_is_refused_naming_it() -> None:
    python = "/home/a/.pyenv/versions/3.11.7/bin/python3.11"
    how = "the #! line of /srv/venv/bin/tool names /srv/venv/bin/python to run it"
    opened = (
        OpenedToRun("/srv/venv/bin/python", how, "/srv/venv"),
        OpenedToRun(python, how, python[:-15], True),
    )
    granted = (Mount("/srv/venv", "read"),)
    r = resolved(granted, command="/srv/venv/bin/tool", level="strict")
    with pytest.raises(SandboxError) as refused:
        plan(msgspec.structs.replace(r, opened=opened), ["tool"], MACHINE, HOME)
    assert str(refused.value) == (
        f"servers.files: {python} is outside what a strict sandbox shows, and its command "
        f"cannot run without it ({how}); add the folder it is installed in, "
        "/home/a/.pyenv/versions/3.11.7, to servers.files.read"
    )
    # Shown, as its grant shows it: the server starts.
    shown = (*granted, Mount("/home/a/.pyenv/versions/3.11.7", "read"))
    r = resolved(shown, command="/srv/venv/bin/tool", level="strict")
    assert plan(msgspec.structs.replace(r, opened=opened), ["tool"], MACHINE, HOME).wrapped


def test_without_namespaces_the_default_level_runs_unprotected_and_says_why() -> None:
    machine = Machine(
        bwrap="/usr/bin/bwrap", prlimit="/usr/bin/prlimit", namespaces="No permission"
    )
    limits = Limits(memory=1 << 30, processes=64, keys={"processes": "daemon.limits.processes"})
    p = plan(resolved(limits=limits), ["node"], machine, HOME)
    assert p.argv[:2] == ["/usr/bin/prlimit", f"--data={1 << 30}"]
    assert not any(a.startswith("--nproc") for a in p.argv)
    assert p.unprotected is not None
    assert "namespaces are not available (No permission)" in p.unprotected
    assert "daemon.limits.processes" in p.unprotected


@pytest.mark.parametrize(
    ("kw", "promise"),
    [({"level": "strict"}, 'sandbox = "strict"'), ({"network": False}, "network = false")],
)
def test_a_promise_that_cannot_be_kept_fails_the_start(kw: dict[str, object], promise: str) -> None:
    machine = Machine(bwrap=None)
    with pytest.raises(SandboxError, match=f"servers.files.{promise}.*bubblewrap"):
        plan(resolved(**kw), ["node"], machine, HOME)


def test_a_default_server_without_bubblewrap_runs_and_says_what_to_install() -> None:
    p = plan(resolved(), ["node"], Machine(bwrap=None), HOME)
    assert p.argv[-1].endswith("node") and "bwrap" not in " ".join(p.argv)
    assert p.unprotected is not None
    assert "no sandbox: bubblewrap (bwrap) is not installed" in p.unprotected
    assert "the bubblewrap package" in p.unprotected


def test_limits_are_set_inside_the_namespaces() -> None:
    limits = Limits(memory=512 << 20, processes=64, open_files=100_000, cpu=30)
    p = plan(resolved(limits=limits), ["node"], MACHINE, HOME)
    tail = p.argv[p.argv.index("--") + 1 :]
    assert tail == [
        "/usr/bin/prlimit",
        f"--data={512 << 20}",
        "--nproc=64",
        "--nofile=4096",  # no more than mcpd itself may have
        "--cpu=30:31",
        "--",
        "/usr/bin/node",
    ]


def test_a_limit_reached_is_named_in_the_exit_reason() -> None:
    limits = Limits(memory=1 << 30, cpu=5, keys={"memory": "servers.hog.limits.memory"})
    assert exit_reason(1, limits, ["Traceback", "MemoryError"], sandboxed=True) == (
        "exited with status 1: its last error on stderr says it reached its limit "
        "servers.hog.limits.memory = 1 GiB"
    )
    assert exit_reason(-signal.SIGXCPU, limits, [], sandboxed=False) == (
        "was killed by SIGXCPU: it reached its limit limits.cpu = 5 s"
    )
    assert exit_reason(128 + 9, limits, [], sandboxed=True) == (
        "exited with status 137 (as a process killed by SIGKILL would)"
    )
    assert exit_reason(137, limits, [], sandboxed=False) == "exited with status 137"
    # No limit in force, no claim.
    assert exit_reason(1, Limits(), ["MemoryError"], sandboxed=True) == "exited with status 1"


BASE = {
    "PATH": "/usr/bin",
    "HOME": "/home/u",
    "LANG": "C.UTF-8",
    "LC_TIME": "de_DE",
    "TICKETS_TOKEN": "secret",
    "AWS_PROFILE": "dev",
    "AWS_SECRET_ACCESS_KEY": "k",
    "CREDENTIALS_DIRECTORY": "/run/credentials/mcpd.service",
    "NOTIFY_SOCKET": "/run/systemd/notify",
    "LISTEN_FDS": "1",
    "MCPD_CONFIG": "/etc/mcpd/config.toml",
    "GITHUB_TOKEN": "gh",
}


def test_a_server_inherits_the_default_set_and_what_it_names() -> None:
    env = environment(False, {"OWN": "1"}, BASE, provided={"HOME": "/srv/home"})
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/srv/home",
        "LANG": "C.UTF-8",
        "LC_TIME": "de_DE",
        "OWN": "1",
    }
    env = environment(["AWS_*", "GITHUB_TOKEN"], None, BASE)
    assert {"AWS_PROFILE", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"} <= set(env)
    assert "TICKETS_TOKEN" not in env


def test_what_the_config_resolves_for_another_is_withheld_even_with_true() -> None:
    env = environment(True, None, BASE, withheld={"TICKETS_TOKEN", "PATH"})
    assert "TICKETS_TOKEN" not in env
    assert env["PATH"] == "/usr/bin"  # the default set is nobody's secret
    for name in ("CREDENTIALS_DIRECTORY", "NOTIFY_SOCKET", "LISTEN_FDS", "MCPD_CONFIG"):
        assert name not in env
    # Asked for by its exact name, it is this server's too.
    assert (
        environment(["TICKETS_TOKEN"], None, BASE, withheld={"TICKETS_TOKEN"})["TICKETS_TOKEN"]
        == "secret"
    )
    assert "TICKETS_TOKEN" not in environment(["TICKETS_*"], None, BASE, withheld={"TICKETS_TOKEN"})


def test_a_refused_sandbox_is_no_plan_and_says_why_and_without_a_sandbox_it_is_moot() -> None:
    why = "mcpd's state directory is reached through a link this server may repoint"
    with pytest.raises(SandboxError, match="through a link"):
        plan(resolved(refused=why), ["node"], MACHINE, HOME)
    started = plan(resolved(refused=why, level="off"), ["node"], MACHINE, HOME)
    assert started.argv == ["/usr/bin/node"]


@pytest.mark.parametrize("level", ["default", "strict"])
def test_what_is_handed_to_bubblewrap_apart_is_its_own_arguments_and_all_of_them(
    level: str,
) -> None:
    """The launch hands ``argv[from:to]`` to bubblewrap through a descriptor: that is
    everything between bubblewrap's path and its ``--``, with the hidden paths, the
    grants and the home; the command line keeps the prlimit step and the server's own."""
    mounts = (Mount("/var/lib/mcpd", "hide_dir"), Mount("/srv/notes", "write"))
    limits = Limits(memory=1 << 30)
    p = plan(resolved(mounts, level=level, limits=limits), ["node", "s.js"], MACHINE, HOME)
    assert p.sandbox_args is not None
    first, last = p.sandbox_args
    assert p.argv[:first] == ["/usr/bin/bwrap"] and p.argv[last] == "--"
    handed = p.argv[first:last]
    # A strict sandbox has nothing to hide: it shows only what it binds.
    shown = ("/srv/notes", HOME) + (("/var/lib/mcpd",) if level == "default" else ())
    for path in shown:
        assert path in handed and path not in p.argv[last:], path
    assert p.argv[last + 1 :] == [
        "/usr/bin/prlimit",
        f"--data={1 << 30}",
        "--",
        "/usr/bin/node",
        "s.js",
    ]


def test_nothing_is_handed_apart_where_there_is_no_bubblewrap() -> None:
    assert plan(resolved(level="off"), ["node"], MACHINE, HOME).sandbox_args is None
    bare = msgspec.structs.replace(MACHINE, bwrap=None)
    assert plan(resolved(), ["node"], bare, HOME).sandbox_args is None


def test_a_strict_command_through_a_link_to_a_folder_not_granted_is_refused_by_name() -> None:
    how = "its command /srv/tools/linked/x lies there, through a link to a folder on the way"
    r = resolved((Mount("/srv/tools", "read"),), command="/srv/tools/linked/x", level="strict")
    r = msgspec.structs.replace(r, opened=(OpenedToRun("/data/x", how, "/data"),))
    with pytest.raises(SandboxError) as refused:
        plan(r, ["x"], MACHINE, HOME)
    assert str(refused.value) == (
        "servers.files: /data/x is outside what a strict sandbox shows, and its command "
        f"cannot run without it ({how}); add its folder, /data, to servers.files.read"
    )


@pytest.mark.parametrize(
    ("command", "cwd", "refused"),
    [
        ("/usr/..//srv/tools/x", HOME, "its command /srv/tools/x is outside"),
        ("/usr/bin/node", "/tmp/..//srv/data", "servers.files.cwd: /srv/data is outside"),
    ],
)
def test_a_strict_command_or_cwd_with_dots_is_refused_as_where_it_leads(
    command: str, cwd: str, refused: str
) -> None:
    with pytest.raises(SandboxError, match=refused):
        plan(resolved(command=command, level="strict"), ["x"], MACHINE, cwd)
