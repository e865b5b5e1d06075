"""Starting a child that dies with mcpd, even when mcpd is SIGKILLed; no trio here.

``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child exits, not the
process. ``trio.open_process`` forks from a worker thread that trio retires after a
few idle seconds, which would take every server down with it; so children are
forked from the thread running trio (the main thread), which lives as long as the
daemon, or, for a sandboxed server, from a thread that does nothing else and lives as
long as mcpd or as the server (``sandbox.confined``).

Setting it from a ``preexec_fn`` makes Python fork a full copy of the daemon (no
vfork) and wait for it to exec, with the event loop stopped, for markedly longer than
without. So where util-linux's ``setpriv`` can set it, the child execs
``setpriv --pdeathsig KILL`` and then, through ``sh``, the command, after checking
that mcpd did not die before the signal was armed. The command is looked up here
first, so that a missing or non-executable one is still an OSError naming it.

This module imports nothing of trio so that ``mcpd serve`` can start its stdio servers
before it imports the event loop and the rest of the daemon (``early``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final, NamedTuple

from ..sandbox import confined
from ..sandbox.opened import unrunnable
from ..sandbox.plan import Starter
from .childenv import PARENT_ONLY_VARS as PARENT_ONLY_VARS

_PR_SET_PDEATHSIG = 1
_libc: ctypes.CDLL | None = None
# After setpriv armed the signal: if mcpd died before that, nobody would kill us.
_GUARD = '[ "$PPID" = "$0" ] || exit 1; exec "$@"'
# The same, joining the cgroup whose cgroup.procs is $1 first (``pidgroup``).
_GUARD_JOIN = '[ "$PPID" = "$0" ] || exit 1; echo $$ > "$1" || exit 1; shift; exec "$@"'
_setpriv: list[str | None] = []  # [path or None], once looked up

# Set to a token of its own in each child's environment, which its descendants inherit:
# a helper that calls setsid() leaves the process group and escapes PR_SET_PDEATHSIG,
# but not this, and a stop finds it by it (``strays``).
START_MARK: Final = "MCPD_SERVER_START"


class Launched(NamedTuple):
    """A started child and mcpd's ends of its pipes (-1 for a pipe not asked for);
    ``token`` is its ``START_MARK``; ``started`` its start on ``time.monotonic``."""

    popen: subprocess.Popen[bytes]
    stdin: int
    stdout: int
    stderr: int
    token: str
    started: float


def _armer() -> str | None:
    """The setpriv that takes --pdeathsig, or None."""
    if not _setpriv:
        found = shutil.which("setpriv")
        if found is not None and os.path.exists("/bin/sh"):
            try:
                usage = subprocess.run(
                    [found, "--help"], capture_output=True, text=True, timeout=5
                ).stdout
            except (OSError, subprocess.SubprocessError):
                usage = ""
            if "--pdeathsig" not in usage:
                found = None
        _setpriv.append(found)
    return _setpriv[0]


def resolve_command(command: str, env: Mapping[str, str] | None, cwd: str | None) -> str:
    """The file ``command`` runs, found as exec would (PATH from the child's env,
    relative paths from its working directory). Raises FileNotFoundError or
    PermissionError as the exec itself would have, or an OSError naming what the file
    is when it is no regular file (a FIFO, a device)."""
    if cwd is not None and not os.path.isdir(cwd):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cwd)
    return _found(command, env, cwd or os.getcwd())


def server_program(command: str, env: Mapping[str, str], cwd: str | None, home: str) -> str:
    """The file a server's ``command`` runs, found as its start finds it: a bare name
    on the ``PATH`` of its environment, a relative path from its working directory
    (``workdir``), never from where mcpd or ``mcpd check-config`` was started. A home
    not made yet is looked in as the empty directory it will be; one reached through a
    link (a state directory that is one) is taken at its real path, where its start
    runs the server and its sandbox shows it. Raises OSError as ``resolve_command``."""
    if cwd is not None:
        return resolve_command(command, env, cwd)
    return _found(command, env, workdir(cwd, os.path.realpath(home)))


def workdir(cwd: str | None, home: str) -> str:
    """The directory a server runs in: its ``cwd``, else its home."""
    return cwd or home


def in_workdir(path: str, cwd: str | None, home: str) -> str:
    """A server's ``path`` as it takes it: a relative one from its working directory."""
    return os.path.join(workdir(cwd, home), path)


def not_in_workdir(command: str, cwd: str | None, home: str) -> str | None:
    """Where a relative ``command`` that is not found was looked for, and why there;
    None for a bare name or an absolute path."""
    if "/" not in command or os.path.isabs(command):
        return None
    which = "its cwd" if cwd is not None else "its home, as it has no cwd"
    return (
        f"no such file in its working directory {workdir(cwd, home)} ({which}), "
        "where a relative command is taken from"
    )


def _found(command: str, env: Mapping[str, str] | None, base: str) -> str:
    if "/" in command:
        candidates = [os.path.join(base, command)]
    else:
        path = (os.environ if env is None else env).get("PATH", os.defpath)
        candidates = [os.path.join(base, d or ".", command) for d in path.split(os.pathsep)]
    # As exec looks on PATH: one found that cannot be run is said only when none can.
    refused: OSError | None = None
    for candidate in candidates:
        try:
            mode = os.stat(candidate).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode):
            continue  # a folder of that name is no command, not even a wrong one
        refused = unrunnable(candidate, mode)
        if refused is None:
            if os.access(candidate, os.X_OK):
                return candidate
            refused = PermissionError(errno.EACCES, os.strerror(errno.EACCES), candidate)
    raise refused or FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


