"""What the daemon keeps in memory of its pins: a digest an item, the reviewed ones,
what is not written yet and what it is made from, and the pin set made of it all."""

from __future__ import annotations

import hashlib
import json

import msgspec
import pytest

from mcpd.registry.pinned import parsed_digest, shown_digest
from mcpd.registry.pins import definition, digest
from protocol import mcp, surface


def tool(name: str, description: str = "") -> mcp.Tool:
    body = {"name": name, "description": description or f"does {name}"}
    return msgspec.json.decode(json.dumps(body).encode(), type=mcp.Tool)


def sha(item: mcp.Tool | surface.Prompt) -> bytes:
    return hashlib.sha256(definition(item)).digest()


# -- digests, as shown and as kept --


def test_a_digest_is_shown_as_pin_files_write_it_and_read_back() -> None:
    raw = sha(tool("search"))
    shown = shown_digest(raw)
    assert shown == digest(definition(tool("search")))
    assert parsed_digest(shown) == raw


@pytest.mark.parametrize(
    "text",
    [
        "",
        "sha256:",
        "sha1:" + "ab" * 32,
        "SHA256:" + "ab" * 32,
        "sha256:" + "ab" * 31,  # too short
        "sha256:" + "ab" * 33,  # too long
        "sha256:" + "zz" * 32,  # not hex
        "sha256:" + "\u00e9" * 64,  # not ASCII
        "sha256:" + "ab" * 31 + "  ",  # spaces that hex reading would skip
        "sha256:" + "ab " * 21 + "a",
        "sha256:" + "ab" * 31 + "a\n",
    ],
)
def test_what_is_not_a_digest_of_32_bytes_is_none(text: str) -> None:
    assert parsed_digest(text) is None
