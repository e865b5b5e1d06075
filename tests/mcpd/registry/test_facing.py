"""What agents know an item by within its server: its local name before the template
(the operator's rename, then the character rule), a template by the paths it reads."""

from __future__ import annotations

from mcpd.registry.facing import Namesakes, facing


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
