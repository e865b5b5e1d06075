"""What the daemon keeps in memory of its pins: a digest an item, the reviewed ones,
what is not written yet and what it is made from, and the pin set made of it all."""

from __future__ import annotations

import hashlib
import json
from functools import partial

import msgspec
import pytest
from msgspec import Raw

from mcpd.registry.naming.facing import looked_up, marks
from mcpd.registry.pinning.definitions import BadPins, PinRecord, definition, pin_digest, record_of
from mcpd.registry.pinning.digests import (
    Pin,
    ServerPins,
    Unwritten,
    adopt_pins,
    definition_of,
    parsed_digest,
    pin_set,
    shown_digest,
)
from protocol.mcp import core as mcp
from protocol.mcp import features


def tool(name: str, description: str = "") -> mcp.Tool:
    body = {"name": name, "description": description or f"does {name}"}
    return msgspec.json.decode(json.dumps(body).encode(), type=mcp.Tool)


def sha(item: mcp.Tool | features.Prompt) -> bytes:
    return hashlib.sha256(definition(item)).digest()


# -- digests, as shown and as kept --


def test_a_digest_is_shown_as_pin_files_write_it_and_read_back() -> None:
    raw = sha(tool("search"))
    shown = shown_digest(raw)
    assert shown == pin_digest(definition(tool("search")))
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


# -- one server's pins, as shown --


def test_a_servers_pins_are_shown_by_kind_with_digest_and_review() -> None:
    server = ServerPins()
    search, add = sha(tool("search")), sha(tool("add"))
    server.of("tool").update({"search": search, "add": add})
    server.reviewed.add(("tool", "add"))
    server.of("prompt")["daily"] = b"\x01" * 32
    assert dict(server.tools) == {
        "search": Pin(shown_digest(search), False),
        "add": Pin(shown_digest(add), True),
    }
    assert list(server.tools) == ["search", "add"]  # in the order pinned
    assert len(server.prompts) == 1 and len(server.templates) == 0
    # A prompt reviewed is not a tool of that name reviewed.
    server.reviewed.add(("prompt", "search"))
    assert server.tools["search"].reviewed is False
    with pytest.raises(KeyError):
        server.tools["daily"]
    assert "daily" not in server.tools


def test_a_copy_is_not_changed_by_later_pins_nor_changes_them() -> None:
    server = ServerPins(approved=True)
    server.of("tool")["search"] = b"\x01" * 32
    server.reviewed.add(("tool", "search"))
    copy = server.copy()
    server.of("tool")["add"] = b"\x02" * 32
    server.of("tool")["search"] = b"\x03" * 32
    server.reviewed.discard(("tool", "search"))
    server.approved = False
    assert copy.approved is True
    assert copy.of("tool") == {"search": b"\x01" * 32}
    assert copy.reviewed == {("tool", "search")}
    copy.of("prompt")["p"] = b"\x04" * 32
    assert server.of("prompt") == {}


# -- what is not written yet --


def test_what_is_pinned_waits_to_be_written_and_is_taken_whole() -> None:
    unwritten = Unwritten()
    search = tool("search")
    unwritten.put("notes", "tool", "search", search)
    unwritten.changed("mail")
    assert unwritten.get("notes", "tool", "search") is search
    assert unwritten.get("notes", "prompt", "search") is None
    assert unwritten.get("mail", "tool", "search") is None
    taken = unwritten.take()
    assert taken.servers == {"notes", "mail"}
    assert taken.get("notes", "tool", "search") is search
    assert unwritten.servers == set() and unwritten.get("notes", "tool", "search") is None


def test_a_dropped_pin_leaves_nothing_to_write_but_its_server() -> None:
    unwritten = Unwritten()
    unwritten.put("notes", "tool", "search", tool("search"))
    unwritten.put("notes", "tool", "add", tool("add"))
    unwritten.drop("notes", "tool", ["search", "never-pinned"])
    unwritten.drop("other", "prompt", ["x"])  # nothing of it waits: its server does
    assert unwritten.get("notes", "tool", "search") is None
    assert unwritten.get("notes", "tool", "add") is not None
    assert unwritten.servers == {"notes", "other"}


