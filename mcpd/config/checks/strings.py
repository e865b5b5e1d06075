"""What the config's strings that reach a system call or the wire may hold.

A command line, an environment, a path or an HTTP header is handed to the kernel or
written on a connection as it is: a character neither can take (a NUL in an argument,
an ``=`` in a variable's name, a line break in a header) would otherwise surface when
the server starts, as a crash of whatever started it. Here each is the config's
error instead, naming the key, so that ``check-config`` reports it, ``serve`` does
not start on it and a reload keeps the config that runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Final

from protocol.http.mcp_headers import is_plain, is_token
from protocol.shown.visible import visible

from ..tables.model import Config, ConfigError
from ..tables.servertable import ServerConfig

NUL = "contains a NUL character, which the system cannot pass on"


def unpassable(text: str) -> str | None:
    """Why the system cannot be given ``text`` (as an argument, a variable, a path),
    or None when it can."""
    if "\0" in text:
        return NUL
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        # A lone surrogate, which JSON's \ud800 escapes can write.
        return "contains a character that has no encoding (a lone surrogate)"
    return None


def _passable(at: str, *texts: str) -> Iterator[ConfigError]:
    for text in texts:
        problem = unpassable(text)
        if problem is not None:
            yield ConfigError(at, problem)
            return


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


_CONTROL_NAMES = {"\0": "a NUL", "\n": "a line feed", "\r": "a carriage return", "\t": "a tab"}


def control_named(text: str) -> str | None:
    """The first control character of ``text`` and where it is, in words that do not
    repeat the text (a secret's own), or None when it holds none."""
    for i, c in enumerate(text):
        if ord(c) < 0x20 or ord(c) == 0x7F:
            name = _CONTROL_NAMES.get(c, f"the control character U+{ord(c):04X}")
            return f"{name} at character {i + 1}"
    return None


def url_errors(at: str, url: str) -> Iterator[ConfigError]:
    """A URL with a control character or a space, which no request line can carry."""
    if _has_control(url) or any(c.isspace() for c in url):
        yield ConfigError(at, "contains a control character or a space (percent-encode it)")


def server_string_errors(where: str, s: ServerConfig) -> Iterator[ConfigError]:
    """The errors of a server's strings that reach its process or its headers (its
    URL's are ``url_errors``, once the URL is read)."""
    if s.command is not None:
        yield from _passable(f"{where}.command", s.command)
    for i, arg in enumerate(s.args):
        yield from _passable(f"{where}.args[{i}]", arg)
    for name, value in s.env.items():
        at = f"{where}.env.{visible(name)}"
        if not name:
            yield ConfigError(f"{where}.env", "a variable name cannot be empty")
        elif "=" in name:
            yield ConfigError(at, 'a variable name cannot contain "="')
        else:
            yield from _passable(at, name, value)
    if s.cwd is not None:
        yield from _passable(f"{where}.cwd", s.cwd)
        if not s.cwd:
            yield ConfigError(f"{where}.cwd", "is empty")
        elif not s.cwd.startswith("/"):
            # Taken as written, it would mean one folder to the check, another to the
            # sandbox, another under systemd.
            yield ConfigError(
                f"{where}.cwd", "must be an absolute path (~ and relative paths are not expanded)"
            )
    for key, paths in (("read", s.read), ("write", s.write)):
        for i, path in enumerate(paths):
            yield from _passable(f"{where}.{key}[{i}]", path)
    for name, value in s.headers.items():
        at = f"{where}.headers.{visible(name)}"
        if not is_token(name):
            yield ConfigError(
                at, "a header name is letters, digits and !#$%&'*+-.^_`|~ only (no spaces)"
            )
        elif value and not is_plain(value):
            yield ConfigError(
                at,
                "a header value is visible ASCII, with spaces or tabs only between "
                "characters (no CR, LF, NUL or other control characters)",
            )


# What the kernel's address of a Unix socket holds of its path, the final NUL apart.
MAX_SOCKET_PATH: Final = 107


def _path_errors(at: str, path: str, *, socket: bool) -> Iterator[ConfigError]:
    """A path the daemon and its clients must find alike, wherever each was started:
    an absolute one (a relative one, or ``~``, would be taken from the working
    directory of each)."""
    if not path:
        yield ConfigError(at, "is empty (leave the key out for the default)")
    elif not path.startswith("/"):
        yield ConfigError(at, "must be an absolute path (~ is not expanded here)")
    elif socket and (too_long := overlong_socket(at, path)) is not None:
        yield too_long


def socket_path_error(at: str, path: str) -> ConfigError | None:
    """The error of a socket path given outside the config (named ``at``), as the
    config's own socket keys are checked; None when it is fit."""
    return next(_path_errors(at, path, socket=True), None)


def overlong_socket(at: str, path: str) -> ConfigError | None:
    """The error of a socket path the kernel cannot bind, named ``at``; None when it fits."""
    size = len(os.fsencode(path))
    if size <= MAX_SOCKET_PATH:
        return None
    return ConfigError(
        at, f"is {size} bytes long; the path of a Unix socket holds at most {MAX_SOCKET_PATH}"
    )


def daemon_string_errors(config: Config) -> Iterator[ConfigError]:
    """The errors of the paths and group names of ``[daemon]`` and the profiles."""
    d = config.daemon
    paths = [("daemon.socket", d.socket, True), ("daemon.state_dir", d.state_dir, False)]
    groups = [(f"daemon.allow_groups[{i}]", g) for i, g in enumerate(d.allow_groups)]
    for name, profile in config.profiles.items():
        paths.append((f"profiles.{name}.socket", profile.socket, True))
        groups += [
            (f"profiles.{name}.allow_groups[{i}]", g) for i, g in enumerate(profile.allow_groups)
        ]
    for at, path, socket in paths:
        if path is not None:
            problems = list(_passable(at, path))
            yield from problems
            if not problems:
                yield from _path_errors(at, path, socket=socket)
    for at, text in groups:
        yield from _passable(at, text)
