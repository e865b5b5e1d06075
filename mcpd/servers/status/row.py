"""A server's row as readers other than the daemon's own user and root read it. The
row and the other things said of a server are ``mcpd.server_row``'s, where the command
line reads them too."""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from ...server_row import ServerRow


def others_row(row: ServerRow) -> ServerRow:
    """A server's row as any other user reads it: without its stderr, its pid, and its
    home (a path in the state directory) in its sandbox."""
    sandbox = row.sandbox
    if not isinstance(sandbox, UnsetType):
        sandbox = msgspec.structs.replace(sandbox, home=UNSET)
    return msgspec.structs.replace(row, stderr=UNSET, pid=UNSET, sandbox=sandbox)
