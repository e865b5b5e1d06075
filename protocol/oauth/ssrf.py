"""Which URLs the OAuth client may fetch: a guard against server-side request forgery.

An MCP server (or the metadata it points to) chooses the URLs mcpd fetches and
POSTs to: resource metadata, authorization-server metadata, the token endpoint.
A hostile server could aim them at services that trust the local network: a
cloud metadata endpoint on a link-local address, an admin API on the LAN, a
daemon on localhost. So:

* only ``http``/``https``; ``https`` except for loopback hosts: over plain http
  anywhere else the client secret, the assertion and the tokens would cross the
  network in clear, whatever the server's own URL is;
* after resolution (done by the I/O layer, which then connects to exactly the
  addresses checked here), every address must be public, unless the MCP server
  itself is on such an address: a server on loopback is a local development
  setup and may use loopback and private addresses, a server on a private or
  unique-local address may use those. Link-local only for a link-local server.
  Unspecified, multicast and reserved addresses are never fetched.

``FetchPolicy.for_server`` builds the policy from the addresses the MCP server
is at, and grants only what every one of them grants. Whoever runs a server's DNS
chooses those addresses: a name that resolves to a public address and to
127.0.0.1 is a remote server asking to be taken for a local one, so one public
address among them leaves the server only public ones (a server on loopback and
on the LAN gets the LAN, which both would allow).

Which addresses: those its name resolves to when a policy is made (each time one
is needed, for one discovery, login step or token request), and the address of
every connection the server sent a 401 or 403 over (kept by mcpd's
``AuthState``). The second decides most: a challenge's URLs were chosen by
whoever answered on that connection, and no DNS answer made for mcpd's own
lookup (public for the transport, 127.0.0.1 alone a moment later) turns a server
that spoke from a public address into a local one. The lookup alone cannot be
trusted as much, nor dropped: a login can begin before the server has refused
anything, and a refresh makes no connection to it. So ``check_addresses`` also
holds the server's own name to the network its grant came from: a fetch from
its origin (its metadata) whose name now resolves elsewhere is refused, and the
document that names internal URLs cannot come from a public address either."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Final, Literal, TypeAlias

import msgspec

from ..shown.server_urls import display_url
from ..shown.visible import quote
from .errors import BlockedUrl
from .urls import HttpUrl, parse_http_url

AddressClass: TypeAlias = Literal[
    "global",
    "loopback",
    "private",
    "shared",
    "unique-local",
    "link-local",
    "unspecified",
    "multicast",
    "reserved",
]

_WORDS: Final[dict[str, str]] = {"global": "public"}

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4: Final[list[tuple[str, AddressClass]]] = [
    ("127.0.0.0/8", "loopback"),
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "shared"),
    ("169.254.0.0/16", "link-local"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "reserved"),
    ("198.18.0.0/15", "reserved"),
    ("198.51.100.0/24", "reserved"),
    ("203.0.113.0/24", "reserved"),
]
_V6: Final[list[tuple[str, AddressClass]]] = [
    ("::1/128", "loopback"),
    ("::/128", "unspecified"),
    ("fc00::/7", "unique-local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "reserved"),
    ("ff00::/8", "multicast"),
    ("2001:db8::/32", "reserved"),
    ("100::/64", "reserved"),
]
_NETS4: Final = [(ipaddress.IPv4Network(n), c) for n, c in _V4]
_NETS6: Final = [(ipaddress.IPv6Network(n), c) for n, c in _V6]
# Where the IPv4 address is the last 32 bits: IPv4-compatible (::a.b.c.d), mapped
# (::ffff:a.b.c.d), translated (::ffff:0:a.b.c.d) and the NAT64 well-known prefix.
_V4_LAST: Final = (
    ipaddress.IPv6Network("::/96"),
    ipaddress.IPv6Network("::ffff:0:0/96"),
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
    ipaddress.IPv6Network("64:ff9b::/96"),
)
# The local-use NAT64 prefix (RFC 8215), inside which each network picks its own.
_NAT64_LOCAL: Final = ipaddress.IPv6Network("64:ff9b:1::/48")
_ZERO_NET: Final = ipaddress.IPv4Network("0.0.0.0/8")

_LOCAL_CLASSES: Final[frozenset[AddressClass]] = frozenset({"private", "shared", "unique-local"})

# The kinds of address, besides public ones, that a server at an address of each
# kind may have mcpd fetch.
_GRANTS: Final[dict[AddressClass, frozenset[AddressClass]]] = {
    "global": frozenset(),
    "loopback": frozenset({"loopback", *_LOCAL_CLASSES}),
    "private": _LOCAL_CLASSES,
    "shared": _LOCAL_CLASSES,
    "unique-local": _LOCAL_CLASSES,
    "link-local": frozenset({"link-local"}),
    "unspecified": frozenset(),
    "multicast": frozenset(),
    "reserved": frozenset(),
}


def parse_address(value: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(value.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return None


def classify(address: IPAddress | str) -> AddressClass:
    """The kind of network an address belongs to; an IPv6 address that carries an
    IPv4 one (compatible, mapped, translated, NAT64, 6to4, Teredo) is judged by
    that IPv4 address, since a translator or tunnel on the way delivers it there."""
    ip = parse_address(address) if isinstance(address, str) else address
    if ip is None:
        raise ValueError(f"{address!r} is not an IP address")
    if isinstance(ip, ipaddress.IPv4Address):
        return _classify4(ip)
    for net6, kind in _NETS6[:2]:  # ::1 and ::, which lie in the IPv4-compatible range
        if ip in net6:
            return kind
    carried = _carried_v4(ip)
    if carried:
        kinds = [_classify4(v4) for v4 in carried]
        return next((k for k in kinds if k != "global"), "global")
    for net6, kind in _NETS6:
        if ip in net6:
            return kind
    return "global"


def standing(address: IPAddress | str) -> AddressClass:
    """The kind of network an address belongs to where that earns it something
    (loopback or local fetching, plain http): the address itself, never an IPv4
    one it carries, since a translator or tunnel delivers that somewhere else than
    here. Only an IPv4-mapped address (``::ffff:a.b.c.d``) is its IPv4 address:
    that is how a dual-stack socket writes it."""
    ip = parse_address(address) if isinstance(address, str) else address
    if ip is None:
        raise ValueError(f"{address!r} is not an IP address")
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if isinstance(ip, ipaddress.IPv4Address):
        return _classify4(ip)
    return next((kind for net6, kind in _NETS6 if ip in net6), "global")


def _classify4(ip: ipaddress.IPv4Address) -> AddressClass:
    for net4, kind in _NETS4:
        if ip in net4:
            return kind
    return "global"


def _carried_v4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses ``ip`` may stand for; several where it sits in the
    address is the local network's choice."""
    value = int(ip)
    if any(ip in net for net in _V4_LAST):
        return [ipaddress.IPv4Address(value & 0xFFFFFFFF)]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return [ip.teredo[1]]
    if ip in _NAT64_LOCAL:
        # RFC 6052 puts the IPv4 address after a /48, /56, /64 or /96 prefix, skipping
        # bits 64-71; a layout that reads as 0.0.0.0/8 is reading another one's zeros.
        found = [
            ipaddress.IPv4Address(_bits(value, 48, 64) << 16 | _bits(value, 72, 88)),
            ipaddress.IPv4Address(_bits(value, 56, 64) << 24 | _bits(value, 72, 96)),
            ipaddress.IPv4Address(_bits(value, 72, 104)),
            ipaddress.IPv4Address(_bits(value, 96, 128)),
        ]
        return [v4 for v4 in found if v4 not in _ZERO_NET]
    return []


