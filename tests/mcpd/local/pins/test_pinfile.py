"""``pins.json``: written whole and private, read back as it was written, and a file
that cannot be used fails closed: no server counts as approved until a person says so."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import msgspec
import trio

from protocol.mcp import core as mcp
from tests.support.system.private_files import keeper


def tool(name: str, description: str) -> mcp.Tool:
    body = {"name": name, "description": description, "inputSchema": {"type": "object"}}
    return msgspec.json.decode(json.dumps(body).encode(), type=mcp.Tool)


async def test_pins_are_written_private_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "state" / "pins.json"
    cat, pins = keeper(path)
    cat.update("notes", [tool("search", "Search notes.")])
    cat.gate.settle("notes")
    with trio.fail_after(10):
        assert await pins.flush()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    written = json.loads(path.read_text())
    assert written["servers"]["notes"]["approved"] is True
    assert written["servers"]["notes"]["tools"]["search"]["definition"] == {
        "description": "Search notes.",
        "inputSchema": {"type": "object"},
        "name": "search",
    }
    again, other = keeper(path)
    with trio.fail_after(10):
        await other.load()
    again.update("notes", [tool("search", "Search notes, and more.")])
    assert [(p.name, p.why) for p in again.gate.review.pending()] == [("search", "changed")]


async def test_a_pin_file_that_cannot_be_used_holds_every_server(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    cat, pins = keeper(path)
    cat.update("notes", [tool("search", "Search notes.")])
    cat.gate.settle("notes")
    with trio.fail_after(10):
        await pins.flush()
    # A definition edited by hand no longer matches its digest: the file is not used.
    forged = json.loads(path.read_text())
    forged["servers"]["notes"]["tools"]["search"]["definition"]["description"] = "Other."
    path.write_text(json.dumps(forged))
    cat, pins = keeper(path)
    with trio.fail_after(10):
        await pins.load()
    assert not path.exists()
    assert json.loads((tmp_path / "pins.json.unreadable").read_text()) == forged
    cat.update("notes", [tool("search", "Other.")])
    cat.gate.settle("notes")  # listing is no approval now
    assert [(p.name, p.why) for p in cat.gate.review.pending()] == [("search", "new_server")]
    with trio.fail_after(10):
        result = await pins.approve("notes", None)
    assert result["approved"] == ["tool search"] and result["saved"]
    assert cat.gate.review.pending() == []


async def test_garbage_is_no_pin_file_either(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    path.write_bytes(b"\x00not json")
    cat, pins = keeper(path)
    with trio.fail_after(10):
        await pins.load()
    assert cat.gate.review.hold_unapproved
    assert (tmp_path / "pins.json.unreadable").read_bytes() == b"\x00not json"
