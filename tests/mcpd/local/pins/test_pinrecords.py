"""``pins.json`` read back: whole and checked at start-up, one server's part for the
few definitions a held item or a command needs, and a file that is not as it should
be refused with what is wrong, or read whole rather than trusted."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpd.local.pins import pinrecords, pinwriter
from mcpd.local.pins.pinrecords import Sections
from mcpd.local.state.privatefile import UnsafeFileError
from mcpd.registry.pinning.definitions import BadPins, definition, pin_digest
from mcpd.registry.pinning.digests import ServerPins, Unwritten
from protocol.mcp import core as mcp


def tool(name: str, description: str = "") -> mcp.Tool:
    body = {"name": name, "description": description or f"does {name}"}
    return msgspec.json.decode(json.dumps(body).encode(), type=mcp.Tool)


def sha(t: mcp.Tool) -> bytes:
    return hashlib.sha256(definition(t)).digest()


def write(path: Path, **servers: list[mcp.Tool]) -> Sections:
    """A pin file as mcpd writes it, of these servers' tools (the first reviewed)."""
    pins: dict[str, ServerPins] = {}
    unwritten = Unwritten()
    for alias, tools in servers.items():
        server = pins[alias] = ServerPins(approved=True)
        for t in tools:
            server.of("tool")[t.name] = sha(t)
            unwritten.put(alias, "tool", t.name, t)
        if tools:
            server.reviewed.add(("tool", tools[0].name))
    return pinwriter.write_pins(str(path), pins, unwritten, None)


def load(path: Path) -> tuple[Any, Sections]:
    found = pinrecords.read_pin_file(str(path))
    assert found is not None
    return pinrecords.loaded(str(path), *found)


def as_data(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def rewrite(path: Path, data: dict[str, Any], **dumps: Any) -> None:
    path.write_text(json.dumps(data, **dumps))
    os.chmod(path, 0o600)


# -- read whole, at start-up --


def test_a_file_as_mcpd_writes_it_loads_its_digests_and_where_each_server_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pins.json"
    sections = write(path, notes=[tool("search"), tool("add")], mail=[tool("send")], empty=[])
    pins, found = load(path)
    assert found.spans == sections.spans and list(found.spans) == ["notes", "mail", "empty"]
    notes = pins.servers["notes"]
    assert notes.approved and notes.of("tool") == {
        "search": sha(tool("search")),
        "add": sha(tool("add")),
    }
    assert notes.reviewed == {("tool", "search")}
    data = path.read_bytes()
    for alias, (start, end) in found.spans.items():
        assert pinrecords.server_decoder.decode(data[start:end]).approved, alias


def test_a_file_in_another_layout_loads_the_same_with_no_parts_known(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    write(path, notes=[tool("search")], mail=[tool("send")])
    rewrite(path, as_data(path), indent=1, sort_keys=True)
    pins, found = load(path)
    assert found.spans == {}
    assert pins.servers["notes"].of("tool") == {"search": sha(tool("search"))}
    assert pins.servers["notes"].reviewed == {("tool", "search")}


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda r: r.update(definition={**r["definition"], "description": "x"}), "does not match"),
        (lambda r: r.update(digest="sha256:" + "0" * 64), "does not match"),
        (lambda r: r.update(digest="sha256:" + "ab" * 31 + "  "), "does not match"),
        (lambda r: r.update(digest="md5:0"), "does not match"),
        (lambda r: r.update(digest=7), "not a pin file"),
        (lambda r: r.update(extra=True), "not a pin file"),
    ],
    ids=["definition", "digest", "spaced-digest", "other-digest", "digest-type", "unknown-key"],
)
def test_a_record_that_is_not_as_written_refuses_the_file_naming_it(
    tmp_path: Path, edit: Any, says: str
) -> None:
    path = tmp_path / "pins.json"
    write(path, notes=[tool("search"), tool("add")])
    data = as_data(path)
    edit(data["servers"]["notes"]["tools"]["add"])
    rewrite(path, data)
    with pytest.raises(BadPins, match=says) as caught:
        load(path)
    assert str(caught.value).startswith(str(path))
    if says == "does not match":
        assert "notes tool 'add'" in str(caught.value)


@pytest.mark.parametrize("marks", ["AAAA", "not base64", 7])
def test_marks_of_forgotten_pins_not_as_written_refuse_the_file(tmp_path: Path, marks: Any) -> None:
    """Refused as any record not as written is: marks are not read as none."""
    path = tmp_path / "pins.json"
    write(path, notes=[tool("search")])
    data = as_data(path)
    data["servers"]["notes"]["forgotten"] = {"tool": marks}
    rewrite(path, data)
    with pytest.raises(BadPins, match=r"forgotten tool names|not a pin file"):
        load(path)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"", "not a pin file"),
        (b"\x00garbage", "not a pin file"),
        (b"[]", "not a pin file"),
        (b'{"format": 3, "servers": {}}', "pin format 3, expected 2"),
        (b'{"format": 1, "servers": {"a": {"tools": []}}}', "not a pin file"),
    ],
)
def test_what_is_no_pin_file_is_refused_saying_so(data: bytes, says: str) -> None:
    with pytest.raises(BadPins, match=says):
        pinrecords.parsed(data, "pins.json")


