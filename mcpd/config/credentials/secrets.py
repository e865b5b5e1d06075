"""``${file:PATH}`` in the config: a secret read from a file instead of the environment.

Environment variables leak into ``/proc/PID/environ``, child processes and crash reports;
a file readable by mcpd's user alone does not. systemd's ``LoadCredential=`` puts such
files in ``$CREDENTIALS_DIRECTORY``, so a relative ``PATH`` is looked up there.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Final

import msgspec

from ...local.ownership.trusted_path import untrusted_file

# Past any real secret (a token, a password, a private key in PEM is a few KiB), and
# short enough that every secret held is searched for in all servers send at C speed
# after a build that takes moments: a larger file is the wrong one (a CA bundle, a log).
SECRET_FILE_LIMIT: Final = 64 * 1024


class HeldSecret(msgspec.Struct, frozen=True):
    """A value mcpd holds that nothing it shows may contain, and where it is held (the
    key path: ``servers.notes.headers.Authorization``)."""

    where: str
    value: str

    def __repr__(self) -> str:
        return f"HeldSecret({self.where!r}, ***)"


class SecretError(Exception):
    """The file cannot be used; the message never contains its content."""


class SecretTooLarge(SecretError):
    """The file is larger than any secret: a mistake in the config (the wrong path),
    not a fact about this machine."""


def read_secret(path: str, env: Mapping[str, str]) -> str:
    """The file's text without its trailing newline (editors and ``echo`` add one)."""
    if not path:
        raise SecretError("${file:...} needs a path")
    if not os.path.isabs(path):
        base = env.get("CREDENTIALS_DIRECTORY")
        if not base:
            raise SecretError(
                f"{path!r} is relative and $CREDENTIALS_DIRECTORY is not set "
                "(give an absolute path, or use systemd's LoadCredential=)" + _unit_hint(env)
            )
        path = os.path.join(base, path)
        if not os.path.exists(path):
            raise SecretError(f"secret file {path!r} does not exist" + _credential_hint(env))
    try:
        # Opened without waiting: a FIFO named by mistake (or on purpose) would hold the
        # config's loading, and a reload with it, until something wrote to it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            # Checked on the open file, so the mode seen is the mode of what is read.
            st = os.fstat(f.fileno())
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                raise SecretError(f"secret file {path!r} is a directory")
            if not stat.S_ISREG(mode):
                raise SecretError(f"secret file {path!r} is not a regular file")
            if mode & stat.S_IROTH:
                raise SecretError(
                    f"secret file {path!r} is readable by every user; "
                    f"run chmod o-r {path} (mcpd refuses secrets anyone can read)"
                )
            # Another user who could write it could have mcpd log in as them, and see
            # what it does with their account.
            untrusted = untrusted_file(path, st)
            if untrusted is not None:
                raise SecretError(f"secret file not trusted: {untrusted}")
            # No more read than can be used: a path to a large file by mistake costs
            # nothing but its error.
            data = f.read(SECRET_FILE_LIMIT + 1)
            if len(data) > SECRET_FILE_LIMIT:
                size = max(st.st_size, len(data))
                raise SecretTooLarge(
                    f"secret file {path!r} holds {size} bytes, more than a secret may "
                    f"({SECRET_FILE_LIMIT} bytes): is it the right file?"
                )
    except FileNotFoundError:
        raise SecretError(f"secret file {path!r} does not exist") from None
    except PermissionError:
        raise SecretError(f"secret file {path!r} is not readable by mcpd's user") from None
    except IsADirectoryError:
        raise SecretError(f"secret file {path!r} is a directory") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretError(f"secret file {path!r} is not UTF-8 text") from None
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


def _credential_hint(env: Mapping[str, str]) -> str:
    # The credentials directory is the one the service was started with, whoever set
    # it: a credential missing from it is added by a restart, never by a reload.
    return _unit_hint(env) or (
        "; the credentials directory is the one mcpd was started with: a credential "
        "added since (systemd's LoadCredential=) is there only once the service is "
        "restarted (`systemctl restart mcpd`), not at a reload"
    )


def _unit_hint(env: Mapping[str, str]) -> str:
    # What a unit passes in is fixed when the service starts: a LoadCredential= just
    # added is not there for a reload, and the user who added it needs to hear that.
    if not (env.get("INVOCATION_ID") or env.get("NOTIFY_SOCKET")):
        return ""
    return (
        "; under systemd, credentials from LoadCredential= and variables from "
        "Environment= take effect at the next `systemctl restart mcpd`, not at a reload"
    )
