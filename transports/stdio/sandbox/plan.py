"""A stdio server's sandbox as a plan: the bubblewrap and prlimit arguments that start
its command inside it. Sans-IO: what the machine offers and what the paths are come
in as values (``transports.stdio.sandbox.host`` finds them); this module only decides.

Levels:

- ``default``: the server sees the machine as its user does, but for what is hidden
  (mcpd's state, config and socket directories, the other servers' homes, the user's
  credential stores), each covered by an empty read-only directory or ``/dev/null``,
  with the directories above it kept where they are (``pins``).
  It runs in user, PID and IPC namespaces of its own: it cannot see, signal or trace
  mcpd or another server, nor reach the SysV shared memory, message queues and
  semaphores of the host or of another server (what it makes there goes with its
  last process), and dies with mcpd (``--die-with-parent`` under the parent-death
  signal mcpd arms). It shares the host's network namespace, and with it the
  host's abstract Unix sockets, which have no path to hide: a Landlock domain
  (``landlock``) keeps it from connecting to those bound outside it, where the
  kernel can scope one, at every sandboxed level. It sees ``/sys`` read-only.
- ``strict``: a new root holding the system's directories read-only, its own home, a
  private ``/tmp``, and the paths its config grants, and no other file; its network is
  the host's unless ``network = false``. Under a root mcpd, less of the system's
  directories: ``/etc`` is a view built of what others may read, and ``/opt`` is not
  shown (``root_view``).
- ``off``: started as it is.

``read`` grants are bound read-only and ``write`` grants read-write, on top of what is
hidden: at the default level a grant is how a server gets one hidden path back (an
AWS server its ``~/.aws``), never one of mcpd's own (``grant_reach``), each bound from
a descriptor held since its check. ``network = false`` gives it a network namespace of its own,
where only its own loopback exists. ``loopback`` names the host's loopback ports it may
still reach: that namespace is then made before bubblewrap runs (``loopback.netns``), with mcpd's
listeners on those ports in it, and bubblewrap joins it through ``nsenter``.

The kernel's controls (``/sys``, and under ``/proc`` the settings, sysrq, interrupts,
buses, filesystems and ACPI) are read-only at every level: their files are their
owner's to write, and a root mcpd's server is their owner, with or without
capabilities, in any namespace. Nor may a sandboxed server make user namespaces, in
which it could mount a cgroup filesystem afresh with mcpd's cgroup writable wherever
mcpd's user owns it (as root, under ``systemd --user``) and freeze or kill mcpd, nor
use the kernel's keyrings (``keyring_filter``), which no namespace separates.

The limits a server's config sets (``limits``) are applied by ``prlimit`` inside the
namespaces; its memory limit also bounds the filesystems in memory it may write
(``mounts``).

Not separated: the host's name (UTS), which the server can read but has no right to
change; and the cgroup tree, whose paths a cgroup namespace would hide at the price
of runtimes that look up their CPU and memory limits through ``/sys``, which shows
the host's tree and would then be read at its root.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from ...path_identity import PathIdentity
from .built_view import BuiltView
from .limits import Limits, prlimit_args
from .machine import Machine, SystemPath
from .mounts import kernel_mounts, sealed, tmpfs
from .strict_view import OpenedToRun, in_view, unseen
from .strict_view import within as within

Level = Literal["off", "default", "strict"]
# The thread of mcpd that starts a server, for what it is born in (``confined``).
Starter = Literal["main", "keyless", "confined"]

# Every sandbox's own namespaces (user, PID, IPC: the IPC namespace needs no privilege
# under a user namespace), its end with mcpd's, and no capability in them.
EVERY_SANDBOX: Final = (
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--die-with-parent",
    "--cap-drop",
    "ALL",
)


class SeenPlace(msgspec.Struct, frozen=True):
    """A place a server sees whatever is hidden, and what it is to the server."""

    path: str
    what: str  # "the user's home", "a path servers.files.args[0] names"


class Sandbox(msgspec.Struct, frozen=True, kw_only=True):
    """What a server's config asks for, paths as written (absolute)."""

    level: Level = "default"
    home: str = ""
    # What to hide; a "*" in a path's last part matches as each start finds it (``anchors``).
    hide: tuple[str, ...] = ()
    # Directories among those hidden that are made (0700) when missing, where their
    # parent exists: a hidden path must exist as the server starts, and what is put in
    # one of these later (a secret another program of the user writes) must stay hidden.
    made: tuple[str, ...] = ()
    # The config file and the secret files it reads (among ``hide``): the directory of
    # each is hidden whole where the server sees nothing in it (``secret_folders``).
    secrets: tuple[str, ...] = ()
    # mcpd's own among ``hide`` (its state, config, sockets, pages): no grant shows them.
    own: tuple[str, ...] = ()
    sees: tuple[SeenPlace, ...] = ()  # places it sees besides its command, cwd and grants
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    network: bool = True
    # Host loopback ports reachable without a network (mcpd relays each, ``loopback.netns``).
    loopback: tuple[int, ...] = ()
    limits: Limits = msgspec.field(default_factory=Limits)
    alias: str = ""
    where: str = ""  # the config key of the server, for messages ("servers.files")
    # Why a server in this sandbox must not start: one it could undo from inside.
    refused: str | None = None

    @property
    def promises(self) -> list[str]:
        """What cannot be dropped silently when the machine lacks namespaces."""
        out = []
        if self.level == "strict":
            out.append(f'{self.where}.sandbox = "strict"')
        if not self.network:
            out.append(f"{self.where}.network = false")
        if self.loopback:
            out.append(f"{self.where}.host_loopback")
        return out


