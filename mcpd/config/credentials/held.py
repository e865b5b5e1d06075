"""The secrets a config holds: what must never show in anything mcpd writes or shows.

Two kinds. Every value that came from the environment or a secret file
(``expand``), wherever it is used; and values written in the file itself where the
place says they are secrets: a server's credential headers, its environment variables
named like secrets, its OAuth client secret and key, and what ``exposure`` finds in
its arguments and URL. Values shorter than ``MIN_SECRET`` are left out: they cannot
be told apart from ordinary text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ..loading.expand import MIN_SECRET
from ..tables.model import Config
from .exposure import in_args, in_url, secret_name
from .secrets import HeldSecret

# Headers that carry credentials whatever else they are called.
_CREDENTIAL_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie"})


def credential_header(name: str) -> bool:
    """Whether a header of this name carries a credential (by its name alone)."""
    return name.lower() in _CREDENTIAL_HEADERS or secret_name(name)


def held_in(config: Config, referenced: Iterable[HeldSecret] = ()) -> tuple[HeldSecret, ...]:
    """``referenced``: what ``expand`` collected. One entry per distinct value."""
    found: dict[str, HeldSecret] = {}

    def add(where: str, value: str | None) -> None:
        if value is not None and len(value) >= MIN_SECRET and value not in found:
            found[value] = HeldSecret(where, value)

    for secret in referenced:
        add(secret.where, secret.value)
    for alias, server in config.servers.items():
        where = f"servers.{alias}"
        for name, value in server.headers.items():
            if credential_header(name):
                add(f"{where}.headers.{name}", value)
                # "Bearer TOKEN": the token alone is what a server might echo.
                scheme, space, credential = value.partition(" ")
                if space and scheme.isalpha():
                    add(f"{where}.headers.{name}", credential.strip())
        for name, value in server.env.items():
            if secret_name(name):
                add(f"{where}.env.{name}", value)
        if server.auth is not None:
            add(f"{where}.auth.client_secret", server.auth.client_secret)
            add(f"{where}.auth.private_key", server.auth.private_key)
        for exposed in in_args(server.args):
            assert exposed.index is not None
            arg = server.args[exposed.index]
            add(f"{where}.args[{exposed.index}]", arg[exposed.start : exposed.end])
        if server.url:
            for exposed in in_url(server.url):
                add(f"{where}.url", server.url[exposed.start : exposed.end])
    return tuple(found.values())
