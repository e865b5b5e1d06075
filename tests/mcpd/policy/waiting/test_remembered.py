from __future__ import annotations

from mcpd.policy.waiting.remembered import RememberedApprovals


def test_the_approvals_for_the_servers_a_reload_restarts_are_forgotten() -> None:
    remembered = RememberedApprovals()
    remembered.add("c1", 0, "github", "merge", b"d1")
    remembered.add("c1", 0, "notes", "search", b"d2")
    remembered.add("c2", 1, "github", "push", b"d3")
    remembered.forget_servers({"github"})
    assert not remembered.holds("c1", 0, "github", "merge", b"d1")
    assert not remembered.holds("c2", 1, "github", "push", b"d3")
    assert remembered.holds("c1", 0, "notes", "search", b"d2")


def test_an_approval_is_remembered_for_the_tool_as_it_was_defined() -> None:
    remembered = RememberedApprovals()
    remembered.add("c1", 0, "github", "merge", b"as approved")
    assert remembered.holds("c1", 0, "github", "merge", b"as approved")
    assert not remembered.holds("c1", 0, "github", "merge", b"defined anew")


def test_an_ended_connection_or_new_rules_take_what_was_approved_with_them() -> None:
    remembered = RememberedApprovals()
    remembered.add("c1", 0, "github", "merge", b"d1")
    remembered.add("c2", 0, "github", "merge", b"d1")
    remembered.forget("c1")
    assert not remembered.holds("c1", 0, "github", "merge", b"d1")
    assert remembered.holds("c2", 0, "github", "merge", b"d1")
    remembered.forget_all()
    assert not remembered.holds("c2", 0, "github", "merge", b"d1")
