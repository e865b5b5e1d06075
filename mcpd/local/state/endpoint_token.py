"""The bearer token of the HTTP endpoint: one line in ``token`` in the state directory.

Created on first use (mode 0600, like the directory's other files, so only the daemon's
user and root can read it; see ``privatefile``), printed by ``mcpd token``, replaced by
``mcpd token --rotate``. A token file other users can read counts as known to them:
the daemon replaces it when it starts (``renew_exposed``). The daemon reads it again
whenever the file changes, so a rotation takes effect with the next request and the
old token stops working at once.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from typing import Final

from ...config.tables.model import EX_CONFIG
from ...starting.cannot_start import DaemonError
from ..ownership.owners import service_uids
from .privatefile import UnsafeFileError, read_private, write_atomically

FILE_NAME: Final = "token"
_BYTES: Final = 32  # 256 bits, 43 characters of URL-safe base64


class TokenError(Exception):
    """The token file cannot be read or written; the message says why."""


class UnusableToken(DaemonError):
    """The endpoint's token file cannot be used as the daemon starts: a file to repair,
    as a config error is, so systemd does not start mcpd again and again on it."""

    exit_code = EX_CONFIG


@contextlib.contextmanager
def usable_at_start() -> Iterator[None]:
    """A ``TokenError`` raised within stops ``mcpd serve`` with its message alone."""
    try:
        yield
    except TokenError as exc:
        raise UnusableToken(f"HTTP endpoint: {exc}") from None


def token_path(state_dir: str) -> str:
    return os.path.join(state_dir, FILE_NAME)


def new_token() -> str:
    return secrets.token_urlsafe(_BYTES)


def write_token(path: str, token: str | None = None) -> str:
    """Replace the token (a new random one unless given); returns it."""
    token = token or new_token()
    directory = os.path.dirname(path) or "."
    try:
        owner = None
        if os.geteuid() == 0 and os.path.isdir(directory):
            # root rotating the service's token: the file stays the daemon's to read. No
            # one else's: a directory of another user is refused before anything is written.
            st = os.stat(directory)
            if st.st_uid in service_uids():
                owner = (st.st_uid, st.st_gid)
        write_atomically(path, token.encode() + b"\n", owner=owner)
    except OSError as exc:
        raise TokenError(f"cannot write the token to {path}: {exc.strerror or exc}") from None
    return token


def stored_token(path: str) -> str:
    """The token in ``path``, or "" when there is none yet (no file, or an empty one).
    A token file another user could have written is refused: they would know it."""
    fix = f"remove it (rm {path}) and run `mcpd token` as the daemon's user to make a new one"
    try:
        found = read_private(path, fix)
    except UnsafeFileError as exc:
        raise TokenError(str(exc)) from None
    except OSError as exc:
        raise TokenError(f"cannot read the token in {path}: {exc.strerror or exc}") from None
    if found is None:
        return ""
    token = found[0].strip()
    damage = _not_a_token(token)
    if damage is not None:
        raise TokenError(
            f"cannot read the token in {path}: it holds {damage}, not a token; "
            "`mcpd token --rotate` writes a new one"
        )
    return token.decode("ascii")


def _not_a_token(token: bytes) -> str | None:
    """What in ``token`` no bearer token has (each is sent in a header as it is), or None."""
    for at, byte in enumerate(token):
        if not 0x21 <= byte <= 0x7E:
            what = "a space" if byte == 0x20 else f"the byte {byte:#04x}"
            return f"{what} at offset {at}"
    return None


def renew_exposed(path: str) -> str | None:
    """Replace a token file that other users can read with a new token (0600): what it
    held may be known to them, and tightening its mode would not make it secret again.
    Why it was replaced (or could not be), to log; None when it is private or missing."""
    try:
        st = os.lstat(path)
    except OSError:
        return None  # missing: made at first use; unreadable: said when it is read
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & (stat.S_IRGRP | stat.S_IROTH):
        return None
    why = (
        f"the endpoint token in {path} could be read by other users (mode "
        f"{stat.S_IMODE(st.st_mode):04o}), so they may know it"
    )
    try:
        write_token(path)
    except TokenError as exc:
        return f"{why}; it could not be replaced: {exc}"
    return (
        f"{why}: replaced it with a new one (mode 0600); hosts given the old one need the "
        "new one (`mcpd token`, or `mcpd connect` again)"
    )


def read_token(path: str, *, create: bool = True) -> str:
    """The token in ``path``; a missing (or empty) file gets a new one if ``create``."""
    token = stored_token(path)
    if token:
        return token
    if not create:
        raise TokenError(f"no token in {path} yet (`mcpd token` creates one)")
    return write_token(path)


class TokenFile:
    """The current token, re-read when the file's identity or time changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._token = ""

    def current(self) -> str:
        try:
            st = os.stat(self.path)
            seen: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            seen = None
        if seen is None or seen != self._seen or not self._token:
            self._token = read_token(self.path)
            # The file as it was before the read: one replaced since is read at the next call.
            self._seen = seen
        return self._token