def test_a_missing_file_is_none_and_one_others_can_write_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    assert pinrecords.read_pin_file(str(path)) is None
    write(path, notes=[tool("search")])
    os.chmod(path, 0o622)
    with pytest.raises(UnsafeFileError):
        pinrecords.read_pin_file(str(path))


# -- a few definitions, read back --


def test_definitions_are_read_from_their_servers_part(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    search, send = tool("search"), tool("send")
    sections = write(path, notes=[search], mail=[send])
    wanted = [
        ("notes", "tool", "search", sha(search)),
        ("mail", "tool", "send", sha(send)),
        ("mail", "tool", "send-changed", sha(send)),  # not pinned
        ("notes", "tool", "search-old", sha(tool("search", "old"))),
        ("gone", "tool", "x", sha(search)),  # no such server
    ]
    found = pinrecords.definitions_in_file(str(path), sections, wanted)
    assert found == {
        ("notes", "tool", "search"): msgspec.Raw(definition(search)),
        ("mail", "tool", "send"): msgspec.Raw(definition(send)),
    }


def test_a_definition_that_is_not_the_pinned_one_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    sections = write(path, notes=[tool("search")])
    wanted = [("notes", "tool", "search", sha(tool("search", "as approved since")))]
    assert pinrecords.definitions_in_file(str(path), sections, wanted) == {}


def test_parts_of_another_file_are_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    search, send = tool("search"), tool("send")
    sections = write(path, notes=[search], mail=[send])
    # Laid out anew by another program, mail's part first: the spans are of the old file.
    data = as_data(path)
    data["servers"] = {"mail": data["servers"]["mail"], "notes": data["servers"]["notes"]}
    rewrite(path, data, indent=4)
    wanted = [("notes", "tool", "search", sha(search)), ("mail", "tool", "send", sha(send))]
    found = pinrecords.definitions_in_file(str(path), sections, wanted)
    assert set(found) == {("notes", "tool", "search"), ("mail", "tool", "send")}
    assert pinrecords.definitions_in_file(str(path), None, wanted) == found


def test_a_part_that_does_not_read_as_a_server_is_read_with_the_whole_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pins.json"
    search = tool("search")
    write(path, notes=[search])
    st = os.stat(path)
    # Spans that hold for the file but point into the middle of a record.
    wrong = Sections(pinrecords.file_id(st), {"notes": (3, 40)})
    wanted = [("notes", "tool", "search", sha(search))]
    found = pinrecords.definitions_in_file(str(path), wrong, wanted)
    assert found == {("notes", "tool", "search"): msgspec.Raw(definition(search))}


# -- exported --


def test_an_export_is_of_the_servers_asked_for_in_order_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    write(path, notes=[tool("search")], mail=[tool("send")], files=[tool("read")])
    assert list(pinrecords.exported(str(path), None).servers) == ["files", "mail", "notes"]
    chosen = pinrecords.exported(str(path), ["notes", "mail", "absent"])
    assert list(chosen.servers) == ["mail", "notes"]
    assert chosen.servers["notes"].tools["search"].digest == pin_digest(definition(tool("search")))
    assert pinrecords.exported(str(tmp_path / "none.json"), None).servers == {}
    data = as_data(path)
    data["servers"]["files"]["tools"]["read"]["definition"]["name"] = "write"
    rewrite(path, data)
    with pytest.raises(BadPins, match="files tool 'read'"):
        pinrecords.exported(str(path), ["notes"])


def test_a_record_kept_by_its_digest_alone_reads_back_so_and_is_written_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pins.json"
    write(path, notes=[tool("search"), tool("gone")])
    data = as_data(path)
    data["servers"]["notes"]["tools"]["gone"]["definition"] = None
    rewrite(path, data)
    pins, sections = load(path)
    server = pins.servers["notes"]
    assert server.bare == {("tool", "gone")}
    assert server.of("tool")["gone"] == sha(tool("gone"))
    assert (
        pinrecords.definitions_in_file(
            str(path), sections, [("notes", "tool", "gone", sha(tool("gone")))]
        )
        == {}
    )
    server.of("tool")["new"] = sha(tool("new"))
    unwritten = Unwritten()
    unwritten.put("notes", "tool", "new", tool("new"))
    pinwriter.write_pins(str(path), pins.servers, unwritten, sections)
    tools = as_data(path)["servers"]["notes"]["tools"]
    assert tools["gone"] == {"digest": pin_digest(definition(tool("gone"))), "definition": None}
    assert tools["search"]["definition"]["name"] == "search"
    data["servers"]["notes"]["tools"]["gone"]["digest"] = "sha256:" + "0" * 63
    rewrite(path, data)
    with pytest.raises(BadPins, match="notes tool 'gone'"):
        load(path)