def test_what_could_not_be_written_comes_back_unless_pinned_again_since() -> None:
    unwritten = Unwritten()
    before, after = tool("search", "before"), tool("search", "after")
    unwritten.put("notes", "tool", "search", before)
    unwritten.put("notes", "tool", "add", tool("add"))
    taken = unwritten.take()
    unwritten.put("notes", "tool", "search", after)  # while the write failed
    unwritten.put("mail", "prompt", "daily", Raw(b"{}"))
    unwritten.give_back(taken)
    assert unwritten.get("notes", "tool", "search") is after
    assert unwritten.get("notes", "tool", "add") is not None
    assert unwritten.get("mail", "prompt", "daily") == Raw(b"{}")
    assert unwritten.servers == {"notes", "mail"}


# -- a definition, from what it was pinned from --


def test_a_definition_is_made_from_an_item_or_a_raw_one_only_if_it_is_the_pinned_one() -> None:
    search = tool("search")
    data = definition(search)
    raw = sha(search)
    assert definition_of(search, raw) == data
    assert definition_of(Raw(data), raw) == data
    # The server listed it changed since: not the definition of that pin.
    assert definition_of(tool("search", "other"), raw) is None
    assert definition_of(Raw(data + b" "), raw) is None
    prompt = features.Prompt(name="daily", description="the day")
    assert definition_of(prompt, sha(prompt)) == definition(prompt)


# -- pins taken from a pin set, and a pin set made of pins --


def test_adopted_records_are_pinned_reviewed_as_they_say_and_wait_to_be_written() -> None:
    server = ServerPins()
    server.reviewed.add(("tool", "add"))  # reviewed before; the import says it is not
    search, add = record_of(tool("search")), record_of(tool("add"))
    records = {"search": PinRecord(search.digest, search.definition, True), "add": add}
    unwritten = Unwritten()
    assert adopt_pins("notes", "tool", server, records, unwritten) == 2
    assert dict(server.tools) == {
        "search": Pin(search.digest, True),
        "add": Pin(add.digest, False),
    }
    assert unwritten.get("notes", "tool", "search") == search.definition
    assert unwritten.servers == {"notes"}


def test_a_pin_set_holds_each_pin_with_its_definition() -> None:
    server = ServerPins(approved=True)
    search, prompt = tool("search"), features.Prompt(name="daily")
    server.of("tool")["search"] = sha(search)
    server.of("prompt")["daily"] = sha(prompt)
    server.reviewed.add(("prompt", "daily"))
    found = {
        ("notes", "tool", "search"): Raw(definition(search)),
        ("notes", "prompt", "daily"): Raw(definition(prompt)),
    }
    pins = pin_set({"notes": server}, found)
    notes = pins.servers["notes"]
    assert notes.approved is True
    assert notes.tools == {
        "search": PinRecord(pin_digest(definition(search)), found[("notes", "tool", "search")])
    }
    assert notes.prompts["daily"].reviewed is True
    assert notes.templates == {}


def test_a_pin_set_with_a_definition_lost_says_which() -> None:
    server = ServerPins()
    server.of("template")["notes://{id}"] = b"\x01" * 32
    with pytest.raises(BadPins, match=r"the definition of notes template 'notes://\{id\}' is lost"):
        pin_set({"notes": server}, {})


def known_as(name: str) -> list[str]:
    return [name.replace(".", "_")]


