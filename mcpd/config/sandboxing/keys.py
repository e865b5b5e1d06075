"""The sandbox's keys in a server's table checked as the config is read: grants, host
loopback ports, limits and sizes (``"512M"``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Final

from protocol.shown.stand_ins import masked_repr

from ..tables.model import ConfigError
from ..tables.servertable import LimitsConfig, ServerConfig

_SIZE_RE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.I)
_UNITS: Final = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# What a limit of the kernel's (an rlim_t) holds, with room for the CPU limit's
# second more before SIGKILL.
MAX_LIMIT: Final = 2**63 - 2


def parse_size(value: int | str) -> int:
    """Bytes from an int or a size such as ``"512M"`` or ``"2GiB"`` (powers of 1024)."""
    if isinstance(value, int):
        if not 0 <= value <= MAX_LIMIT:
            raise ValueError(f"must be 0 (no limit) or a number of bytes, at most {MAX_LIMIT}")
        return value
    m = _SIZE_RE.match(value)
    if m is None:
        raise ValueError(
            f'{masked_repr(value)} is not a size (bytes, or a number with K, M, G or T: "2G")'
        )
    size = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if size > MAX_LIMIT:
        raise ValueError(f"must be at most {MAX_LIMIT} bytes")
    return int(size)


def limits_errors(where: str, limits: LimitsConfig) -> Iterator[ConfigError]:
    if limits.memory is not None:
        try:
            size = parse_size(limits.memory)
        except ValueError as exc:
            yield ConfigError(f"{where}.memory", str(exc))
        else:
            if 0 < size < 16 << 20:
                yield ConfigError(f"{where}.memory", "must be 0 (no limit) or at least 16M")
    for key, value in (
        ("processes", limits.processes),
        ("open_files", limits.open_files),
        ("cpu", limits.cpu),
    ):
        if value is not None and not 0 <= value <= MAX_LIMIT:
            yield ConfigError(
                f"{where}.{key}", f"must be 0 (no limit) or positive, at most {MAX_LIMIT}"
            )
    if limits.open_files is not None and 0 < limits.open_files < 16:
        yield ConfigError(f"{where}.open_files", "must be 0 (no limit) or at least 16")


def grant_errors(where: str, s: ServerConfig) -> Iterator[ConfigError]:
    if s.url is not None:
        for key, value in (("sandbox", s.sandbox), ("read", s.read), ("write", s.write)):
            if value:
                yield ConfigError(
                    f"{where}.{key}", "only applies to stdio servers (with `command`)"
                )
        if not s.network:
            yield ConfigError(f"{where}.network", "only applies to stdio servers (with `command`)")
        if s.host_loopback:
            yield ConfigError(
                f"{where}.host_loopback", "only applies to stdio servers (with `command`)"
            )
        if s.limits != LimitsConfig():
            yield ConfigError(f"{where}.limits", "only applies to stdio servers (with `command`)")
    yield from host_loopback_errors(where, s)
    for key, paths in (("read", s.read), ("write", s.write)):
        for i, path in enumerate(paths):
            if not (path.startswith("/") or path == "~" or path.startswith("~/")):
                yield ConfigError(f"{where}.{key}[{i}]", "must be an absolute path (or ~/...)")
            elif os.path.normpath(path).strip("/") == "" or os.path.normpath(path) == "~":
                yield ConfigError(
                    f"{where}.{key}[{i}]", "would give back everything the sandbox hides"
                )
    if isinstance(s.inherit_env, list):
        for i, name in enumerate(s.inherit_env):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\*?", name):
                yield ConfigError(
                    f"{where}.inherit_env[{i}]", 'must be a variable name or a "PREFIX_*" pattern'
                )
    yield from limits_errors(f"{where}.limits", s.limits)


def loopback_port(value: int | str) -> int:
    """The port of a host loopback grant: ``5432`` or ``"127.0.0.1:5432"``."""
    text = str(value)
    if isinstance(value, str):
        host, sep, text = value.rpartition(":")
        if not sep or host != "127.0.0.1":
            raise ValueError(
                f'{masked_repr(value)} is not a host loopback port (5432 or "127.0.0.1:5432")'
            )
    if not (text.isascii() and text.isdigit()) or not 0 < int(text) < 65536:
        raise ValueError(f"{masked_repr(value)}: a port is a number from 1 to 65535")
    return int(text)


def host_loopback_errors(where: str, s: ServerConfig) -> Iterator[ConfigError]:
    if s.host_loopback and s.network and s.url is None:
        yield ConfigError(
            f"{where}.host_loopback",
            "needs network = false (with a network the host's loopback is reachable already)",
        )
    seen: set[int] = set()
    for i, value in enumerate(s.host_loopback):
        try:
            port = loopback_port(value)
        except ValueError as exc:
            yield ConfigError(f"{where}.host_loopback[{i}]", str(exc))
            continue
        if port in seen:
            yield ConfigError(f"{where}.host_loopback[{i}]", f"port {port} is granted twice")
        seen.add(port)
