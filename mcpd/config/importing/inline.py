"""Secrets written inside an imported server's arguments or URL (see ``exposure``):
each literal one is taken out of the config ``mcpd import`` writes, behind a
reference, and mcpd puts it back where it was when it starts the server."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from protocol.jsonrpc import messages as rpc

from ..credentials import exposure


class Inline(msgspec.Struct, frozen=True):
    """A secret written inside an argument or a URL, which a reference replaces."""

    # ("servers", alias, "args[3]"), or with the secret's name after it when the
    # argument holds more than one; ("servers", alias, "url", NAME)
    where: tuple[str, ...]
    alias: str
    index: int | None  # the argument; None: the URL
    start: int
    end: int
    var: str  # the variable that will carry it

    def value_in(self, table: rpc.JsonObject) -> str:
        """The string that holds it, in the server's ``table``."""
        return table_text(table, "url") if self.index is None else table_args(table)[self.index]


def table_text(table: rpc.JsonObject, key: str) -> str:
    """The string at ``key`` of a server's table, "" where there is none."""
    value = table.get(key)
    return value if isinstance(value, str) else ""


def table_args(table: rpc.JsonObject) -> list[str]:
    """A server's arguments, as strings at the places they hold."""
    args = table.get("args")
    return [a if isinstance(a, str) else "" for a in args] if isinstance(args, list) else []


def inline_secrets(
    alias: str, table: rpc.JsonObject, var_for: Callable[[str, str], str]
) -> tuple[list[Inline], list[str]]:
    """The literal secrets in the arguments and the URL of the server ``table`` (its
    values in mcpd's syntax), each with the variable ``var_for(name, secret)`` gives
    it; and a warning for each secret there, literal or a reference."""
    args, url = table_args(table), table_text(table, "url")
    command = table_text(table, "command") or None
    literal = [
        f
        for f in exposure.in_args(args, command) + exposure.in_url(url)
        if "$" not in f.value_in(args, url).replace("$$", "")  # a reference hides nothing
    ]
    out: list[Inline] = []
    for f in literal:
        var = var_for(f.name, f.value_in(args, url).replace("$$", "$"))
        where: tuple[str, ...] = (
            "servers",
            alias,
            "url" if f.index is None else f"args[{f.index}]",
        )
        # A URL's secrets, and an argument's when it holds more than one, are told
        # apart by name.
        if f.index is None or sum(g.index == f.index for g in literal) > 1:
            key, n = f.name, 2
            while any(i.where == (*where, key) for i in out):
                key, n = f"{f.name}_{n}", n + 1
            where = (*where, key)
        out.append(Inline(where, alias, f.index, f.start, f.end, var))
    return out, exposure.warnings(alias, args, url, command)
