"""A stdio server's process: starting it, in its sandbox (or taking the one started
early), and stopping it with everything in its process group."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Sequence

import trio

from protocol.shown.logfields import log_extra

from ...errors import SpawnError
from ...path_identity import PathIdentity
from ..loopback import netns
from ..sandbox.host import command_line, probe
from ..sandbox.plan import Sandbox, SandboxError, Starter
from . import early, pidgroup
from .child import ChildProcess, adopt, signal_group, spawn
from .exits import ProcessEnd
from .launch import not_in_workdir
from .strays import stop_strays

logger = logging.getLogger("mcpd.stdio")
_said_unscoped: list[str] = []


def start(
    alias: str,
    argv: Sequence[str],
    env: dict[str, str],
    cwd: str | None,
    sandbox: Sandbox | None = None,
) -> ChildProcess:
    """Start the server (in its sandbox, when it has one) or take the one started
    early with exactly the same command line. Raises SpawnError."""
    unprotected = join = None
    starter: Starter = "main"
    wrapped = False
    sandbox_args = None
    loopback = None
    covered: tuple[PathIdentity, ...] = ()
    held: tuple[int, ...] = ()
    if sandbox is not None:
        try:
            if sandbox.loopback and sandbox.level != "off":
                loopback = netns.make(sandbox)
            plan, cwd = command_line(
                argv, env, cwd, sandbox, loopback.netns if loopback is not None else None
            )
        except SandboxError as exc:
            if loopback is not None:
                loopback.close()
            raise SpawnError(f"{alias}: cannot start in its sandbox: {exc}") from None
        except OSError as exc:
            if loopback is not None:
                loopback.close()
            raise _spawn_error(alias, argv[0], cwd, exc, sandbox.home) from None
        argv, unprotected, join, starter = plan.argv, plan.unprotected, plan.join, plan.starter
        wrapped, sandbox_args, covered = plan.wrapped, plan.sandbox_args, plan.covered
        held = plan.held
        if wrapped and sandbox.network:
            _say_unscoped()
    refused_before = pidgroup.refused(join) if join is not None else None
    started = early.take(argv, env, cwd)
    try:
        if started is not None:
            for fd in held:  # the early one was handed its own
                os.close(fd)
            proc = adopt(started)
        else:
            proc = spawn(
                argv,
                env=env,
                cwd=cwd,
                join=join,
                starter=starter,
                sandbox_args=sandbox_args,
                held=held,
            )
    except OSError as exc:
        if loopback is not None:
            loopback.close()
        raise _spawn_error(alias, argv[0], cwd, exc) from None
    proc.host_loopback = loopback
    proc.sandbox = sandbox
    proc.wrapped = wrapped
    proc.unprotected = unprotected
    proc.covered = covered
    proc.join = join
    proc.refused_before = refused_before or 0
    return proc


def _say_unscoped() -> None:
    """Once: where the kernel cannot scope a sandbox, its abstract sockets stay open."""
    why = probe().scoping
    if why is None or _said_unscoped:
        return
    _said_unscoped.append(why)
    logger.warning(
        "sandboxed servers that share the host's network can still connect to its "
        "abstract Unix sockets (an X server's, a D-Bus bus at an abstract address): %s",
        why,
        extra=log_extra(None, "sandbox_unscoped", why),
    )


def _spawn_error(
    alias: str, command: str, cwd: str | None, exc: OSError, home: str | None = None
) -> SpawnError:
    """What a start that failed with ``exc`` says; ``home``: the server's home, where a
    relative command is looked for when it has no ``cwd``."""
    what = f"{alias}: cannot start {command!r}"
    if isinstance(exc, FileNotFoundError):
        if cwd and not os.path.isdir(cwd):
            return SpawnError(f"{what}: working directory {cwd!r} not found")
        looked = not_in_workdir(command, cwd, home) if home is not None else None
        return SpawnError(f"{what}: {looked or 'command not found'}")
    if isinstance(exc, PermissionError):
        return SpawnError(f"{what}: permission denied (not executable?)")
    return SpawnError(f"{what}: {exc.strerror or exc}")


async def stop_process(
    proc: ChildProcess, alias: str, *, stdin_grace: float, term_grace: float
) -> None:
    """Close stdin, wait, SIGTERM the group, wait, SIGKILL the group.

    In a sandbox the group is bubblewrap's too, which SIGTERM would end, and the whole
    sandbox with it before the server could do what it does on SIGTERM: there the
    server's own process gets it (a helper it started goes with its sandbox)."""
    with contextlib.suppress(Exception):
        await proc.stdin.aclose()  # type: ignore[union-attr]
    with trio.move_on_after(stdin_grace):
        await proc.wait()
    if proc.returncode is None:
        if proc.wrapped:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.command_pid(), signal.SIGTERM)
        else:
            signal_group(proc.pid, signal.SIGTERM)
        with trio.move_on_after(term_grace):
            await proc.wait()
    if proc.returncode is None:
        logger.warning(
            "%s: still running %g s after SIGTERM; sending SIGKILL to its process group",
            alias,
            term_grace,
            extra=log_extra(alias, reason="ignored SIGTERM"),
        )
    # Also after a clean exit: whatever the server left in its group goes too.
    signal_group(proc.pid, signal.SIGKILL)
    with trio.move_on_after(term_grace):
        await proc.wait()


async def stop_leftovers(process: ChildProcess, alias: str, term_grace: float) -> None:
    """After its process group: what is left of a server has moved out of the group."""
    await stop_strays(alias, process.token, process.pid, term_grace)
    if process.join is not None:
        # What is left there found no other way out: its cgroup holds it.
        pidgroup.kill_left(process.join)
        pidgroup.release(process.join)


def ending(proc: ChildProcess) -> ProcessEnd:
    """What the kernel kept of the server's end: its cgroup's counts, where it has one."""
    if proc.join is None:
        return ProcessEnd(lived=proc.lived)
    refused = pidgroup.refused(proc.join)
    return ProcessEnd(
        refused_forks=None if refused is None else refused - proc.refused_before,
        cpu_seconds=pidgroup.cpu_seconds(proc.join),
        lived=proc.lived,
    )