class Mount(msgspec.Struct, frozen=True):
    path: str  # resolved, absolute
    # "fixed": a directory above a hidden path, bound onto itself as a write grant is,
    # so that the server cannot move it (``pins``).
    kind: Literal["hide_dir", "hide_file", "read", "write", "fixed"]
    # A grant as written when that is a symlink's path: a strict sandbox shows the
    # link too, so that the paths of the config work inside as they do outside.
    written: str | None = None
    # A grant's descriptor, held since it was checked (``grant_reach.hold``): bound
    # in place of the path, which anyone who may write a directory on its way could
    # point elsewhere before bubblewrap mounts it.
    fd: int | None = None


class Resolved(msgspec.Struct, frozen=True, kw_only=True):
    """A sandbox with its paths resolved on the host and what to hide found to exist."""

    sandbox: Sandbox
    home: str
    mounts: tuple[Mount, ...]
    command: str  # the server's command, resolved
    # What else the kernel opens to run it, where a strict sandbox must show it
    # (``strict_view``); found only for a strict one.
    opened: tuple[OpenedToRun, ...] = ()
    # The installation the command lies in (``strict_view``), for a strict one.
    installation: str | None = None
    # What the sandbox covers by a path that a rename or a new file would escape.
    covered: tuple[PathIdentity, ...] = ()
    # System directories a strict one shows as views of their own (``built_view``).
    built: tuple[BuiltView, ...] = ()


class SandboxError(Exception):
    """A sandbox that was asked for cannot be applied; the server does not start."""


class Netns(msgspec.Struct, frozen=True):
    """A user and a network namespace made for a server, as paths ``nsenter`` opens."""

    user: str
    net: str


class Plan(msgspec.Struct, frozen=True):
    argv: list[str]
    # None when the sandbox is applied as asked; else why the server runs without it
    # (the default level on a machine without namespaces) or without part of it.
    unprotected: str | None = None
    # The ``cgroup.procs`` its first process joins (a root mcpd's process limit).
    join: str | None = None
    starter: Starter = "main"
    # Started in bubblewrap, whatever of the sandbox it goes without (``unprotected``).
    wrapped: bool = False
    # Where bubblewrap's own arguments are in ``argv`` (from, to). Every user of the
    # machine can read a process's command line (``ps``), and these say what the
    # sandbox hides and where the servers' homes are: the launch hands them to
    # bubblewrap through a descriptor instead (``--args FD``). None when not wrapped.
    sandbox_args: tuple[int, int] | None = None
    covered: tuple[PathIdentity, ...] = ()  # ``Resolved.covered``
    # The grants' descriptors bubblewrap binds (``Mount.fd``): handed to it, and
    # closed once it is started.
    held: tuple[int, ...] = ()


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def _order(m: Mount) -> tuple[int, int]:
    # Shallower first, so that a deeper path (a grant inside a hidden directory, a hidden
    # file inside a granted one) lands on top; at the same path the grant wins.
    return (_depth(m.path), 0 if m.kind.startswith("hide") else 1)


