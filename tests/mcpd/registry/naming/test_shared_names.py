"""What the journal is told of a local name several tools want (``Told``): who wants
it and what each got instead, once until that changes; and of a server's tool the
template would give the name of one of mcpd's own tools."""

from __future__ import annotations

import logging

import pytest

from mcpd.registry.naming.shared_names import Told
from mcpd.registry.naming.spelling import OWN_TOOLS

NAME = "mcp__gh__prod__merge_pr"
CLAIMS = [("gh__prod", "merge_pr"), ("gh", "prod__merge.pr")]


def hashed(key: tuple[str, str]) -> str:
    return f"{key[0]}-{key[1]}-h"


@pytest.fixture
def told(caplog: pytest.LogCaptureFixture) -> Told:
    caplog.set_level(logging.WARNING, "mcpd.registry")
    return Told()


def test_a_name_wanted_by_several_tools_is_told_with_each_tools_name(
    told: Told, caplog: pytest.LogCaptureFixture
) -> None:
    told.tell(NAME, CLAIMS, hashed)
    assert caplog.messages == [
        f"{NAME} is the name of more than one tool, so each is hashed: listed are "
        "gh's 'prod__merge.pr' as gh-prod__merge.pr-h, gh__prod's 'merge_pr' as "
        "gh__prod-merge_pr-h; see `mcpd tools`"
    ]
    assert caplog.records[0].__dict__["mcpd_event"] == "name_shared"


def test_it_is_told_again_only_when_who_wants_it_or_what_they_got_changes(
    told: Told, caplog: pytest.LogCaptureFixture
) -> None:
    told.tell(NAME, CLAIMS, hashed)
    told.tell(NAME, list(reversed(CLAIMS)), hashed)
    assert len(caplog.messages) == 1
    told.tell(NAME, CLAIMS, lambda key: hashed(key) + "2")
    assert len(caplog.messages) == 2
    told.tell(NAME, [*CLAIMS, ("gh2", "prod__merge_pr")], hashed)
    assert len(caplog.messages) == 3


def test_a_name_one_tool_wants_is_not_told_and_is_forgotten(
    told: Told, caplog: pytest.LogCaptureFixture
) -> None:
    told.tell(NAME, CLAIMS[:1], hashed)
    assert caplog.messages == []
    told.tell(NAME, CLAIMS, hashed)
    told.tell(NAME, CLAIMS[:1], hashed)
    # Wanted by several again: told again, as news.
    told.tell(NAME, CLAIMS, hashed)
    assert len(caplog.messages) == 2


def test_forget_has_everything_told_anew(told: Told, caplog: pytest.LogCaptureFixture) -> None:
    told.tell(NAME, CLAIMS, hashed)
    told.forget()
    told.tell(NAME, CLAIMS, hashed)
    assert len(caplog.messages) == 2


def test_one_tool_wanting_the_name_of_mcpds_own_is_told(
    told: Told, caplog: pytest.LogCaptureFixture
) -> None:
    own = sorted(OWN_TOOLS)[0]
    told.tell(own, [("srv", "x")], hashed)
    assert caplog.messages == [
        f"{own} is the name of mcpd's own tool, which a call by it reaches, so a server's "
        "tool is hashed: listed are srv's 'x' as srv-x-h; see `mcpd tools`"
    ]
    told.tell(own, [], hashed)
    told.tell(own, [("srv", "x")], hashed)
    assert len(caplog.messages) == 2
