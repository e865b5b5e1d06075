"""What the machine offers a sandbox, found once, and a sandbox's paths resolved on it.

Probing runs bubblewrap once with the namespaces and mounts every sandbox uses (and
once more with a network namespace, when a server first asks for one): a machine
without unprivileged user namespaces, or a service whose hardening forbids them,
answers with bubblewrap's own words, which are what ``mcpd status`` shows as the
reason a server runs unprotected. No trio here (``transports.stdio.process.launch``).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Final

import msgspec

from ..process import pidgroup
from ..process.launch import server_program
from . import anchors, confined, landlock, secret_folders
from .fixed_dirs import fixed_dirs
from .grant_reach import Hidden, hidden_now, hold, is_own, let_go, overreach
from .hidden_links import SYSTEM_DIRS, Needed
from .kernel_places import kernel_mounts_now, kernel_reach, kernel_refusal
from .machine import Machine, SystemPath
from .mounts import kernel_mounts, sealed, tmpfs
from .opened import installation_of, opened_by
from .plan import (
    EVERY_SANDBOX,
    Mount,
    Netns,
    Plan,
    Resolved,
    Sandbox,
    SandboxError,
    plan,
    strict_roots,
    within,
)
from .root_view import BUILT, UNSHOWN, others_view
from .strict_view import unseen

_PROBE_TIMEOUT: Final = 10.0
# What the probe of ``--size`` mounts: a sized tmpfs where every sandbox has one.
SIZED: Final = tuple(tmpfs("/dev/shm", 1 << 20))

_machine: list[Machine] = []


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no reason given"


def _try(bwrap: str, *extra: str, confine: Sequence[str] = (), keyless: bool = False) -> str | None:
    """None when bubblewrap starts ``true`` with these namespaces (run by ``confine``,
    when given; from the thread under the keyring filter, when ``keyless``); else why
    not."""
    args = [*confine, bwrap, *EVERY_SANDBOX, "--bind", "/", "/", *kernel_mounts(True, None)]
    args += [*extra, *sealed(["/dev"]), "--", "true"]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, capture_output=True, text=True, timeout=_PROBE_TIMEOUT, stdin=subprocess.DEVNULL
        )

    try:
        done = confined.keyless.run(run) if keyless else run()
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    return _first_line(done.stderr) if done.stderr else f"bwrap exited with {done.returncode}"


def _system() -> tuple[SystemPath, ...]:
    found = []
    for path in SYSTEM_DIRS:
        if path in UNSHOWN and os.geteuid() == 0:
            continue
        try:
            link = os.readlink(path)
        except OSError:
            link = None
        if link is not None:
            found.append(SystemPath(path, link))
        elif os.path.isdir(path):
            found.append(SystemPath(path))
    # Name resolution where /etc/resolv.conf points into /run (systemd-resolved).
    resolv = os.path.realpath("/etc/resolv.conf")
    if not resolv.startswith(("/etc/", "/usr/")) and os.path.exists(resolv):
        found.append(SystemPath(os.path.dirname(resolv)))
    return tuple(found)


def _confinement(bwrap: str | None, keyrings: str | None) -> tuple[tuple[str, ...], str | None]:
    """``Machine.confine`` and ``Machine.scoping``, for a ``bwrap`` that works, where
    the keyring filter does (``keyrings`` is None). The step runs under mcpd's own
    interpreter, isolated from its environment and site packages."""
    why = landlock.scoping()
    if why is None and not sys.executable:
        why = "mcpd's interpreter cannot be found to run its Landlock step"
    if why is not None:
        return (), why
    if bwrap is None:
        return (), "bubblewrap does not run here"
    if keyrings is not None:
        # The domain's thread is under the filter as well (``confined``).
        return (), f"sandboxed servers cannot be started under a system call filter: {keyrings}"
    confine = (sys.executable, "-I", "-S", landlock.__file__)
    # A setuid bubblewrap gains nothing under no_new_privs: where it needs its
    # privileges, the sandbox goes without the domain rather than without bubblewrap.
    refused = _try(bwrap, confine=confine)
    if refused is not None:
        return (), f"bubblewrap does not start in a Landlock domain: {refused}"
    return confine, None


def probe(*, network: bool = False) -> Machine:
    """What this machine offers, found on the first call (and, for ``network``, on the
    first call that asks for it); then remembered."""
    if not _machine:
        bwrap = shutil.which("bwrap")
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        namespaces = _try(bwrap) if bwrap is not None else "bwrap not found"
        denial = keyrings = unsized = namespaces
        if bwrap is not None and namespaces is None:
            denial = _try(bwrap, "--disable-userns")
            unsized = _try(bwrap, *SIZED)
            keyrings = _try(bwrap, keyless=True)
        confine, scoping = _confinement(bwrap if namespaces is None else None, keyrings)
        _machine.append(
            Machine(
                bwrap=bwrap,
                prlimit=shutil.which("prlimit"),
                nsenter=shutil.which("nsenter"),
                namespaces=namespaces,
                system=_system(),
                nofile_hard=None if nofile == resource.RLIM_INFINITY else nofile,
                root=os.geteuid() == 0,
                pids_cgroup=os.geteuid() == 0 and pidgroup.base() is not None,
                confine=confine,
                scoping=scoping,
                userns_denial=denial,
                keyring_denial=keyrings,
                tmpfs_unsized=unsized,
            )
        )
    machine = _machine[0]
    if network and machine.network == "not probed":
        why: str | None = machine.namespaces or "bwrap not found"
        if machine.bwrap is not None and machine.namespaces is None:
            why = _try(machine.bwrap, "--unshare-net")
        machine = _machine[0] = msgspec.structs.replace(machine, network=why)
    return machine


def resolve(sandbox: Sandbox, command: str, cwd: str = "") -> Resolved:
    """The sandbox's paths as they are on this machine: hidden paths that exist (where
    they are now, not another user's, and not where a link would take what the server
    runs or works in, ``anchors``), grants (which must exist), the directories above
    what is hidden (``pins``), and its home, created (0700) when missing, as are the
    hidden directories it says to make (``made``), and, for a strict one under a root
    mcpd, ``/etc`` as others may read it (``root_view``). ``cwd``: its working
    directory, when not its home. Raises SandboxError."""
    where = sandbox.where
    mounts: list[Mount] = []
    if sandbox.level != "off":
        make_to_hide(sandbox.made)
    hide = [p for h in sandbox.hide for p in anchors.matching(h)] if sandbox.level != "off" else []
    folders = secret_folders.split_secrets(sandbox, command, cwd)
    secret_folders.say(folders, sandbox)
    hide += folders.folders
    needs = _needs(sandbox, command, cwd)
    hidden = [Hidden(f, f, False) for f in folders.folders]
    for path in hide:
        for real in anchors.places(path, sandbox.alias, needs):
            hidden.append(Hidden(path, real, is_own(path, sandbox)))
            if os.path.isdir(real):
                mounts.append(Mount(real, "hide_dir"))
            elif os.path.lexists(real):
                mounts.append(Mount(real, "hide_file"))
    # What lies in a hidden directory is hidden with it.
    dirs = [m.path for m in mounts if m.kind == "hide_dir"]
    mounts = [m for m in mounts if not any(m.path != d and within(m.path, d) for d in dirs)]
    mounts = list(dict.fromkeys(mounts))
    mounts += grants(sandbox, hidden)
    home = make_home(sandbox.home, where)
    mounts += fixed_dirs(mounts, home, sandbox.level)
    covered = secret_folders.identities(folders)
    strict = sandbox.level == "strict"
    opened = opened_by(command, cwd or home) if strict else ()
    return Resolved(
        sandbox=sandbox,
        home=home,
        mounts=tuple(mounts),
        command=command,
        opened=opened,
        installation=installation_of(command) if strict else None,
        covered=covered,
        built=tuple(others_view(p) for p in BUILT) if strict and os.geteuid() == 0 else (),
    )


def strict_problem(sandbox: Sandbox, command: str, cwd: str | None) -> str | None:
    """Why a strict server could not start in its sandbox, as its start would find:
    its command (found), what the kernel opens to run it, or its working directory (its
    home unless ``cwd``) outside what the sandbox shows (``strict_view``). None at
    another level, or its command no longer a regular file by the time it is read.
    Nothing is made (its home, what is hidden). Raises SandboxError for a grant that
    does not exist or that leads where no grant may (``grants``)."""
    if sandbox.level != "strict":
        return None
    home = os.path.realpath(sandbox.home)
    roots = strict_roots(_system(), grants(sandbox), home)
    workdir = cwd or home
    try:
        opened = opened_by(command, workdir)
    except OSError as exc:
        return f"{sandbox.where}: {exc.strerror}"
    return unseen(sandbox.where, command, opened, workdir, roots, installation_of(command))


def _needs(sandbox: Sandbox, command: str, cwd: str) -> list[Needed]:
    """What the server needs that no link at a hidden name may hide: its command, where
    it is found (a virtualenv's ``bin/python`` is a link into the system) and where the
    link leads, and its working directory; each with its name in the config when a
    link on the way leads elsewhere."""
    folder = os.path.realpath(os.path.dirname(command))
    found = [os.path.join(folder, os.path.basename(command)), os.path.realpath(command)]
    needs = [_need(p, command, f"the command of {sandbox.where}") for p in dict.fromkeys(found)]
    workdir = cwd or sandbox.home
    where = f"the working directory of {sandbox.where}"
    return [*needs, _need(os.path.realpath(workdir), workdir, where)]


def _need(real: str, given: str, what: str) -> Needed:
    linked = real != os.path.normpath(os.path.abspath(given))
    return Needed(real, what, given if linked else None)


def make_to_hide(paths: tuple[str, ...]) -> None:
    for path in paths:
        # One that cannot be made (its parent is missing, or it is there already) is
        # hidden as it is, or was never there to be used; a name another user holds
        # hides nothing, and ``anchors`` says whose it is.
        with contextlib.suppress(OSError):
            os.mkdir(path, 0o700)


def grants(sandbox: Sandbox, hidden: Sequence[Hidden] | None = None) -> list[Mount]:
    """Its ``read`` and ``write`` grants as they are on this machine, each where it leads
    now. Raises SandboxError naming the first that does not exist, that is the root,
    that reaches the kernel's filesystems (``kernel_places``), or that leads where no
    grant may (``grant_reach``) against what the sandbox hides at this start
    (``hidden``; when not given, as it would be found now)."""
    where = sandbox.where
    found: list[Mount] = []
    if hidden is None:
        hidden = hidden_now(sandbox)
    kernel = kernel_mounts_now() if sandbox.level != "off" and sandbox.read + sandbox.write else []
    for key, paths in (("read", sandbox.read), ("write", sandbox.write)):
        for i, path in enumerate(paths):
            real = os.path.realpath(path)
            if not os.path.exists(real):
                raise SandboxError(f"{where}.{key}[{i}]: {path} does not exist")
            if real == "/":
                # Through a link or a spelling the config could not tell apart from
                # another folder: the whole machine, which no grant gives.
                raise SandboxError(
                    f"{where}.{key}[{i}]: {path} is /, which would give back everything "
                    "the sandbox hides"
                )
            written = os.path.normpath(os.path.abspath(path))
            reach = kernel_reach(real, kernel) if sandbox.level != "off" else None
            if reach is not None:
                raise SandboxError(f"{where}.{key}[{i}]: {kernel_refusal(written, real, reach)}")
            why = overreach(written, real, hidden) if sandbox.level != "off" else None
            if why is not None:
                raise SandboxError(f"{where}.{key}[{i}]: {why}")
            link = written if written != real else None
            found.append(Mount(real, "read" if key == "read" else "write", link))
    return found


def make_home(home: str, where: str) -> str:
    """``home``, and the directory of homes it lies in, made where missing; its real path.
    Raises SandboxError unless each is a directory of mcpd's user's own, no symbolic
    link, that no one else may write: another user's, or a link someone pointed at the
    user's keys, would be bound read-write as the server's home. One that others may
    only read or enter is made private."""
    homes = os.path.dirname(home)
    try:
        # The state directory, where the daemon has not made it already (an embedder).
        os.makedirs(os.path.dirname(homes), 0o700, exist_ok=True)
    except OSError as exc:
        raise SandboxError(f"{where}: cannot make its home {home}: {exc.strerror}") from None
    for directory in (homes, home):
        problem = _own_directory(directory)
        if problem is not None:
            raise SandboxError(f"{where}: cannot make its home {home}: {problem}")
    return os.path.realpath(home)


def _own_directory(directory: str) -> str | None:
    """Why ``directory``, made 0700 if missing, is not a private one of this user's."""
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return exc.strerror
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if os.path.islink(directory):
            return f"{directory} is a symbolic link, which mcpd never makes there"
        return f"{directory}: {exc.strerror}"
    try:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid != os.geteuid():
            return f"{directory} belongs to uid {st.st_uid}, not to mcpd's user"
        if mode & 0o022:
            return f"{directory} can be written by other users (mode {mode:04o})"
        if mode & 0o077:
            os.fchmod(fd, mode & ~0o077)
    finally:
        os.close(fd)
    return None


def command_line(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None,
    sandbox: Sandbox,
    netns: Netns | None = None,
) -> tuple[Plan, str]:
    """The command line that starts ``argv`` in ``sandbox`` (joining ``netns``, made for
    its ``loopback``), and the working directory (its home unless ``cwd``). Raises
    OSError for a command that cannot be found or run (as exec would) and SandboxError
    for a sandbox that cannot be applied."""
    home = make_home(sandbox.home, sandbox.where)
    command = server_program(argv[0], env, cwd, home)
    cwd = cwd or home
    machine = probe(network=not sandbox.network)
    resolved = resolve(sandbox, command, cwd)
    resolved = msgspec.structs.replace(resolved, mounts=tuple(hold(resolved.mounts, sandbox.where)))
    try:
        planned = plan(resolved, argv, machine, cwd, netns)
    except BaseException:
        let_go(resolved.mounts)
        raise
    if not planned.wrapped:
        let_go(resolved.mounts)
    processes = sandbox.limits.processes
    if processes is not None and machine.root and machine.pids_cgroup:
        join = pidgroup.procs_file(sandbox.alias, processes)
        if join is None:
            why = f"{sandbox.limits.key('processes')} is not applied: its pids cgroup was refused"
            gaps = [g for g in (planned.unprotected, why) if g]
            return msgspec.structs.replace(planned, unprotected="; ".join(gaps)), cwd
        planned = msgspec.structs.replace(planned, join=join)
    return planned, cwd