def _namespaces(network: bool, joined: bool, machine: Machine) -> list[str]:
    args = list(EVERY_SANDBOX)
    if machine.userns_denial is None:
        args.append("--disable-userns")
    if not network and not joined:
        args.append("--unshare-net")
    return args


def strict_roots(system: Sequence[SystemPath], mounts: Sequence[Mount], home: str) -> list[str]:
    """The places a strict sandbox shows, with what lies in them: the system's
    directories (and its links, ``/bin`` to ``usr/bin``), the grants (as the config
    writes them too), its home and ``/tmp``."""
    roots = [p.path for p in system]
    for m in mounts:
        if m.kind in ("read", "write"):
            roots += [m.path] if m.written is None else [m.path, m.written]
    return [*roots, home, "/tmp"]


def bwrap_command(machine: Machine, netns: Netns | None = None) -> list[str]:
    """What runs bubblewrap, ending with its path: through ``nsenter`` into ``netns``
    when given."""
    assert machine.bwrap is not None
    args = []
    if netns is not None:
        assert machine.nsenter is not None
        args += [machine.nsenter, f"--user={netns.user}", f"--net={netns.net}"]
        args += ["--preserve-credentials", "--"]
    # A server that joins a network namespace is started outside the Landlock domain,
    # since nsenter opens mcpd's descriptors through /proc, which a process in the
    # domain may not (as it may not trace one outside): a step after nsenter enters the
    # domain before bubblewrap. Every other one is born in it (``Plan.starter``).
    confine = machine.confine if netns is not None else ()
    return [*args, *confine, machine.bwrap]


def bwrap_args(r: Resolved, machine: Machine, cwd: str, netns: Netns | None = None) -> list[str]:
    """Bubblewrap's own arguments, up to its ``--`` (left out); ``netns``: the network
    namespace it runs in, made beforehand."""
    s = r.sandbox
    args = _namespaces(s.network, netns is not None, machine)
    mounts = list(r.mounts)
    built = {v.root: v for v in r.built} if s.level == "strict" else {}
    if s.level == "strict":
        for p in machine.system:
            if p.link is not None:
                args += ["--symlink", p.link, p.path]
            elif p.path in built:
                args += built[p.path].args()
            else:
                args += ["--ro-bind", p.path, p.path]
        roots = strict_roots(machine.system, r.mounts, r.home)
        mounts = [m for m in mounts if not m.kind.startswith("hide") or in_view(m.path, roots)]
        problem = unseen(s.where, r.command, r.opened, cwd, roots, r.installation)
        if problem is not None:
            raise SandboxError(problem)
    else:
        args += ["--bind", "/", "/"]
    # bubblewrap covers /proc/sys only where its directory is writable, which it never
    # is, and leaves the rest of the kernel's controls as they are.
    bound = s.limits.memory if machine.tmpfs_unsized is None else None
    args += kernel_mounts(s.level != "strict", bound)
    if s.level == "strict":
        args += tmpfs("/tmp", bound)
    mounts.append(Mount(r.home, "write"))
    for m in sorted(mounts, key=_order):
        if m.kind == "hide_dir":
            args += ["--perms", "0555", "--tmpfs", m.path]
        elif m.kind == "hide_file":
            args += ["--ro-bind", "/dev/null", m.path]
        elif m.kind == "read":
            args += _bind("--ro-bind", m)
        else:
            args += _bind("--bind", m)
    if s.level == "strict":
        for m in r.mounts:
            if m.written is not None and m.kind in ("read", "write"):
                args += ["--symlink", m.path, m.written]
    return [*args, *sealed([*_in_memory(mounts, s.level), *built]), "--chdir", cwd]


def _bind(flag: str, m: Mount) -> list[str]:
    if m.fd is None:
        return [flag, m.path, m.path]
    return [f"{flag}-fd", str(m.fd), m.path]


def _in_memory(mounts: Sequence[Mount], level: Level) -> list[str]:
    """The tmpfs mounts of a sandbox that hold nothing of the server's own: its /dev,
    the covers of hidden directories (but where a grant is mounted on top, at the same
    path), a strict sandbox's root."""
    granted = {m.path for m in mounts if not m.kind.startswith("hide")}
    covers = [m.path for m in mounts if m.kind == "hide_dir" and m.path not in granted]
    return ["/dev", *covers, *(["/"] if level == "strict" else [])]


