"""Whose files and processes mcpd trusts: its own user, root, and the mcpd service's user.

Anything another user owns (a directory mcpd writes secrets into, a token or login it
reads back, a process answering on its socket) could have been put there or changed by
that user, so it is refused with the owner named.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat

# The system unit's RuntimeDirectory=: systemd makes it for the unit's User=.
SERVICE_DIR = "/run/mcpd"
# The unit's User=, as systemd-sysusers makes it (systemd/mcpd.sysusers).
SERVICE_USER = "mcpd"


def service_uids() -> frozenset[int]:
    """The mcpd service's user: the owner of ``SERVICE_DIR``, which systemd gives to the
    unit's User=, and the system user named ``SERVICE_USER``. Only root can make a
    directory in a /run that nobody else may write, or a user, so root chose both."""
    found: set[int] = set()
    try:
        parent = os.stat(os.path.dirname(SERVICE_DIR))
        st = os.stat(SERVICE_DIR)
    except OSError:
        pass
    else:
        if parent.st_uid == 0 and not parent.st_mode & 0o022 and stat.S_ISDIR(st.st_mode):
            found.add(st.st_uid)
    with contextlib.suppress(KeyError):
        found.add(pwd.getpwnam(SERVICE_USER).pw_uid)
    return frozenset(found)


def trusted_owners() -> frozenset[int]:
    """Who may own what mcpd trusts: this process's user, root, the service's user."""
    return frozenset({os.geteuid(), 0}) | service_uids()


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no user name"


def trusted_names() -> str:
    """``trusted_owners()`` in words, for a refusal."""
    mine = os.geteuid()
    names = ["root"] if mine == 0 else [f"you (uid {mine})", "root"]
    names.append("the mcpd service user")
    return ", ".join(names[:-1]) + " or " + names[-1]


def not_trusted(what: str, uid: int) -> str:
    """Why ``what``, owned by ``uid``, is not trusted."""
    return f"{what} belongs to uid {uid} ({user_name(uid)}), not to {trusted_names()}"
