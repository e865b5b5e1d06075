"""The ``mcpd://`` scheme: a server's URI that agents could not otherwise read back
through mcpd is handed to them as ``mcpd://ALIAS/`` followed by that URI, character for
character; what routing a URI an agent sends can find; and what of the servers'
resources one agent's profile shows it (``Sight``)."""

from __future__ import annotations

import abc
from collections.abc import Hashable
from typing import Final

import msgspec

from ...config.tables.model import ALIAS_RE

SCHEME: Final = "mcpd://"


def wrap(alias: str, uri: str) -> str:
    return f"{SCHEME}{alias}/{uri}"


def unwrap_mcpd_uri(uri: str) -> tuple[str, str] | None:
    """``(alias, the server's URI)`` for an ``mcpd://`` URI, else None."""
    if not uri.startswith(SCHEME):
        return None
    alias, sep, rest = uri[len(SCHEME) :].partition("/")
    if not sep or not ALIAS_RE.match(alias):
        return None
    return alias, rest


class Routed(msgspec.Struct, frozen=True):
    alias: str
    uri: str  # as the server knows it


class Ambiguous(msgspec.Struct, frozen=True):
    candidates: list[str]  # the mcpd:// form of each server's URI


class Undecided(msgspec.Struct, frozen=True):
    """Matching the URI against the servers' templates ran out of its budget."""

    steps: int  # what it spent


class Sight(abc.ABC):
    """What one agent's profile shows of the servers' resources: a profile's view
    derives from this, which keeps the views out of the resource table's imports."""

    @abc.abstractmethod
    def has_server(self, alias: str) -> bool: ...

    @abc.abstractmethod
    def admits_resource(self, alias: str, uri: str) -> bool:
        """Whether the profile shows the server ``alias`` and, of it, ``uri`` (a URI
        or a template as the server wrote it)."""

    def rules(self) -> Hashable | None:
        """What its verdicts on the URIs and templates servers list follow from, the
        same for two sights that judge them alike: the resource table keeps them with
        each server's lists by it, so each is judged once while its server lists it
        (None: none is kept)."""
        return None
