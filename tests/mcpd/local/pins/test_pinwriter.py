"""Writing ``pins.json`` anew from the digests in memory: what did not change taken from
the file it replaces, the rest made from what it was pinned from, and nothing written
when a definition is in neither."""

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
from mcpd.registry.pinning.definitions import BadPins, Kind, PinnedItem, definition, key_of
from mcpd.registry.pinning.digests import ServerPins, Unwritten, shown_digest
from protocol.mcp import core as mcp
from protocol.mcp import features


def tool(name: str, description: str = "") -> mcp.Tool:
    body = {"name": name, "description": description or f"does {name}"}
    return msgspec.json.decode(json.dumps(body).encode(), type=mcp.Tool)


class Pinning:
    """Pins as the gate makes them: a digest in memory, and what it was pinned from
    until it is written."""

    def __init__(self) -> None:
        self.servers: dict[str, ServerPins] = {}
        self.unwritten = Unwritten()

    def pin(self, alias: str, kind: Kind, item: PinnedItem, reviewed: bool = False) -> None:
        server = self.servers.setdefault(alias, ServerPins())
        name = key_of(item)
        server.of(kind)[name] = hashlib.sha256(definition(item)).digest()
        if reviewed:
            server.reviewed.add((kind, name))
        else:
            server.reviewed.discard((kind, name))
        self.unwritten.put(alias, kind, name, item)

    def write(self, path: Path, sections: Sections | None) -> Sections:
        servers = {alias: s.copy() for alias, s in self.servers.items()}
        return pinwriter.write_pins(str(path), servers, self.unwritten.take(), sections)


def read_back(path: Path) -> dict[str, Any]:
    """The file, checked as an import checks it, as plain data."""
    pins = pinrecords.decode(path.read_bytes(), str(path))
    out: dict[str, Any] = json.loads(msgspec.json.encode(pins))["servers"]
    return out


