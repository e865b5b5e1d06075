"""Every socket agents reach mcpd on, bound before any server starts.

A server is a stranger's program, and most share the host's loopback and can write
where their user can. Were one to start first, it could bind the HTTP endpoint's port
or a socket path it can reach, and mcpd would exit on finding its place taken, again
at every restart; worse, what agents send there would reach the server instead, the
endpoint's bearer token included, which hosts send with every request. So the agents'
socket (unless systemd passed it one), the profiles' sockets and the HTTP endpoint are
bound before the first server is started (``mcpd serve`` binds them before it starts
servers early, ``prestart``), and a socket mcpd cannot bind stops it before any server
runs. The daemon serves them once its servers have had their first start.

No trio here, and nothing that imports it: see ``prestart``.
"""

from __future__ import annotations

import errno
import ipaddress
import socket as stdsocket
from typing import Final

from ..agents.entry.unix_socket import SocketTaken, UnixBound, bind_unix
from ..config.checks.endpoints import parse_listen
from ..config.checks.socket_access import socket_group
from ..config.loading.paths import state_directory
from ..config.tables.model import Config
from ..config.tables.profiles import ProfileConfig, socket_where
from ..local.state.endpoint_token import token_path
from .cannot_start import DaemonError
from .port_taken import taken_by

# As trio's own listeners: the most the system allows.
_BACKLOG: Final = 0xFFFF


class Listening:
    """What mcpd listens on, bound and not yet served. Each part is taken by what
    serves it, which closes it from then on; ``close`` closes what nobody took."""

    def __init__(self) -> None:
        self.socket: UnixBound | None = None  # None: systemd's, or not bound here
        self.profiles: dict[str, UnixBound] = {}
        self.http: list[stdsocket.socket] = []

    def bind(self, config: Config, socket_path: str | None) -> None:
        """Bind the agents' socket at ``socket_path`` (None: leave it to systemd's),
        the profiles' sockets and the HTTP endpoint; on a failure, close what was
        bound and raise ``DaemonError`` naming the key."""
        try:
            if socket_path is not None:
                group = socket_group(config.daemon.allow_groups)
                self.socket = _bind_own(socket_path, config.socket_mode(), group)
            for name, profile in config.profiles.items():
                if profile.socket is not None:
                    self.profiles[name] = bind_profile(name, profile)
            if config.daemon.http_listen is not None:
                token_file = token_path(state_directory(config.daemon.state_dir))
                self.http = bind_endpoint(config.daemon.http_listen, token_file)
        except BaseException:
            self.close()
            raise

    def take_socket(self) -> UnixBound | None:
        taken, self.socket = self.socket, None
        return taken

    def take_profiles(self) -> dict[str, UnixBound]:
        taken, self.profiles = self.profiles, {}
        return taken

    def take_http(self) -> list[stdsocket.socket]:
        taken, self.http = self.http, []
        return taken

    def close(self) -> None:
        """Close what nobody took, removing the socket files; again is a no-op."""
        socket = self.take_socket()
        if socket is not None:
            socket.close()
        for bound in self.take_profiles().values():
            bound.close()
        for sock in self.take_http():
            sock.close()


def _bind_own(path: str, mode: int, group: int | None) -> UnixBound:
    """The daemon's own socket; taken, the error says how to run this one beside the
    one that listens there."""
    try:
        return bind_unix(path, mode, group)
    except SocketTaken as exc:
        raise SocketTaken(
            f"{exc}: to run this one beside it, give it a socket of its own with --socket "
            "PATH, or MCPD_SOCKET=PATH in the environment (which the commands that talk to "
            "it read too)"
        ) from None


def bind_profile(name: str, profile: ProfileConfig) -> UnixBound:
    try:
        return bind_unix(*socket_where(profile), socket_group(profile.allow_groups))
    except DaemonError as exc:
        raise type(exc)(f"profiles.{name}.socket: {exc}") from None


def bind_endpoint(listen: str, token_file: str | None = None) -> list[stdsocket.socket]:
    """Listening TCP sockets on every address ``listen``'s host stands for. Where the
    port is taken, the error names who holds it; another user's, and the token in
    ``token_file`` is replaced (``port_taken``)."""
    host, port = parse_listen(listen)
    bound: list[stdsocket.socket] = []
    holder = ""
    try:
        for family, kind, proto, _, address in stdsocket.getaddrinfo(
            host, port, type=stdsocket.SOCK_STREAM, flags=stdsocket.AI_PASSIVE
        ):
            try:
                sock = stdsocket.socket(family, kind, proto)
            except OSError as exc:
                if exc.errno == errno.EAFNOSUPPORT:
                    continue  # a name with an IPv6 address on a host without IPv6
                raise
            bound.append(sock)
            # Lets a restart bind while the last run's connections linger in TIME_WAIT;
            # it never lets a second socket listen on the same address and port.
            sock.setsockopt(stdsocket.SOL_SOCKET, stdsocket.SO_REUSEADDR, 1)
            if family == stdsocket.AF_INET6:
                sock.setsockopt(stdsocket.IPPROTO_IPV6, stdsocket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    ip = ipaddress.ip_address(str(address[0]).partition("%")[0])
                    holder = taken_by(ip, port, token_file)
                raise
            sock.listen(_BACKLOG)
        if not bound:
            raise OSError(errno.EAFNOSUPPORT, "no address family of its host is supported")
    except OSError as exc:
        for sock in bound:
            sock.close()
        raise DaemonError(f"daemon.http_listen: cannot listen on {listen}: {exc}{holder}") from None
    return bound
