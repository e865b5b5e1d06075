"""What agents know an item by within its server: its local name before the template
(the operator's rename, then the character rule), a template by the paths it reads;
and the marks a forgotten pin leaves, which what would have been judged against it
finds."""

from __future__ import annotations

from itertools import product

from mcpd.registry.naming.facing import Namesakes, facing, looked_up, marks


def test_names_agents_cannot_tell_apart_face_alike() -> None:
    assert facing("tool", "send.mail", {}) == facing("tool", "send_mail", {}) == "send_mail"
    assert facing("prompt", "daily plan", {}) == "daily_plan"
    assert facing("tool", "send-mail", {}) != facing("tool", "send_mail", {})
    assert facing("tool", "send_mail", {"send_mail": "mail"}) == facing("tool", "mail", {})
    assert facing("template", "a://{id}", {}) == facing("template", "a://{x}", {})
    assert facing("template", "a://{id}", {}) != facing("template", "a://{+id}", {})
    # A query or a fragment added reads the same paths.
    assert facing("template", "a://{id}{?v}", {}) == facing("template", "a://{id}", {})
    assert facing("template", "a://{id}?v={v}", {}) == facing("template", "a://{x}#{y}", {})
    assert facing("template", "a://{id}/{?v}", {}) != facing("template", "a://{id}", {})
    assert facing("template", "NOTES://{id}", {}) == facing("template", "notes://{id}", {})


def test_of_several_pins_alike_the_one_pinned_last_is_the_namesake() -> None:
    namesakes = Namesakes("tool", ["a.b", "other", "a b"], {})
    assert namesakes.of("a_b") == "a b"
    assert namesakes.of("a-b") is None


def test_a_template_that_may_read_a_uri_a_pinned_one_reads_has_it_for_namesake() -> None:
    namesakes = Namesakes("template", ["notes://{id}", "notes://x/{id}", "db://{t}/rows"], {})
    for respelled in ("notes://{+id}", "notes://{id}{;v}", "Notes://{id}{.e}", "notes:{/a}"):
        assert namesakes.of(respelled) == "notes://{id}"
    # Of several it may share URIs with, the widest.
    assert namesakes.of("notes://x/{id}/raw") == "notes://{id}"
    assert namesakes.of("{+uri}") == "db://{t}/rows"
    assert namesakes.of("db://{t}") == "db://{t}/rows"
    assert namesakes.of("mail://{id}") is None
    assert namesakes.of("notebooks://{id}") is None


def test_a_template_respelled_as_a_file_or_web_server_reads_it_has_it_for_namesake() -> None:
    namesakes = Namesakes("template", ["file:///data/{+path}", "https://a.example/{p}"], {})
    for respelled in ("file://localhost/data/{+path}", "FILE://LOCALHOST/data/{x}"):
        assert namesakes.of(respelled) == "file:///data/{+path}"
        assert finds(respelled, "file:///data/{+path}")
    assert namesakes.of("file:/data/{+path}") == "file:///data/{+path}"
    assert namesakes.of("https://A.Example/{p}") == "https://a.example/{p}"
    # Another host's files, or a scheme that may tell cases apart, are others.
    assert namesakes.of("file://server/data/{+path}") is None
    assert Namesakes("template", ["notes://Box/{id}"], {}).of("notes://box/{id}") is None


def finds(listed: str, forgotten: str) -> bool:
    """Whether a template listed finds a mark the forgotten one's pin left."""
    return bool(set(looked_up("template", listed, {})) & set(marks("template", forgotten, {})))


def test_a_template_that_may_read_a_uri_a_forgotten_one_read_finds_its_marks() -> None:
    approved = "notes://{id}{?" + ",".join(f"verylongparameter{n:02}" for n in range(10)) + "}"
    respellings = (
        "notes://{+id}",
        "notes://{id}/x",
        "notes://{id}{/v}",
        "NOTES://{n}",
        "notes://5{+rest}",
        "notes:{/p}",
        "{+uri}",
    )
    for listed in (approved, *respellings):
        assert finds(listed, approved), listed
    assert finds("notes://{+p}", "notes://archive/{id}")  # wider than the forgotten one
    for listed in ("mail://{id}", "notebooks://{id}", "n://{id}"):
        assert not finds(listed, approved), listed
    # Agreeing as far as the shorter one's longest cut is enough, to hold rather than not.
    assert finds("notes://b/{x}", "notes://archive/{x}") and finds("note://{x}", approved)


def test_no_template_misses_the_marks_of_one_it_may_share_a_uri_with() -> None:
    reaches = ["".join(p) for n in range(8) for p in product("ab", repeat=n)]
    for one, other in product(reaches, repeat=2):
        if one.startswith(other) or other.startswith(one):
            assert finds(one + "{x}", other + "{+y}"), (one, other)
    assert not finds("a{x}", "b{x}") and not finds("aab{x}", "aba{x}")


def test_a_tool_or_prompt_is_marked_and_looked_up_by_what_agents_know_it_by() -> None:
    assert marks("tool", "send.mail", {}) == looked_up("tool", "send_mail", {}) == ["send_mail"]
    assert marks("prompt", "p", {"p": "q"}) == ["q"]