def test_pins_no_longer_listed_are_kept_bare_and_past_the_bound_the_last_ones_go() -> None:
    server = ServerPins()
    pinned = server.of("tool")
    for name in ("old", "b1", "b2", "b3"):
        pinned[name] = sha(tool(name))
    server.reviewed.add(("tool", "b3"))
    assert server.unlist("tool", {"old"}, 3, 100, known_as) == ["b1", "b2", "b3"]
    assert server.bare == {("tool", "b1"), ("tool", "b2"), ("tool", "b3")}
    assert server.unlist("tool", {"old"}, 3, 100, known_as) == []  # nothing new
    assert not server.forgot("tool", ["b3"])
    # "old" is dropped too: it was pinned first, so the last one pinned goes.
    assert server.unlist("tool", set(), 3, 100, known_as) == ["old", "b3"]
    assert list(pinned) == ["old", "b1", "b2"]
    assert ("tool", "b3") not in server.bare | server.reviewed
    assert server.forgot("tool", ["b3"]) and not server.forgot("prompt", ["b3"])
    # Past the characters, the longest name goes: "b1" and "b2" are kept.
    assert server.unlist("tool", set(), 3, 5, known_as) == ["old"]
    assert list(pinned) == ["b1", "b2"] and server.forgot("tool", ["old"])
    server.repinned("tool", "b1", False)  # listed again, as it was
    assert ("tool", "b1") not in server.bare


def test_one_long_name_listed_first_pushes_out_no_other_pin() -> None:
    """A server lists a name of 65,536 characters before ``send_mail``, then drops
    both: the long name is forgotten, ``send_mail`` kept by its digest."""
    server = ServerPins(approved=True)
    long = "j" * 65536
    server.of("tool").update({long: sha(tool(long)), "send_mail": sha(tool("send_mail"))})
    server.unlist("tool", {"send_mail"}, 1000, 65536, known_as)
    assert server.unlist("tool", set(), 1000, 65536, known_as) == ["send_mail", long]
    assert list(server.of("tool")) == ["send_mail"]
    assert server.bare == {("tool", "send_mail")}
    assert server.forgot("tool", [long]) and not server.forgot("tool", ["send_mail"])


def test_a_pin_pushed_out_by_many_names_is_marked_by_what_agents_know_it_as() -> None:
    """A server lists 1,000 names before ``send.mail`` and drops them all: the pin of
    ``send.mail`` is forgotten, and its name (as agents know it) marked, so that it
    cannot come back as new."""
    server = ServerPins(approved=True)
    for n in range(1000):
        server.of("tool")[f"j{n}"] = sha(tool(f"j{n}"))
    server.of("tool")["send.mail"] = sha(tool("send.mail"))
    server.unlist("tool", {"send.mail"}, 1000, 65536, known_as)
    assert server.unlist("tool", set(), 1000, 65536, known_as)[-1] == "send.mail"
    assert "send.mail" not in server.of("tool")
    assert server.forgot("tool", ["send_mail"])
    assert not any(server.forgot("tool", [f"j{n}"]) for n in range(1000))  # still pinned
    copy = server.copy()
    server.forgotten.clear()
    assert copy.forgot("tool", ["send_mail"])


def test_a_template_pin_pushed_out_leaves_marks_its_respellings_find() -> None:
    """Forgotten, ``notes://{id}`` is marked by what it may read: a template that may
    read a URI of it finds a mark, one of another prefix none."""
    server = ServerPins(approved=True)
    server.of("template")["notes://{id}"] = b"\x01" * 32
    left = partial(marks, "template", renames={})
    assert server.unlist("template", set(), 0, 65536, left) == ["notes://{id}"]
    for respelled in ("notes://{+id}", "notes://{id}/x", "notes://{id}{/v}", "notes://5{+r}"):
        assert server.forgot("template", looked_up("template", respelled, {}))
    assert not server.forgot("template", looked_up("template", "mail://{id}", {}))
    assert not server.forgot("tool", looked_up("tool", "notes", {}))


def test_a_pin_kept_bare_is_in_a_pin_set_by_its_digest_alone() -> None:
    server = ServerPins(approved=True)
    server.of("tool")["gone"] = sha(tool("gone"))
    server.bare.add(("tool", "gone"))
    record = pin_set({"notes": server}, {}).servers["notes"].tools["gone"]
    assert record.digest == shown_digest(sha(tool("gone")))
    assert bytes(record.definition) == b"null"