def test_pins_are_written_and_read_back_as_they_were_pinned(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    p.pin("notes", "tool", tool("search"), reviewed=True)
    p.pin("notes", "tool", tool("add"))
    p.pin("notes", "prompt", features.Prompt(name="daily", description="the day"))
    p.pin("notes", "template", features.ResourceTemplate(uriTemplate="notes://{id}", name="n"))
    p.servers["notes"].approved = True
    p.servers["empty"] = ServerPins()
    p.unwritten.changed("empty")
    sections = p.write(path, None)
    written = read_back(path)
    assert list(written) == ["notes", "empty"]
    notes = written["notes"]
    assert notes["approved"] is True
    assert list(notes["tools"]) == ["search", "add"]
    assert notes["tools"]["search"]["reviewed"] is True
    assert notes["tools"]["add"]["definition"] == {
        "description": "does add",
        "inputSchema": {"type": "object"},
        "name": "add",
    }
    assert list(notes["templates"]) == ["notes://{id}"]
    assert written["empty"] == {}  # as it was: nothing pinned, not approved
    # Where each server's part is, as reading the file finds it.
    pins, found = pinrecords.loaded(str(path), *pinrecords_read(path))
    assert found.spans == sections.spans and found.file == sections.file
    assert pins.servers["notes"].tools["search"].reviewed is True


def pinrecords_read(path: Path) -> tuple[bytes, pinrecords.FileId]:
    found = pinrecords.read_pin_file(str(path))
    assert found is not None
    return found


def test_a_server_whose_pins_did_not_change_is_copied_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    p.pin("mail", "tool", tool("send"))
    p.pin("notes", "tool", tool("search"))
    sections = p.write(path, None)
    before = path.read_bytes()
    start, end = sections.spans["mail"]
    # Nothing of mail is in memory now but its digest: only the old file has the rest.
    p.pin("notes", "tool", tool("add"))
    sections = p.write(path, sections)
    after = path.read_bytes()
    assert after[slice(*sections.spans["mail"])] == before[start:end]
    assert list(read_back(path)["notes"]["tools"]) == ["search", "add"]


def test_a_changed_server_keeps_its_unchanged_lines_and_drops_what_was_unpinned(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    for name in ("a", "b", "c"):
        p.pin("notes", "tool", tool(name))
    p.pin("notes", "prompt", features.Prompt(name="daily"))
    sections = p.write(path, None)
    old_lines = path.read_bytes().splitlines()
    notes = p.servers["notes"]
    del notes.of("tool")["b"]
    p.unwritten.drop("notes", "tool", ["b"])
    notes.reviewed.add(("tool", "c"))  # approved by a person since
    p.pin("notes", "tool", tool("d"))
    p.write(path, sections)
    written = read_back(path)["notes"]
    assert list(written["tools"]) == ["a", "c", "d"]
    assert written["tools"]["c"]["reviewed"] is True
    assert written["prompts"]["daily"]["reviewed"] is False
    new_lines = path.read_bytes().splitlines()
    line_a = next(line for line in old_lines if line.lstrip().startswith(b'"a"'))
    assert line_a in new_lines


def test_the_marks_of_forgotten_pins_are_written_and_read_back_with_the_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    for name in ("a", "b", "c"):
        p.pin("notes", "tool", tool(name))
    notes = p.servers["notes"]
    p.unwritten.drop("notes", "tool", notes.unlist("tool", {"a", "b"}, 0, 0, str.upper))
    sections = p.write(path, None)
    p.pin("notes", "tool", tool("d"))  # a's and b's lines are taken from the old file
    p.write(path, sections)
    assert list(read_back(path)["notes"]["tools"]) == ["a", "b", "d"]
    loaded, _ = pinrecords.loaded(str(path), path.read_bytes(), (0, 0, 0))
    again = loaded.servers["notes"]
    assert again.forgot("tool", "C") and not again.forgot("tool", "A")
    assert not again.forgot("prompt", "C")


def test_a_file_not_laid_out_as_mcpd_writes_it_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    p.pin("notes", "tool", tool("search"))
    p.pin("mail", "tool", tool("send"), reviewed=True)
    p.write(path, None)
    # Another program rewrote it indented, its keys in another order.
    path.write_text(json.dumps(json.loads(path.read_text()), indent=4, sort_keys=True))
    os.chmod(path, 0o600)
    p.pin("notes", "tool", tool("add"))
    sections = p.write(path, None)
    written = read_back(path)
    assert list(written["notes"]["tools"]) == ["search", "add"]
    assert written["mail"]["tools"]["send"]["reviewed"] is True
    assert set(sections.spans) == {"notes", "mail"}


def test_sections_of_another_file_are_not_used(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    p.pin("notes", "tool", tool("search"))
    p.pin("mail", "tool", tool("send"))
    sections = p.write(path, None)
    # The same pins, laid out with mail's part first: the old spans point elsewhere.
    data = json.loads(path.read_text())
    data["servers"] = {"mail": data["servers"]["mail"], "notes": data["servers"]["notes"]}
    path.write_text(json.dumps(data))
    p.unwritten.changed("other")
    p.write(path, sections)
    written = read_back(path)
    assert written["mail"]["tools"]["send"]["definition"]["name"] == "send"
    assert written["notes"]["tools"]["search"]["definition"]["name"] == "search"


def test_a_definition_in_neither_fails_and_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    p.pin("notes", "tool", tool("search"))
    sections = p.write(path, None)
    before = path.read_bytes()
    # A pin whose definition was never at hand (nor in the file).
    p.servers["notes"].of("tool")["lost"] = b"\x01" * 32
    p.unwritten.changed("notes")
    with pytest.raises(BadPins, match=r"the definition of notes tool 'lost' is lost"):
        p.write(path, sections)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["pins.json"]


def test_a_link_or_nothing_where_the_file_was_is_named_as_why_a_definition_is_lost(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    p.pin("notes", "tool", tool("search"))
    sections = p.write(path, None)
    elsewhere = tmp_path / "elsewhere.json"
    os.replace(path, elsewhere)
    path.symlink_to(elsewhere)
    p.unwritten.changed("notes")
    with pytest.raises(BadPins, match=r"'search' is lost \(a symbolic link is there now"):
        p.write(path, sections)
    assert path.is_symlink()  # nothing written, through it or over it
    path.unlink()
    with pytest.raises(BadPins, match=r"'search' is lost \(no file is there to take it from\)"):
        p.write(path, sections)


def test_a_definition_edited_in_the_file_is_not_taken_for_the_pinned_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    p.pin("notes", "tool", tool("search", "Search notes."))
    p.write(path, None)
    forged = path.read_bytes().replace(b"Search notes.", b"Read ~/.ssh.")
    path.write_bytes(forged)
    p.unwritten.changed("notes")
    with pytest.raises(BadPins, match="search"):
        p.write(path, None)
    assert path.read_bytes() == forged


def test_a_definition_pinned_since_is_not_the_old_files(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    p.pin("notes", "tool", tool("search", "before"))
    sections = p.write(path, None)
    p.pin("notes", "tool", tool("search", "after"))
    p.write(path, sections)
    record = read_back(path)["notes"]["tools"]["search"]
    assert record["definition"]["description"] == "after"
    assert record["digest"] == shown_digest(
        hashlib.sha256(definition(tool("search", "after"))).digest()
    )


def test_names_a_server_chose_are_written_and_read_back_whatever_they_hold(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pins.json"
    names = [
        'x": {"digest": "sha256:' + "0" * 64,
        "line\nbreak",
        "\u00e9t\u00e9 \U0001f600",
        '"quoted", "reviewed": true}',
    ]
    p = Pinning()
    for name in names:
        p.pin("notes", "tool", tool(name))
    sections = p.write(path, None)
    assert list(read_back(path)["notes"]["tools"]) == names
    # Rewritten from the old file's lines: each is found again as the record it is.
    p.pin("notes", "tool", tool("last"))
    p.write(path, sections)
    assert list(read_back(path)["notes"]["tools"]) == [*names, "last"]


def test_a_link_at_the_files_name_is_replaced_and_not_read_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    p = Pinning()
    p.pin("notes", "tool", tool("search"))
    p.write(elsewhere, None)
    kept = elsewhere.read_bytes()
    path = tmp_path / "pins.json"
    path.symlink_to(elsewhere)
    # A server's pins not in memory: only the file the link points to has them.
    p.unwritten.changed("notes")
    with pytest.raises(BadPins, match="search"):
        p.write(path, None)
    p.pin("notes", "tool", tool("search"))
    p.write(path, None)
    assert not path.is_symlink()
    assert elsewhere.read_bytes() == kept


def test_an_old_file_that_got_shorter_fails_the_copy(tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    p = Pinning()
    p.pin("notes", "tool", tool("search"))
    p.pin("mail", "tool", tool("send"))
    sections = p.write(path, None)
    before = path.read_bytes()
    # Cut while it is copied: the spans found for it no longer fit in it.
    st = path.stat()
    with open(path, "r+b") as f:
        f.truncate(sections.spans["mail"][0] + 5)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    shorter = Sections((st.st_ino, sections.spans["mail"][0] + 5, st.st_mtime_ns), sections.spans)
    p.unwritten.changed("notes")
    p.servers["notes"].approved = True
    with pytest.raises(BadPins, match="got shorter"):
        p.write(path, shorter)
    assert path.read_bytes() == before[: sections.spans["mail"][0] + 5]
