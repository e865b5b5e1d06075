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
from collections.abc import Callable
from typing import Final

import msgspec

from ..agents.entry.unix_socket import SocketTaken, UnixBound, bind_unix
from ..config.checks.endpoints import is_literal, is_localhost, parse_listen, url_host
from ..config.checks.socket_access import socket_group
from ..config.loading.paths import state_directory
from ..config.tables.model import Config
from ..config.tables.profiles import ProfileConfig, socket_where
from ..local.state.endpoint_token import token_path
from .cannot_start import DaemonError
from .port_taken import taken_by

# As trio's own listeners: the most the system allows.
_BACKLOG: Final = 0xFFFF
# How often a port the kernel chose is tried on each address of the endpoint.
_PORT_TRIES: Final = 8


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


class EndpointAddress(msgspec.Struct, frozen=True):
    """An address the endpoint listens on, as ``bind_plan`` reads ``http_listen``."""

    ip: str
    # Skipped where this machine has no such address (no IPv6): nobody can listen there.
    absent_ok: bool = False


def bind_plan(host: str, resolve: Callable[[str], list[str]]) -> list[EndpointAddress]:
    """The addresses ``http_listen``'s ``host`` is served on; ``resolve`` gives a name's.

    ``localhost`` is both loopback addresses, whatever this machine's resolver says of
    it: browsers take it for loopback on their own and try ``::1`` first, as do clients
    whose resolver gives both. An address it stands for that mcpd left free is another
    local user's to take, and with it the one-time address of ``mcpd dashboard`` and the
    token hosts send. Another name that stands for a loopback address is refused: what
    clients resolve it to may be the address mcpd did not take."""
    if is_literal(host):
        return [EndpointAddress(host)]
    if is_localhost(host):
        return [EndpointAddress("127.0.0.1"), EndpointAddress("::1", absent_ok=True)]
    found = list(dict.fromkeys(resolve(host)))
    loopback = [ip for ip in found if ipaddress.ip_address(ip.partition("%")[0]).is_loopback]
    if loopback:
        raise DaemonError(
            f"daemon.http_listen: {host!r} is a name for the loopback address "
            f"{loopback[0]}, which a client may resolve to the other loopback address, "
            "one mcpd would leave for another local user to take; write the address "
            '("127.0.0.1:PORT" or "[::1]:PORT"), or localhost, which mcpd serves on both'
        )
    return [EndpointAddress(ip) for ip in found]


def _resolve(host: str) -> list[str]:
    return [
        str(address[0])
        for *_, address in stdsocket.getaddrinfo(
            host, None, type=stdsocket.SOCK_STREAM, flags=stdsocket.AI_PASSIVE
        )
    ]


def bind_endpoint(listen: str, token_file: str | None = None) -> list[stdsocket.socket]:
    """Listening TCP sockets on every address ``listen``'s host stands for
    (``bind_plan``), all on one port. Where the port is taken, the error names who
    holds it; another user's, and the token in ``token_file`` is replaced
    (``port_taken``)."""
    host, port = parse_listen(listen)
    try:
        plan = bind_plan(host, _resolve)
    except OSError as exc:
        raise DaemonError(f"daemon.http_listen: cannot listen on {listen}: {exc}") from None
    # A port the kernel chooses is free on the first address; another may hold it on
    # the next, and then the whole plan is tried again on a port of its choosing.
    for _ in range(_PORT_TRIES if port == 0 and len(plan) > 1 else 1):
        try:
            return _bind_all(listen, host, port, plan, token_file)
        except _ChosenPortTaken:
            continue
    raise DaemonError(
        f"daemon.http_listen: cannot listen on {listen}: the kernel found no port free on "
        "each of its addresses"
    )


class _ChosenPortTaken(Exception):
    """The port the kernel chose for the first address is held on another."""


def _bind_all(
    listen: str, host: str, port: int, plan: list[EndpointAddress], token_file: str | None
) -> list[stdsocket.socket]:
    bound: list[stdsocket.socket] = []
    holder = where = ""
    chosen = port
    try:
        for address in plan:
            if not is_literal(host):
                where = f" at {url_host(address.ip)}:{chosen}"
            sock = _bind_one(address, chosen)
            if sock is not None:
                bound.append(sock)
                chosen = int(sock.getsockname()[1])
    except OSError as exc:
        for sock in bound:
            sock.close()
        if exc.errno == errno.EADDRINUSE:
            if bound and port == 0:
                raise _ChosenPortTaken from None
            ip = ipaddress.ip_address(address.ip.partition("%")[0])
            holder = taken_by(ip, chosen, token_file)
        raise DaemonError(
            f"daemon.http_listen: cannot listen on {listen}{where}: {exc}{holder}"
        ) from None
    if not bound:
        raise DaemonError(
            f"daemon.http_listen: cannot listen on {listen}: "
            "no address family of its host is supported"
        )
    return bound


def _bind_one(address: EndpointAddress, port: int) -> stdsocket.socket | None:
    """A socket listening at ``address`` on ``port``; None where this machine has no
    such address family, or no such address and ``absent_ok``."""
    family, kind, proto, _, sockaddr = stdsocket.getaddrinfo(
        address.ip,
        port,
        type=stdsocket.SOCK_STREAM,
        flags=stdsocket.AI_PASSIVE | stdsocket.AI_NUMERICHOST,
    )[0]
    try:
        sock = stdsocket.socket(family, kind, proto)
    except OSError as exc:
        if exc.errno == errno.EAFNOSUPPORT:
            return None  # an IPv6 address on a host without IPv6
        raise
    try:
        # Lets a restart bind while the last run's connections linger in TIME_WAIT;
        # it never lets a second socket listen on the same address and port.
        sock.setsockopt(stdsocket.SOL_SOCKET, stdsocket.SO_REUSEADDR, 1)
        if family == stdsocket.AF_INET6:
            sock.setsockopt(stdsocket.IPPROTO_IPV6, stdsocket.IPV6_V6ONLY, 1)
        sock.bind(sockaddr)
        sock.listen(_BACKLOG)
    except OSError as exc:
        sock.close()
        if address.absent_ok and exc.errno == errno.EADDRNOTAVAIL:
            return None  # no ::1 here: IPv6 turned off on loopback
        raise
    return sock
