"""Where the daemon's socket is: the one rule the daemon and every client command follow.

The daemon (``mcpd serve``, and ``starting.prestart``, which checks before the daemon is
up whether another one already listens there) listens on ``--socket``, else
``$MCPD_SOCKET``, else the config's ``[daemon] socket``, else under systemd the socket
it gives (``systemd_socket``: mcpd.socket's ``/run/mcpd/mcpd.sock``), else
``default_socket_path()``: the flag, then the environment, then the file, the order the
clients follow too, so one ``$MCPD_SOCKET`` set for both always brings them together.

A client command connects to ``--socket``, else ``$MCPD_SOCKET``, else the ``[daemon]
socket`` of the config file ``default_config_path()`` names (``$MCPD_CONFIG`` or the
standard path), else ``default_socket_path()``. So a daemon started with the config
every client reads, or with ``$MCPD_SOCKET`` set for both, is found without
``--socket``. The client only reads that one key, and anything wrong with the file
(missing, not TOML, a ``${VAR}`` its environment lacks) means the default path:
finding the socket must never be what fails a command.

No trio here, and nothing that imports it: ``starting.prestart`` runs before trio is
loaded, and every client command looks here.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import os
import socket
import stat
from collections.abc import Mapping

from ..tables.model import MAX_CONFIG_BYTES, ConfigError, default_config_path, default_socket_path

SOCKET_VAR = "MCPD_SOCKET"
SOCKET_FILE = "mcpd.sock"  # its name in the unit's RuntimeDirectory=
API_FDNAME = "api"  # FileDescriptorName= of the agents' socket in mcpd.socket
_LISTEN_FDS_START = 3


def runtime_directory(env: Mapping[str, str] | None = None) -> str | None:
    """The unit's RuntimeDirectory= (the first, if there are several), or None."""
    env = os.environ if env is None else env
    return env.get("RUNTIME_DIRECTORY", "").split(":")[0] or None


def systemd_socket(env: Mapping[str, str] | None = None) -> str | None:
    """The agents' socket systemd gives mcpd: the path of the Unix socket it passes
    (mcpd.socket's, named ``api``, else the first), else ``mcpd.sock`` in the unit's
    RuntimeDirectory=; None when it gives neither."""
    env = os.environ if env is None else env
    passed: list[tuple[str, str]] = []
    if env.get("LISTEN_PID") == str(os.getpid()) and env.get("LISTEN_FDS", "").isdigit():
        names = env.get("LISTEN_FDNAMES", "").split(":")
        for i in range(int(env["LISTEN_FDS"])):
            address = _unix_address(_LISTEN_FDS_START + i)
            if address is not None:
                passed.append((names[i] if i < len(names) else "", address))
    passed.sort(key=lambda entry: entry[0] != API_FDNAME)
    if passed:
        return passed[0][1]
    runtime = runtime_directory(env)
    return os.path.join(runtime, SOCKET_FILE) if runtime else None


def _unix_address(fd: int) -> str | None:
    """The path a Unix socket at ``fd`` is bound to, looked up on a copy of it (the
    socket itself is the daemon's to adopt); None for anything else."""
    try:
        copy = os.dup(fd)
    except OSError:
        return None
    try:
        sock = socket.socket(fileno=copy)
    except OSError:
        os.close(copy)
        return None
    with sock, contextlib.suppress(OSError):
        address = sock.getsockname()
        if sock.family == socket.AF_UNIX and isinstance(address, str) and address:
            return address
    return None