def die_with_parent(parent: int, join: str | None = None) -> Callable[[], None]:
    global _libc
    # Loaded here, once, not in each child: between fork and exec the child is a copy
    # of mcpd, and a dlopen there would make mcpd wait for it once per server.
    libc = _libc = _libc or ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would kill us.
        if os.getppid() != parent:
            os._exit(1)
        if join is not None:
            try:
                with open(join, "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                os._exit(1)

    return preexec


def args_file(args: Sequence[str]) -> int:
    """A descriptor to read ``args`` from, as bubblewrap's ``--args FD`` takes them:
    each ended by a NUL. Close-on-exec: only the child it is passed to gets it."""
    fd = os.memfd_create("mcpd-sandbox-args", os.MFD_CLOEXEC)
    try:
        data = b"".join(os.fsencode(arg) + b"\0" for arg in args)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def launch(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdin: bool = True,
    stdout: bool = True,
    stderr: bool = True,
    join: str | None = None,
    starter: Starter = "main",
    sandbox_args: tuple[int, int] | None = None,
    held: Sequence[int] = (),
) -> Launched:
    """Start ``argv`` in its own session and process group, killed if mcpd dies, and
    in the cgroup whose ``cgroup.procs`` is ``join``, if given, before it execs ``argv``;
    from the thread ``starter`` names, so that it is born in what that thread is in
    (``sandbox.confined``): the main thread's children are born as mcpd is. The arguments
    ``argv[from:to]`` of ``sandbox_args`` (bubblewrap's, ``Plan.sandbox_args``) are
    handed over through a descriptor, off the command line every user can read. The
    descriptors ``held`` (``Plan.held``) are handed to it too, and closed here, as it
    starts or fails to.

    Call it from the main thread (see the module docstring). Raises OSError when the
    command cannot be started, also for arguments, a variable or a directory the system
    cannot be given.
    """
    started = time.monotonic()
    ours: list[int] = []
    theirs: list[int | None] = []
    passed: list[int] = []
    token = f"{os.getpid()}-{secrets.token_hex(8)}"
    child_env = dict(os.environ if env is None else env)
    child_env[START_MARK] = token
    try:
        if sandbox_args is not None:
            first, last = sandbox_args
            passed.append(args_file(argv[first:last]))
            argv = [*argv[:first], "--args", str(passed[0]), *argv[last:]]
        _pipes((stdin, stdout, stderr), ours, theirs)
        args, preexec = _armed(argv, env, cwd, join)

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                args,
                stdin=theirs[0],
                stdout=theirs[1],
                stderr=theirs[2],
                env=child_env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=preexec,
                pass_fds=[*passed, *held],
            )

        if starter == "confined":
            popen = confined.confined.run(start)
        elif starter == "keyless":
            popen = confined.keyless.run(start)
        else:
            popen = start()
    except BaseException as exc:
        for fd in ours + theirs:
            if fd is not None and fd >= 0:
                os.close(fd)
        if isinstance(exc, ValueError):
            # What subprocess refuses before any system call: a NUL in an argument, an
            # "=" in a variable's name, a character with no encoding. The command cannot
            # be started, which callers hear of as an OSError, with the reason.
            raise OSError(errno.EINVAL, str(exc)) from None
        raise
    finally:
        for fd in [*passed, *held]:
            os.close(fd)
    for fd in theirs:
        if fd is not None:
            os.close(fd)
    return Launched(popen, ours[0], ours[1], ours[2], token, started)


def _pipes(wanted: tuple[bool, bool, bool], ours: list[int], theirs: list[int | None]) -> None:
    """The pipes for the child's stdin, stdout and stderr, each if ``wanted``: mcpd's
    end put in ``ours`` (-1 for one not wanted) and the child's in ``theirs``, as each
    is made, so that the caller closes those made should a later one fail."""
    for want, child_reads in zip(wanted, (True, False, False), strict=True):
        if not want:
            ours.append(-1)
            theirs.append(None)
            continue
        r, w = os.pipe()
        ours.append(w if child_reads else r)
        theirs.append(r if child_reads else w)


def _armed(
    argv: Sequence[str], env: Mapping[str, str] | None, cwd: str | None, join: str | None
) -> tuple[list[str], Callable[[], None] | None]:
    """What to run for ``argv`` to die with mcpd (and join ``join``'s cgroup first, if
    given), and the ``preexec_fn`` to run it with: ``argv`` behind setpriv and a guard
    where setpriv can arm the signal, else ``argv`` and a function that arms it."""
    armer = _armer()
    if armer is None:
        return list(argv), die_with_parent(os.getpid(), join)
    command = resolve_command(argv[0], env, cwd)
    guard = _GUARD if join is None else _GUARD_JOIN
    args = [armer, "--pdeathsig", "KILL", "--", "/bin/sh", "-c", guard, str(os.getpid())]
    args += [command, *argv[1:]] if join is None else [join, command, *argv[1:]]
    return args, None


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