def _bits(value: int, start: int, end: int) -> int:
    """Bits ``start`` to ``end`` (counted from the left) of a 128-bit ``value``."""
    return (value >> (128 - end)) & ((1 << (end - start)) - 1)


def is_loopback_host(host: str) -> bool:
    """``localhost`` (and names under it, RFC 6761) or a literal address of this
    machine's own loopback (not one that carries a loopback address to elsewhere)."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    ip = parse_address(name.strip("[]"))
    return ip is not None and standing(ip) == "loopback"


class FetchPolicy(msgspec.Struct, frozen=True):
    allow_loopback: bool = False
    allow_private: bool = False  # private, shared (CGNAT) and unique-local ranges
    allow_link_local: bool = False

    # The MCP server's host and the kinds of address it is at, for saying why a
    # kind it is partly at is refused.
    server_host: str = ""
    server_classes: tuple[AddressClass, ...] = ()

    @classmethod
    def for_server(cls, server_url: str, server_addresses: Iterable[str]) -> FetchPolicy:
        """The policy for discovery on behalf of the server at ``server_url``, given
        the addresses its host resolves to: what every one of them grants."""
        u = parse_http_url(server_url, "server URL")
        kinds = {standing(a) for a in server_addresses if parse_address(a) is not None}
        literal = parse_address(u.host)
        if literal is not None:
            kinds.add(standing(literal))
        if is_loopback_host(u.host):
            kinds.add("loopback")
        granted = frozenset.intersection(*(_GRANTS[k] for k in kinds)) if kinds else frozenset()
        return cls(
            allow_loopback="loopback" in granted,
            allow_private="private" in granted,
            allow_link_local="link-local" in granted,
            server_host=u.host,
            server_classes=tuple(sorted(kinds)),
        )

    def allows(self, kind: AddressClass) -> bool:
        if kind == "global":
            return True
        if kind == "loopback":
            return self.allow_loopback
        if kind in _LOCAL_CLASSES:
            return self.allow_private
        if kind == "link-local":
            return self.allow_link_local
        return False

    def check_url(self, url: str, what: str) -> HttpUrl:
        """Refuse, before any resolution, a URL that may not be fetched at all."""
        try:
            u = parse_http_url(url, what)
        except ValueError as exc:
            raise BlockedUrl(str(exc)) from None
        loopback = is_loopback_host(u.host)
        if u.scheme != "https" and not loopback:
            raise BlockedUrl(
                f"{what} {quote(display_url(url))} must use https: OAuth speaks plain http "
                "to this machine's loopback only, as anywhere else its secrets and tokens "
                "would cross the network in clear"
            )
        if loopback and not self.allow_loopback:
            raise BlockedUrl(
                f"{what} {quote(display_url(url))} points at this machine (loopback), "
                f"which a remote server may not make mcpd fetch{self._partly('loopback')}"
            )
        literal = parse_address(u.host)
        if literal is not None:
            self._check_one(u.host, literal, what, url)
        return u

    def check_addresses(self, url: str, addresses: Iterable[str], what: str) -> list[str]:
        """The resolved addresses of ``url``'s host, all permitted, or ``BlockedUrl``.

        One refused address refuses the host: a name that resolves both to a
        public and to an internal address is how DNS rebinding starts."""
        u = self.check_url(url, what)
        out: list[str] = []
        for value in addresses:
            ip = parse_address(value)
            if ip is None:
                raise BlockedUrl(f"{what}: {u.host} resolved to {value!r}, not an IP address")
            self._check_one(u.host, ip, what, url)
            if is_loopback_host(u.host) and standing(ip) != "loopback":
                raise BlockedUrl(f"{what}: {u.host} resolved to {ip}, which is not loopback")
            self._check_server_stays(u.host, ip, what, url)
            out.append(str(ip))
        if not out:
            raise BlockedUrl(f"{what}: {u.host} did not resolve to any address")
        return out

    def _check_one(self, host: str, ip: IPAddress, what: str, url: str) -> None:
        kind = classify(ip)
        if not self.allows(kind):
            raise BlockedUrl(
                f"{what} {quote(display_url(url))}: {host} is at {ip}, a {kind} address, "
                f"which mcpd does not fetch for a server outside that network{self._partly(kind)}"
            )

    def _check_server_stays(self, host: str, ip: IPAddress, what: str, url: str) -> None:
        """The server's own name may not have moved out of the network that earned it
        what it was granted: the grant is for the server there, not for an answer
        that came from elsewhere."""
        if host != self.server_host or not (
            self.allow_loopback or self.allow_private or self.allow_link_local
        ):
            return
        kind = standing(ip)
        if kind not in self.server_classes:
            kinds = " and ".join(_WORDS.get(k, k) for k in self.server_classes)
            raise BlockedUrl(
                f"{what} {quote(display_url(url))}: {host} resolved to {kinds} addresses alone "
                f"when mcpd let it use addresses of that network, and now to {ip}, a "
                f"{_WORDS.get(kind, kind)} address; mcpd does not follow a server's name "
                "from one network to another"
            )

    def _partly(self, kind: AddressClass) -> str:
        """Why a server that is at an address of ``kind`` is still refused it: its
        name resolves to other kinds of address as well."""
        if len(self.server_classes) < 2 or not any(kind in _GRANTS[k] for k in self.server_classes):
            return ""
        kinds = " and ".join(_WORDS.get(k, k) for k in self.server_classes)
        return (
            f" ({self.server_host} resolves to both {kinds} addresses, and a server gets "
            "only what each of its addresses would allow)"
        )