def daemon_socket_path(
    explicit: str | None,
    configured: str | None,
    *,
    systemd: str | None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Where ``mcpd serve`` listens. ``systemd``, the socket systemd gives
    (``systemd_socket``), is passed rather than read: the daemon reads systemd's
    variables once and then removes them from its environment."""
    env = os.environ if env is None else env
    named = explicit or env.get(SOCKET_VAR)  # the command line's, else the environment's
    if named:
        return named
    if configured:
        return configured
    if systemd:
        # The default path for the service's uid is not where mcpd.socket and clients look.
        return systemd
    return default_socket_path(env)


def client_socket_path(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """Where a client command looks for the daemon."""
    env = os.environ if env is None else env
    named = explicit or env.get(SOCKET_VAR)  # the command line's, else the environment's
    if named:
        return named
    return configured_socket(default_config_path(env), env) or default_socket_path(env)


def configured_socket(path: str, env: Mapping[str, str] | None = None) -> str | None:
    """The ``[daemon] socket`` the config file at ``path`` names, or None when it names
    none or cannot be read: a bad config is the daemon's to report when it starts; a
    client only looks elsewhere."""
    env = os.environ if env is None else env
    data = _config_table(path)
    if isinstance(data, str):
        return None
    daemon = data.get("daemon")
    socket = daemon.get("socket") if isinstance(daemon, dict) else None
    if not isinstance(socket, str) or not socket:
        return None
    if "$" not in socket:
        return socket
    from .expand import expand  # the daemon expands ${VAR} in it: so must the client

    try:
        return expand(socket, "daemon.socket", env) or None
    except ConfigError:
        return None


def config_unread(path: str) -> str | None:
    """Why the config file at ``path`` gave no ``[daemon]`` table to look in, as a
    sentence's end: it "could not be read (...)" or "could not be read as TOML (...)";
    None when it could be, or is another host's JSON file."""
    data = _config_table(path)
    return data if isinstance(data, str) else None


def _config_table(path: str) -> dict[str, object] | str:
    """The config file at ``path`` as TOML (empty for another host's JSON file, which
    has no ``[daemon]`` table), or why it is none. A command that looks for its socket
    there and then says why it found none reads the file once: as the same file, by
    its inode, size and time of change."""
    try:
        st = os.stat(path)
    except OSError:
        return _read_config_table(path, None)
    return _read_config_table(path, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))


@functools.lru_cache(maxsize=1)
def _read_config_table(
    path: str, version: tuple[int, int, int, int] | None
) -> dict[str, object] | str:
    text = _config_bytes(path)
    if isinstance(text, str):
        return f"could not be read ({text})"
    if path.endswith(".json") or text.lstrip()[:1] == b"{":
        return {}
    import tomllib  # only now: a command given --socket does without it

    try:
        return tomllib.loads(text.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        why = str(exc)
    except UnicodeDecodeError:
        why = "not UTF-8 text"
    except RecursionError:
        why = "nested too deeply"
    return f"could not be read as TOML ({why})"


def _config_bytes(path: str) -> bytes | str:
    """What the config file at ``path`` holds, or why it could not be read. Only a
    regular file is read, opened without waiting, and only as much as the daemon
    reads: a FIFO would hold every client command until something wrote to it, and a
    device such as /dev/zero never ends."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return "not a regular file"
            text = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        return exc.strerror or str(exc)
    if len(text) > MAX_CONFIG_BYTES:
        return f"larger than {MAX_CONFIG_BYTES} bytes"
    # Some editors start UTF-8 text with a byte order mark, which the daemon reads past.
    return text.removeprefix(codecs.BOM_UTF8)


def state_directory(configured: str | None, env: Mapping[str, str] | None = None) -> str:
    """``[daemon] state_dir`` (``configured``), else systemd's StateDirectory=, else the
    XDG state home (``/var/lib/mcpd`` for root without one)."""
    env = os.environ if env is None else env
    if configured:
        return configured
    systemd = env.get("STATE_DIRECTORY")
    if systemd:
        return systemd.split(":")[0]  # several directories are colon-separated
    if env.get("XDG_STATE_HOME"):
        return os.path.join(env["XDG_STATE_HOME"], "mcpd")
    if os.geteuid() == 0:
        return "/var/lib/mcpd"
    return os.path.join(env.get("HOME", "/"), ".local", "state", "mcpd")


def found_state_directory(configured: str | None, env: Mapping[str, str] | None = None) -> str:
    """``state_directory`` as it is found now, every symbolic link on its way followed:
    where the daemon, which finds it once as it starts, keeps its state for its whole
    run, wherever such a link is pointed later (a server could point one at a
    directory of its own)."""
    return os.path.realpath(state_directory(configured, env))


def pages_directory() -> str:
    """Where the daemon has ``mcpd dashboard`` and ``mcpd auth login`` put the page they
    hand a browser: ``$XDG_RUNTIME_DIR/mcpd-pages``, else ``/tmp/mcpd-pages-UID``, in
    the daemon's environment, not the command's, so that it is among the
    ``pages_directories`` the daemon hides from servers."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and os.path.isdir(runtime):
        return os.path.join(runtime, "mcpd-pages")
    return _pages_in_tmp()


def pages_directories(env: Mapping[str, str] | None = None) -> list[str]:
    """Every place ``pages_directory`` may be for this user, as the daemon sees it:
    the runtime directory's (``/run/user/UID`` where the variable is unset) and the
    temporary one."""
    env = os.environ if env is None else env
    runtime = env.get("XDG_RUNTIME_DIR") or f"/run/user/{os.geteuid()}"
    return [os.path.join(runtime, "mcpd-pages"), _pages_in_tmp()]


def _pages_in_tmp() -> str:
    return f"/tmp/mcpd-pages-{os.geteuid()}"
