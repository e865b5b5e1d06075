"""Reading another host's file for ``mcpd import``, with the care ``mcpd serve`` takes
with its own config: what it says becomes commands mcpd runs as its user.

A host file another user owns or may write to (or one reached through their link or
directory) is refused with the owner named, as ``check-config`` refuses such a config:
its commands would be theirs. A path mcpd found itself (``mcpd import HOST``) must be a
regular file; a path the user names may also be a pipe (``<(ssh box cat .mcp.json)``),
read up to the same bound a config has.
"""

from __future__ import annotations

import os
import stat

from ...local.ownership.trusted_path import untrusted_file
from ..tables.model import ConfigError

# As large as mcpd's own config may be; a host's file is a fraction of it.
MAX_HOST_FILE_BYTES = 64 * 1024 * 1024


def read_host_file(path: str, *, named: bool = True) -> str:
    """The text of the host file at ``path``; ``named``: the user gave the path (else
    mcpd found it from a host's name)."""
    try:
        # Opened without waiting: a FIFO with no writer must not hold the open.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError("", f"cannot read {path!r}: {exc.strerror}") from None
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise ConfigError("", f"cannot read {path!r}: it is a directory")
    with open(fd, "rb") as f:
        if stat.S_ISREG(st.st_mode):
            untrusted = untrusted_file(path, st)
            if untrusted is not None:
                raise ConfigError(
                    "", f"host file not trusted: {untrusted}; its servers would run as your user"
                )
        elif not named:
            raise ConfigError("", f"{path!r} is not a regular file")
        else:
            os.set_blocking(fd, True)  # a pipe the user gave: read what it brings
        try:
            data = f.read(MAX_HOST_FILE_BYTES + 1)
        except OSError as exc:
            raise ConfigError("", f"cannot read {path!r}: {exc.strerror}") from None
    if len(data) > MAX_HOST_FILE_BYTES:
        raise ConfigError("", f"{path!r} is larger than {MAX_HOST_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("", f"{path}: not UTF-8 text") from None
