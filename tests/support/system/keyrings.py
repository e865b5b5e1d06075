"""The kernel's keyrings from a test: whether a process may use them at all, and a
command run with a key of the test's in a session keyring of its own (as a login's
pam_keyinit or a user manager gives one), so that the test runner's is left alone."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Final

# keyctl and add_key on this machine.
KEYCTL, ADD_KEY = {"x86_64": (250, 248), "aarch64": (219, 217)}.get(os.uname().machine, (0, 0))
KNOWN: Final = KEYCTL != 0

# Prints "refused" when asking for its session keyring's id fails with EPERM, else
# "allowed" (and the id, or the error).
PROBE: Final = f"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
got = libc.syscall({KEYCTL}, 0, ctypes.c_int(-3), 0)
err = ctypes.get_errno()
print("refused" if got < 0 and err == errno.EPERM else f"allowed {{got}} {{err}}")
"""

_STEP: Final = Path(__file__).with_name("session_key.py")


def with_session_key(description: str, payload: str) -> tuple[str, ...]:
    """The command line that runs what follows it with a new session keyring of its own
    holding a ``user`` key."""
    return (sys.executable, str(_STEP), description, payload)
