"""What ``mcpd check-config`` finds of the stdio servers' programs from here: the
servers that cannot start, each with every reason it has, and the programs and
directories another user could change."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..config.tables.model import Config
from ..config.tables.servertable import ServerConfig
from ..local.ownership.trusted_path import untrusted_file

__all__ = ["changeable", "unstartable_servers"]

# After why a server's program cannot start: retried with backoff, and at once by a reload.
_UNTIL_FIXED = (
    "the server does not start until that is fixed, when mcpd's next try or a reload starts it"
)


def unstartable_servers(config: Config) -> dict[str, list[str]]:
    """Enabled servers that cannot start from here, each with all it lacks: a variable
    or secret file its table needs, a granted path not there, a ``cwd`` not there, a
    stdio command not found as their start finds it, or, if strict, what the kernel
    opens to run it not shown by its sandbox (``strict_view``). Warnings, not errors:
    a service may run with another environment, and the other servers run."""
    out: dict[str, list[str]] = {}
    for alias, s in sorted(config.servers.items()):
        if s.enabled and s.unresolved is not None:
            # Its other values may be references left as written: nothing more to judge.
            out[alias] = [f"{s.unresolved}; the server will not start"]
        elif s.enabled and s.command is not None:
            problems = _stdio_problems(alias, s, config)
            if problems:
                out[alias] = [f"{p}; {_UNTIL_FIXED}" for p in problems]
    return out


def _stdio_problems(alias: str, s: ServerConfig, config: Config) -> list[str]:
    from transports.stdio.process.launch import not_in_workdir, server_program
    from transports.stdio.sandbox.host import grants, strict_problem
    from transports.stdio.sandbox.plan import SandboxError

    from ..config.sandboxing.per_server import child_env, sandbox_of

    assert s.command is not None
    problems: list[str] = []
    sandbox = sandbox_of(alias, s, config)
    try:
        grants(sandbox)
    except SandboxError as exc:
        problems.append(str(exc))
    env = child_env(alias, s, config, sandbox)
    cwd = s.cwd
    if cwd is not None and not os.path.isdir(cwd):
        problems.append(f"servers.{alias}.cwd: {cwd!r}: No such file or directory")
        if "/" in s.command and not os.path.isabs(s.command):
            return problems  # taken from the cwd that is not there: nothing to look for
        cwd = None  # the command is found the same from anywhere
    try:
        program = server_program(s.command, env, cwd, sandbox.home)
    except OSError as exc:
        why = not_in_workdir(s.command, cwd, sandbox.home)
        if not isinstance(exc, FileNotFoundError) or why is None:
            why = exc.strerror
        problems.append(f"servers.{alias}.command: {exc.filename!r}: {why}")
        return problems
    unseen = strict_problem(sandbox, program, s.cwd) if cwd == s.cwd else None
    if unseen is not None:
        problems.append(unseen)
    return problems


def changeable(config: Config, unstartable: Mapping[str, list[str]]) -> list[str]:
    """Stdio servers whose program, a directory searched for it before it was found,
    a script it is given, or whose ``cwd`` another user could change: they would choose
    what runs as mcpd's user. Warnings: a shared tool kept by another user may be
    meant."""
    from transports.stdio.process.launch import server_program

    from ..config.sandboxing.per_server import child_env, sandbox_of

    out: list[str] = []
    for alias, s in sorted(config.servers.items()):
        if not s.enabled or s.command is None or alias in unstartable:
            continue
        sandbox = sandbox_of(alias, s, config)
        env = child_env(alias, s, config, sandbox)
        program = server_program(s.command, env, s.cwd, sandbox.home)
        places = [program]
        # Where it runs, and so where relative names are taken from.
        base = s.cwd or os.path.realpath(sandbox.home)
        if "/" not in s.command:
            searched = env.get("PATH", os.defpath).split(os.pathsep)
            for d in searched:
                found = os.path.join(base, d or ".")
                places.append(found)
                if os.path.join(found, s.command) == program:
                    break
        keys = dict.fromkeys(places, "command")
        if s.cwd is not None:
            keys[s.cwd] = "cwd"
        # The script an interpreter is given (``node /srv/x/index.js``, its first word
        # that is no option) decides as much as the program does; later words are
        # mostly what the server works on, another user's to share.
        first = next(((i, a) for i, a in enumerate(s.args) if not a.startswith("-")), None)
        if first is not None:
            script = os.path.join(base, first[1])
            if os.path.isfile(script):
                keys.setdefault(script, f"args[{first[0]}]")
        for place, key in keys.items():
            try:
                why = untrusted_file(place, os.stat(place))
            except OSError:
                continue  # a directory on PATH that is not there
            if why is not None:
                out.append(
                    f"servers.{alias}.{key}: {why}: whoever can change it chooses what runs "
                    "as mcpd's user"
                )
                break
    return out
