"""Files mcpd keeps secrets and decisions in, written by each of their writers, for tests of
who may own them."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import h11

from mcpd.config.importing.convert import Imported
from mcpd.config.importing.write import move_secrets
from mcpd.config.tables.model import NamingConfig
from mcpd.local.pins import pinwriter
from mcpd.local.pins.pinfile import PinKeeper
from mcpd.local.state import statefile
from mcpd.local.state.endpoint_token import write_token
from mcpd.local.state.oauth_store import IssuerRecord, OAuthStore, StoredLogin, encode_login
from mcpd.registry.gating.gate import ListGate
from mcpd.registry.tables.catalog import Catalog
from protocol.mcp import core as mcp
from protocol.oauth import ClientRegistration, Secret, TokenSet


def keeper(path: Path) -> tuple[Catalog, PinKeeper]:
    cat = Catalog(NamingConfig(), ListGate())
    return cat, PinKeeper(str(path), cat.gate.review, cat.rejudge, lambda alias: True)


LOGIN = StoredLogin(server_url="https://tickets.example.com/mcp")


class Writer:
    """One of mcpd's writers of private files: where it writes under a directory, and
    a call that writes there, returning the bytes it wrote."""

    def __init__(
        self, name: str, place: Callable[[Path], Path], write: Callable[[Path], Awaitable[bytes]]
    ) -> None:
        self.name = name
        self.place = place
        self.write = write

    def __repr__(self) -> str:
        return self.name


async def _state(path: Path) -> bytes:
    statefile.write_atomically(str(path), b'{"format": 1, "servers": {}}')
    return b'{"format": 1, "servers": {}}'


async def _token(path: Path) -> bytes:
    write_token(str(path), "fresh-token")
    return b"fresh-token\n"


async def _login(path: Path) -> bytes:
    await OAuthStore(str(path.parent.parent)).save(path.stem, LOGIN)
    return encode_login(LOGIN)


async def _imported_secret(path: Path) -> bytes:
    server = {"command": "x", "env": {"TOKEN": "ghp_secret"}}
    imported = Imported({"github": server}, [], {("servers", "github", "env", "TOKEN"): "T"}, "")
    move_secrets(imported, path.parent)
    return b"ghp_secret\n"


async def _pins(path: Path) -> bytes:
    gate = ListGate()
    Catalog(NamingConfig(), gate).update("notes", [mcp.Tool(name="search", description="x")])
    # Written in pieces, as they are made.
    pinwriter.write_pins(str(path), gate.review.pins.servers, gate.review.unwritten.take(), None)
    written = path.read_bytes()
    assert json.loads(written)["servers"]["notes"]["tools"]["search"]["definition"]
    return written


WRITERS = [
    Writer("state file", lambda d: d / "state" / statefile.FILE_NAME, _state),
    Writer("endpoint token", lambda d: d / "state" / "token", _token),
    Writer("oauth login", lambda d: d / "state" / "oauth" / "tickets.json", _login),
    Writer(
        "imported secret", lambda d: d / "config.secrets" / "github.env.TOKEN", _imported_secret
    ),
    Writer("pin file", lambda d: d / "state" / "pins.json", _pins),
]


def request(**headers: str) -> h11.Request:
    fields = [("Host", "127.0.0.1"), *headers.items()]
    return h11.Request(method="GET", target="/healthz", headers=fields)


URL = "https://tickets.example.com/mcp"


ISSUER = "https://auth.example.com"


def login() -> StoredLogin:
    tokens = TokenSet(
        access_token=Secret("at-123"),
        refresh_token=Secret("rt-456"),
        expires_at=2_000_000_000.0,
        scope=("read",),
        issuer=ISSUER,
        resource=URL,
    )
    reg = ClientRegistration(ISSUER, "client-1", Secret("cs-789"), "client_secret_basic")
    return StoredLogin(
        server_url=URL,
        issuer=ISSUER,
        issuers={ISSUER: IssuerRecord(registration=reg, tokens=tokens)},
    )