def shortfall(s: Sandbox, machine: Machine) -> str | None:
    """What of the sandbox this machine cannot apply, and why (None: all of it).
    Raises SandboxError when that is a promise of the config (``Sandbox.promises``),
    or when the sandbox is ``refused``."""
    if s.refused is not None and s.level != "off":
        raise SandboxError(s.refused)
    gaps: list[str] = []
    applied = s.level != "off"
    if s.level == "off" and not s.network:
        raise SandboxError(f"{s.where}.network = false needs a sandbox (sandbox is off)")
    if s.loopback and s.network:
        raise SandboxError(f"{s.where}.host_loopback needs {s.where}.network = false")
    missing = _missing(s, machine) if applied else None
    if missing is not None:
        if s.promises:
            raise SandboxError(f"{' and '.join(s.promises)} cannot be applied: {missing}")
        gaps.append(f"no sandbox: {missing}")
        applied = False
    if s.limits.processes is not None:
        if machine.root and not machine.pids_cgroup:
            gaps.append(
                f"{s.limits.key('processes')} is not applied: mcpd runs as root, whom "
                "RLIMIT_NPROC does not hold, and no pids cgroup can be made here"
            )
        elif not machine.root and not applied:
            gaps.append(f"{s.limits.key('processes')} is not applied: it needs the sandbox")
    if applied and machine.userns_denial is not None:
        gaps.append(
            "it can make user namespaces of its own, in which it may mount the cgroup tree "
            "afresh and, where mcpd's user owns mcpd's cgroup (as root, or under systemd "
            f"--user), freeze or kill mcpd and every server: {machine.userns_denial}"
        )
    if applied and machine.keyring_denial is not None:
        gaps.append(
            "it can read the keys of mcpd's session keyring and of its user's keyrings, and "
            f"add keys that mcpd and other servers hold: {machine.keyring_denial}"
        )
    if applied and s.limits.memory is not None and machine.tmpfs_unsized is not None:
        places = "/dev/shm and /tmp" if s.level == "strict" else "/dev/shm"
        gaps.append(
            f"what it writes to {places} is memory that {s.limits.key('memory')} does not "
            "count, up to half of the machine's: bubblewrap cannot bound a tmpfs "
            f"(--size): {machine.tmpfs_unsized}"
        )
    if s.limits.any() and machine.prlimit is None:
        gaps.append("limits are not applied: prlimit (util-linux) not found")
    return "; ".join(gaps) if gaps else None


def plan(
    r: Resolved, argv: Sequence[str], machine: Machine, cwd: str, netns: Netns | None = None
) -> Plan:
    """The command line that starts ``argv`` (its command already resolved) in the
    sandbox, joining ``netns`` (required with ``loopback``). Raises SandboxError when a
    promise of the config cannot be kept."""
    s = r.sandbox
    unprotected = shortfall(s, machine)
    if s.loopback and netns is None:
        raise SandboxError(f"{s.where}.host_loopback: its network namespace was not made")
    applied = s.level != "off" and _missing(s, machine) is None
    wrapped: list[str] = []
    sandbox_args = None
    if applied:
        joined = netns if s.loopback else None
        command, args = bwrap_command(machine, joined), bwrap_args(r, machine, cwd, joined)
        wrapped = [*command, *args, "--"]
        sandbox_args = (len(command), len(command) + len(args))
    limited = prlimit_args(
        s.limits, machine.prlimit, machine.nofile_hard, processes=applied and not machine.root
    )
    starter: Starter = "main"
    if applied and machine.confine and not s.loopback:
        starter = "confined"
    elif applied and machine.keyring_denial is None:
        starter = "keyless"
    argv = [*wrapped, *limited, r.command, *argv[1:]]
    covered = r.covered if applied else ()
    held = tuple(m.fd for m in r.mounts if m.fd is not None) if applied else ()
    return Plan(
        argv,
        unprotected,
        starter=starter,
        wrapped=applied,
        sandbox_args=sandbox_args,
        covered=covered,
        held=held,
    )


def _missing(s: Sandbox, machine: Machine) -> str | None:
    if machine.bwrap is None:
        return "bubblewrap (bwrap) is not installed (it is the bubblewrap package)"
    if machine.namespaces is not None:
        return f"namespaces are not available ({machine.namespaces})"
    if not s.network and machine.network is not None:
        return f"a network namespace is not available ({machine.network})"
    if s.loopback and machine.nsenter is None:
        return "nsenter (util-linux) is not installed"
    return None
