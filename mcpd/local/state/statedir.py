"""mcpd's state directory, made private and checked as the daemon starts.

What mcpd keeps there decides whom it believes and what its servers find: the pins and
approvals, OAuth tokens, the endpoint's token, the audit log, the servers' homes. A
directory another user owns or may write (made at the configured path before mcpd
first ran, say in ``/tmp``) would let them read all of it, replace it, or swap a
server's home for a link of their choosing. So mcpd does not start on one, and says
which directory and why: the rule is a config file's (``ownership.trusted_path``), the directory
and every directory and link on the way to it must be mcpd's user's or root's and
writable by nobody else, but for sticky ones on the way such as ``/tmp``.

A missing state directory is made, with whatever is missing above it, 0700 (as XDG
asks of the directories it names). One of this user's that others may read or enter,
as the umask left it, is made 0700 too when all it holds is as mcpd makes its files
(this user's, for nobody else), and the journal says so: the names of the servers,
which files exist and how fast the audit log grows are nobody else's to see, and a
private directory is what mcpd would have made. One that holds anything else (a home
directory named as the state directory, say) is not mcpd's alone to change: the
journal says how to make it private.

No trio here: ``starting.prestart`` makes it ready before the event loop is loaded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat

from ...config.tables.model import EX_CONFIG
from ...starting.cannot_start import DaemonError
from ..ownership.trusted_path import untrusted_file, untrusted_way

logger = logging.getLogger("mcpd.state")

PRIVATE_DIR = 0o700


class UnsafeStateDirectory(DaemonError):
    """Another user could read or change mcpd's state: a place to change, as a config
    error is, so systemd does not start mcpd again on it."""

    exit_code = EX_CONFIG


def state_directory_problem(path: str) -> str | None:
    """Why mcpd would not keep its state at ``path`` (which need not exist yet), or
    None. What ``mcpd serve`` refuses and ``mcpd check-config`` reports."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        why = untrusted_way(path)
    except OSError as exc:
        why = f"cannot look at it: {exc.strerror}"
    else:
        why = untrusted_file(path, st) if stat.S_ISDIR(st.st_mode) else "it is not a directory"
    return None if why is None else f"will not keep its state in {path}: {why}"


def ready_state_directory(path: str) -> None:
    """``path`` made where missing and private, once no other user could have chosen
    what it is; raises ``UnsafeStateDirectory`` saying why not. A directory that cannot
    be made is left to what writes there to report, as before."""
    raise_if_unsafe(state_directory_problem(path))  # before making anything in another's place
    _make_missing(path)
    raise_if_unsafe(state_directory_problem(path))
    with contextlib.suppress(FileNotFoundError):
        _make_private(path)


def raise_if_unsafe(problem: str | None) -> None:
    if problem is not None:
        raise UnsafeStateDirectory(problem)


def _make_missing(path: str) -> None:
    missing = []
    at = os.path.abspath(path)
    while not os.path.lexists(at):
        missing.append(at)
        at = os.path.dirname(at)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE_DIR)
        except FileExistsError:
            continue
        except OSError as exc:
            logger.warning("cannot make the state directory %s: %s", directory, exc.strerror)
            return


def _make_private(path: str) -> None:
    # Its way checked: nobody else can put another directory there meanwhile.
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if not mode & 0o077:
            return
        if st.st_uid != os.geteuid() or not _all_private(fd):
            # root's, for a user's mcpd, or holding what others share: not mcpd's to change.
            logger.warning(
                "the state directory %s can be read by other users (mode %04o); "
                "`chmod go-rwx %s` makes it private",
                path,
                mode,
                path,
            )
            return
        os.fchmod(fd, mode & ~0o077)
        logger.warning(
            "the state directory %s could be read by other users (mode %04o); it is "
            "now private (mode %04o)",
            path,
            mode,
            mode & ~0o077,
        )
    finally:
        os.close(fd)


# Entries looked at before taking a directory for mcpd's own; past it, it is not.
_LOOKED_AT = 1000


def _all_private(fd: int) -> bool:
    """Whether each thing in the directory ``fd`` is as mcpd makes them: this user's,
    for nobody else."""
    uid = os.geteuid()
    with os.scandir(fd) as entries:
        for n, entry in enumerate(entries):
            st = entry.stat(follow_symlinks=False)
            if n >= _LOOKED_AT or st.st_uid != uid or stat.S_IMODE(st.st_mode) & 0o077:
                return False
    return True
