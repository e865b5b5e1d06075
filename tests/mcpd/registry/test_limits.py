"""A server's lists held to its limits, where the tests of the limits in use
(``test_list_limits``) do not go: how an item too big is named whatever the server
sent, when a list is full, saved resources and templates, and what a fetch says."""

from __future__ import annotations

import msgspec
from msgspec import Raw

from mcpd.config.load import parse
from mcpd.config.model import ListLimits
from mcpd.registry.limits import ListTrim


def limits(**keys: int) -> ListLimits:
    return parse({"servers": {"s": {"command": "x", **keys}}}, env={}).list_limits("s")


def raw(item: object) -> Raw:
    return Raw(msgspec.json.encode(item))


def too_big(data: bytes) -> str:
    """The reason an item of these bytes, over a limit of 12, is dropped with."""
    trim = ListTrim("s", "tools", "tools/list", limits(max_item_bytes=12))
    assert not trim.admit(Raw(data))
    assert trim.admit(raw({"name": "a"}))  # 12 bytes: the next one is still read
    (reason,) = trim.done().dropped
    return reason


# -- an item too big, named --


def test_an_item_too_big_nested_too_deep_to_read_is_an_item_not_an_error() -> None:
    # The page it came in was read, but reading the item again for its name is
    # deeper in the stack: at the limit's edge, a level short of it is too deep there.
    depth = 100_000
    data = b'{"a":' + b"[" * depth + b"]" * depth + b',"name":"deep"}'
    assert too_big(data).startswith("(an item): ")
