"""Which of mcpd's own methods a connection held to one profile may use.

A profile's own socket is a boundary, whoever connects on it: an agent of the daemon's
own user given only that socket is held to the profile as any other user's is (and so
is a server's process that ``allow_servers`` lets in). Of mcpd's own methods, such a
connection gets:

- ``mcpd/status``, ``mcpd/profiles``, ``mcpd/auth/status``: of its profile only, as
  ``Profiles.scope`` reads it (its servers, none of the daemon's paths);
- ``mcpd/reset``: of its profile's servers only (and, as anywhere, only for the
  daemon's own user and root);
- ``mcpd/useProfile``, ``mcpd/tools``: its own profile and no other;
- ``mcpd/lineLimit``: as on any socket.

Every other one (reloading the config, logging in to or out of a server, opening a
status page session, the calls that wait for a person and deciding them, what waits
for approval and the pins) acts on or shows the whole daemon, beyond any profile, so
it is refused, saying to ask on the daemon's own socket. An own method added later is
refused too until it is named here.
"""

from __future__ import annotations

from typing import Final

from protocol.jsonrpc import messages as rpc

ON_A_PROFILE: Final = frozenset(
    {
        "mcpd/status",
        "mcpd/profiles",
        "mcpd/auth/status",
        "mcpd/reset",
        "mcpd/useProfile",
        "mcpd/tools",
        "mcpd/lineLimit",
    }
)


def refuse_beyond(profile: str, method: str) -> None:
    """Raises ``rpc.RPCError`` when ``method``, one of mcpd's own, reaches past
    ``profile``, the one the connection is held to."""
    if not method.startswith("mcpd/") or method in ON_A_PROFILE:
        return
    raise rpc.RPCError(
        -32000,
        f"{method} acts on the whole daemon, and this connection is held to the profile "
        f"{profile!r} (a profile's socket, or a server's process let in): the daemon's "
        "user and root ask on mcpd's own socket instead",
    )
