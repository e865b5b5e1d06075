"""Secrets mcpd holds that end up in a stdio server's arguments.

``exposure`` judges an argument by its text: the name of the option before it, the
format of a token. A value that has neither (a random key read with ``${file:PATH}``,
or from a variable named like a secret) passes those rules, yet mcpd knows it is a
secret: it holds it as one. Put in an argument, it is on the server's command line
all the same, which every local user can read. Said once an argument, naming the
server and the argument's position, never the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..credentials.exposure import in_args
from ..credentials.secrets import HeldSecret
from ..tables.model import Config


def held_in_args(
    alias: str, args: Sequence[str], held: Iterable[HeldSecret], command: str | None = None
) -> list[str]:
    """One warning per argument of ``alias`` that holds a secret of ``held`` which the
    rules of ``exposure`` do not already point at there."""
    flagged = in_args(args, command)
    secrets = list(held)
    out = []
    for i, arg in enumerate(args):
        spans = [(f.start, f.end) for f in flagged if f.index == i]
        for secret in secrets:
            start = arg.find(secret.value)
            if start < 0 or _covered(start, start + len(secret.value), spans):
                continue
            out.append(_warning(alias, i, secret.where))
            break
    return out


def _covered(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(s < end and start < e for s, e in spans)


def _warning(alias: str, index: int, where: str) -> str:
    at = f"servers.{alias}.args[{index}]"
    # A reference in this very argument is held under its own key path; a value held
    # elsewhere (a header, an env variable) written here too is named by that key.
    what = "a secret that a ${...} reference puts there" if where == at else f"{where}'s secret"
    return (
        f"{at}: {what} is on the server's command line, which every local user can "
        "read (ps, /proc/PID/cmdline); if the program can take it from an environment "
        f"variable, set that in [servers.{alias}.env] instead (the same reference works "
        "there)"
    )


def secrets_in_args(config: Config) -> list[tuple[str, str]]:
    """``(alias, warning)`` for each stdio server's argument holding a secret the
    config holds, in the order of the servers' aliases."""
    return [
        (alias, warning)
        for alias, server in sorted(config.servers.items())
        if server.command is not None
        for warning in held_in_args(alias, server.args, config.held_secrets, server.command)
    ]
