"""Run as ``session_key.py DESCRIPTION PAYLOAD COMMAND...``: joins a new session keyring,
adds a ``user`` key to it, then execs the command, which holds that keyring. Stdlib
only, run by its path."""

from __future__ import annotations

import ctypes
import os
import sys

CALLS = {"x86_64": (250, 248), "aarch64": (219, 217)}
JOIN_SESSION_KEYRING = 1
SESSION_KEYRING = -3


def main(argv: list[str]) -> None:
    keyctl, add_key = CALLS[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(keyctl, JOIN_SESSION_KEYRING, None, 0, 0, 0) < 0:
        sys.exit(f"session_key: cannot join a session keyring: {os.strerror(ctypes.get_errno())}")
    description, payload = argv[0].encode(), argv[1].encode()
    key = libc.syscall(
        add_key, b"user", description, payload, len(payload), ctypes.c_int(SESSION_KEYRING)
    )
    if key < 0:
        sys.exit(f"session_key: cannot add the key: {os.strerror(ctypes.get_errno())}")
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
