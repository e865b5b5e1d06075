"""Every page of a server's prompts, resources or templates, against an upstream that
answers from a script: the server's cursors followed and held to the page limit, each
item decoded and held to the limits on its own, a bad item dropped with why, a bad page
or a cursor that repeats refused naming the server."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.config.tables.model import Limit
from mcpd.policy.redaction.guard import SecretGuard
from mcpd.policy.redaction.masking import KnownSecrets, marker
from mcpd.registry.gating.limits import DEFAULT_LIMITS, HIDDEN_URI, NO_NAME, NO_URI
from mcpd.servers.connected.handshake import ProtocolViolation
from mcpd.servers.lists.list_pages import list_all
from mcpd.servers.results.taking_apart import MOST_PARTS
from protocol.mcp import features
from tests.support.parts.scripted_up import ScriptedUp, as_up, paged


async def test_every_page_is_fetched_with_the_cursor_the_server_gave() -> None:
    up = ScriptedUp({"prompts": {}})
    up.answers["prompts/list"] = paged("prompts", [[{"name": "a"}], [{"name": "b"}], []])
    prompts, trimmed = await list_all(
        as_up(up), "prompts/list", "prompts", features.Prompt, "prompts"
    )
    assert [p.name for p in prompts] == ["a", "b"]
    assert [getattr(p, "cursor", None) for _, p in up.sent] == [None, "1", "2"]
    assert trimmed.dropped == [] and not trimmed.short


async def test_a_repeated_cursor_is_a_protocol_violation_not_a_loop() -> None:
    up = ScriptedUp({"prompts": {}})
    up.answers["prompts/list"] = {"prompts": [{"name": "a"}], "nextCursor": "again"}
    with pytest.raises(ProtocolViolation, match='srv: prompts/list cursor "again" repeated'):
        await list_all(as_up(up), "prompts/list", "prompts", features.Prompt, "prompts")
    assert len(up.sent) == 2


async def test_a_list_that_never_ends_stops_at_max_pages() -> None:
    up = ScriptedUp({"resources": {}})
    up.max_pages = 5
    count = iter(range(1000))
    up.answers["resources/list"] = lambda _: {"resources": [], "nextCursor": f"c{next(count)}"}
    with pytest.raises(ProtocolViolation, match="did not end after 5 pages"):
        await list_all(as_up(up), "resources/list", "resources", features.Resource, "resources")
    assert len(up.sent) == 5


@pytest.mark.parametrize(
    "page",
    [[1, 2], "text", {"prompts": "none"}, {"prompts": [{"name": "a"}], "nextCursor": 5}],
)
async def test_a_page_of_the_wrong_shape_is_a_protocol_violation(page: Any) -> None:
    up = ScriptedUp({"prompts": {}})
    up.answers["prompts/list"] = page
    with pytest.raises(ProtocolViolation, match="srv: bad prompts/list result"):
        await list_all(as_up(up), "prompts/list", "prompts", features.Prompt, "prompts")


async def test_a_page_of_too_many_values_to_read_is_a_protocol_violation_naming_its_size() -> None:
    up = ScriptedUp({"resources": {}})
    up.answers["resources/templates/list"] = {"resourceTemplates": [{}] * MOST_PARTS}
    with pytest.raises(ProtocolViolation, match=r"srv: a resources/templates/list page of [\d,]+ "):
        await list_all(
            as_up(up),
            "resources/templates/list",
            "resourceTemplates",
            features.ResourceTemplate,
            "resource_templates",
        )


async def test_a_page_past_the_lists_limit_is_counted_to_its_end() -> None:
    up = ScriptedUp({"prompts": {}})
    up.answers["prompts/list"] = {"prompts": [{"name": f"p{i}"} for i in range(2005)]}
    prompts, trimmed = await list_all(
        as_up(up), "prompts/list", "prompts", features.Prompt, "prompts"
    )
    assert len(prompts) == 2000 and trimmed.past == 5 and trimmed.short


async def test_a_malformed_item_is_dropped_with_why_and_the_rest_kept() -> None:
    up = ScriptedUp({"prompts": {}})
    up.answers["prompts/list"] = {
        "prompts": [{"name": "good"}, {"name": 7}, {"title": "nameless"}, "junk", {"name": "ok"}]
    }
    prompts, trimmed = await list_all(
        as_up(up), "prompts/list", "prompts", features.Prompt, "prompts"
    )
    assert [p.name for p in prompts] == ["good", "ok"]
    assert len(trimmed.dropped) == 3
    assert all("(malformed)" in d for d in trimmed.dropped)


async def test_a_full_list_asks_for_no_further_page_and_says_it_was_cut_short() -> None:
    up = ScriptedUp({"resources": {}})
    up.limits = msgspec.structs.replace(
        DEFAULT_LIMITS, items=Limit(3, "servers.srv.max_list_items")
    )
    pages = [[{"uri": f"f://{p}/{i}"} for i in range(2)] for p in range(10)]
    up.answers["resources/list"] = paged("resources", pages)
    resources, trimmed = await list_all(
        as_up(up), "resources/list", "resources", features.Resource, "resources"
    )
    assert [r.uri for r in resources] == ["f://0/0", "f://0/1", "f://1/0"]
    assert len(up.sent) == 2
    assert trimmed.short and trimmed.unread and trimmed.past == 1


async def test_an_item_too_big_is_dropped_and_a_long_description_cut() -> None:
    up = ScriptedUp({"prompts": {}})
    up.limits = msgspec.structs.replace(
        DEFAULT_LIMITS,
        item_bytes=Limit(200, "max_item_bytes"),
        description_bytes=Limit(20, "max_description_bytes"),
    )
    up.answers["prompts/list"] = {
        "prompts": [
            {"name": "huge", "title": "x" * 300},
            {"name": "wordy", "description": "é" * 30},
        ]
    }
    prompts, trimmed = await list_all(
        as_up(up), "prompts/list", "prompts", features.Prompt, "prompts"
    )
    assert [p.name for p in prompts] == ["wordy"]
    assert trimmed.dropped and trimmed.dropped[0].startswith("huge:")
    description = prompts[0].description
    assert isinstance(description, str)
    assert description.startswith("é" * 10 + " [mcpd: cut at 20 of 60 bytes]")
    assert trimmed.cut == [
        "prompt wordy: description cut at 20 of 60 bytes (max_description_bytes)"
    ]


@pytest.mark.parametrize(
    ("method", "field", "type_", "kind", "key"),
    [
        ("prompts/list", "prompts", features.Prompt, "prompts", "name"),
        ("resources/list", "resources", features.Resource, "resources", "uri"),
        (
            "resources/templates/list",
            "resourceTemplates",
            features.ResourceTemplate,
            "resource_templates",
            "uriTemplate",
        ),
    ],
)
async def test_an_item_listed_twice_keeps_the_first_listed_and_says_so(
    method: str, field: str, type_: Any, kind: str, key: str
) -> None:
    # The second on a later page: a server cannot show one in the first page and swap
    # it for another later on.
    up = ScriptedUp({"prompts": {}, "resources": {}})
    first = {"name": "n", "description": "the first", key: "x://{a}"}
    later = {"name": "n", "description": "the later", key: "x://{a}"}
    other = {"name": "m", "description": "another", key: "y://{b}"}
    up.answers[method] = paged(field, [[first], [other, later]])
    items, trimmed = await list_all(as_up(up), method, field, type_, kind)
    assert [(getattr(i, key), i.description) for i in items] == [
        ("x://{a}", "the first"),
        ("y://{b}", "another"),
    ]
    assert trimmed.dropped == ["x://{a}: listed twice (the first one listed is kept)"]


# -- what each item may be --


async def test_a_page_without_the_lists_field_adds_nothing_and_ends_the_list() -> None:
    up = ScriptedUp({"resources": {}})
    up.answers["resources/list"] = {"prompts": [{"name": "not asked for"}]}
    resources, trimmed = await list_all(
        as_up(up), "resources/list", "resources", features.Resource, "resources"
    )
    assert resources == [] and trimmed.dropped == [] and not trimmed.short


async def test_an_item_no_agent_could_ask_for_is_dropped_with_why() -> None:
    up = ScriptedUp({"resources": {}})
    up.answers["resources/list"] = {
        "resources": [
            {"uri": "", "name": "empty"},
            {"uri": "file:///a\u202etxt.exe", "name": "hidden"},
            {"uri": "file:///kept", "name": "kept"},
        ]
    }
    resources, trimmed = await list_all(
        as_up(up), "resources/list", "resources", features.Resource, "resources"
    )
    assert [r.uri for r in resources] == ["file:///kept"]
    assert len(trimmed.dropped) == 2
    assert trimmed.dropped[0] == f"(no URI): {NO_URI}"
    assert trimmed.dropped[1].endswith(HIDDEN_URI) and "\u202e" not in trimmed.dropped[1]
    up.answers["prompts/list"] = {"prompts": [{"name": ""}, {"name": "p"}]}
    prompts, trimmed = await list_all(
        as_up(up), "prompts/list", "prompts", features.Prompt, "prompts"
    )
    assert [p.name for p in prompts] == ["p"]
    assert trimmed.dropped == [f"(unnamed): {NO_NAME}"]


async def test_a_secret_mcpd_holds_in_a_listed_item_is_masked() -> None:
    known = KnownSecrets()
    known.replace("config", [HeldSecret("servers.srv.env.TOKEN", "s3cret-value-123")])
    up = ScriptedUp({"prompts": {}})
    up.guard = SecretGuard(known)
    up.answers["prompts/list"] = {
        "prompts": [{"name": "leaky", "description": "uses s3cret-value-123 to log in"}]
    }
    (prompt,), _ = await list_all(as_up(up), "prompts/list", "prompts", features.Prompt, "prompts")
    assert prompt.description == f"uses {marker('servers.srv.env.TOKEN')} to log in"
