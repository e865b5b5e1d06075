"""``mcpd prompts``, ``mcpd resources``, ``mcpd read`` and ``mcpd prompt`` as a person
sees them, with the daemon's answers given: every list followed to its last page, what
servers wrote escaped (a terminal is never sent their control characters), content
blocks said as what they are and how big, and bad arguments refused before asking."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from mcpd.cli.prompt_resource_cmds import (
    cmd_prompt,
    cmd_prompts,
    cmd_read,
    cmd_resources,
    render_block,
)

Answers = dict[str, list[dict[str, Any]]]


class Daemon:
    """The daemon's answers, in turn for each method, and what was asked."""

    def __init__(self, answers: Answers) -> None:
        self.answers = {method: list(pages) for method, pages in answers.items()}
        self.asked: list[tuple[str, Any]] = []
        self.for_a_person_said = False

    def for_a_person(self) -> Daemon:
        self.for_a_person_said = True
        return self

    def request(self, method: str, params: Any, progress: Any = None) -> Any:
        self.asked.append((method, params))
        return self.answers[method].pop(0)


def client_for(daemon: Daemon) -> Callable[[argparse.Namespace, float], Any]:
    return lambda args, timeout: contextlib.nullcontext(daemon)


def run(
    cmd: Callable[..., int],
    answers: Answers,
    capsys: pytest.CaptureFixture[str],
    json: bool = False,
    **args: Any,
) -> tuple[int, list[str], Daemon]:
    daemon = Daemon(answers)
    code = cmd(argparse.Namespace(json=json, **args), client_for(daemon))
    return code, capsys.readouterr().out.splitlines(), daemon


def meta(server: str) -> dict[str, Any]:
    return {"_meta": {"mcpd/server": server}}


def test_prompts_are_listed_from_every_page_with_their_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pages = [
        {
            "prompts": [
                {
                    "name": "review",
                    "description": "Review a change.\nCarefully.",
                    "arguments": [{"name": "diff", "required": True}, {"name": "style"}],
                    **meta("git"),
                }
            ],
            "nextCursor": "p2",
        },
        {"prompts": [{"name": "plain", **meta("notes")}]},
    ]
    code, out, daemon = run(cmd_prompts, {"prompts/list": pages}, capsys)
    assert code == 0
    assert daemon.asked == [("prompts/list", None), ("prompts/list", {"cursor": "p2"})]
    assert out[0].split() == ["PROMPT", "SERVER", "DESCRIPTION"]
    assert out[1].split() == ["review(diff,", "style?)", "git", "Review", "a", "change.",
                              "Carefully."]  # fmt: skip
    assert out[2].split() == ["plain()", "notes"]
    assert out[-1] == "2 prompts"


@pytest.mark.parametrize("json", [False, True])
def test_only_a_table_for_a_person_says_it_is_for_one(
    json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """A listing printed for a person says so first (its connection is no agent's);
    one a program reads (``--json``) does not."""
    answers: Answers = {
        "prompts/list": [{"prompts": []}],
        "resources/list": [{"resources": []}],
        "resources/templates/list": [{"resourceTemplates": []}],
    }
    for cmd in (cmd_prompts, cmd_resources):
        _, _, daemon = run(cmd, answers, capsys, json=json)
        assert daemon.for_a_person_said is not json


def test_what_a_server_named_is_escaped_in_the_lists(capsys: pytest.CaptureFixture[str]) -> None:
    resources = [{"uri": "file:///a\x1b[2J", "name": "a\u202eb", **meta("files")}]
    templates = [{"uriTemplate": "file:///{p}", "name": "t", **meta("files")}]
    answers = {
        "resources/list": [{"resources": resources}],
        "resources/templates/list": [{"resourceTemplates": templates}],
    }
    code, out, _ = run(cmd_resources, answers, capsys)
    assert code == 0
    assert "\x1b" not in "\n".join(out) and "\u202e" not in "\n".join(out)
    assert out[1].split() == ["file:///a\\x1b[2J", "files", "a\\u202eb"]
    assert out[2].split() == ["file:///{p}", "files", "(template)", "t"]
    assert out[-1] == "1 resources, 1 templates"


def test_an_item_without_mcpds_server_note_shows_a_question_mark(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run(cmd_prompts, {"prompts/list": [{"prompts": [{"name": "p"}]}]}, capsys)
    assert out[1].split() == ["p()", "?"]


def test_a_read_prints_text_and_says_what_binary_content_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    contents = [
        {"uri": "file:///a", "text": "line one\nline\x07 two"},
        {"uri": "file:///b", "blob": "AAAA" * 3, "mimeType": "image/png"},
        {"uri": "file:///c\x1b", "blob": ""},
    ]
    code, out, daemon = run(
        cmd_read, {"resources/read": [{"contents": contents}]}, capsys, uri="file:///a"
    )
    assert code == 0
    assert daemon.asked == [("resources/read", {"uri": "file:///a"})]
    assert out == [
        "line one",
        "line\\x07 two",
        "[image/png content, about 9 bytes: file:///b]",
        "[binary content, about 0 bytes: file:///c\\x1b]",
    ]


def test_a_prompts_messages_are_said_by_role(capsys: pytest.CaptureFixture[str]) -> None:
    messages = [
        {"role": "user", "content": {"type": "text", "text": "Review this"}},
        {
            "role": "assistant\x1b",
            "content": [
                {"type": "text", "text": "ok"},
                {"type": "resource_link", "uri": "file:///d", "name": "d"},
            ],
        },
    ]
    code, out, daemon = run(
        cmd_prompt,
        {"prompts/get": [{"messages": messages}]},
        capsys,
        name="review",
        arguments='{"diff": "x"}',
    )
    assert code == 0
    assert daemon.asked == [("prompts/get", {"name": "review", "arguments": {"diff": "x"}})]
    assert out == [
        "user: Review this",
        "assistant\\x1b: ok",
        "assistant\\x1b: [link file:///d (d)]",
    ]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [("{nope", "arguments are not valid JSON"), ("[1]", "arguments must be a JSON object")],
)
def test_bad_prompt_arguments_are_refused_before_asking(
    arguments: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon = Daemon({})
    with pytest.raises(SystemExit) as info:
        cmd_prompt(
            argparse.Namespace(json=False, name="p", arguments=arguments), client_for(daemon)
        )
    assert info.value.code == 2
    assert said in capsys.readouterr().err
    assert daemon.asked == []


# -- content blocks --


@pytest.mark.parametrize(
    ("block", "shown"),
    [
        ({"type": "image", "mimeType": "image/png", "data": "AAAA"}, "[image image/png, 3 bytes]"),
        ({"type": "image", "data": "AA=="}, "[image binary, 1 bytes]"),
        ({"type": "audio", "mimeType": "", "data": None}, "[audio binary]"),
        ({"type": "resource_link", "uri": "x://1"}, "[link x://1]"),
        (
            {"type": "resource", "resource": {"uri": "x://1", "text": "t\x1b"}},
            "[resource x://1]\nt\\x1b",
        ),
        ({"type": "video"}, "[video content]"),
    ],
)
def test_each_kind_of_block_is_said_as_what_it_is(block: dict[str, Any], shown: str) -> None:
    assert render_block(block) == shown


@pytest.mark.parametrize(
    "block",
    [
        "just a string",
        ["a", "list"],
        {"type": "resource", "resource": "x://1"},
        {"type": "resource_link", "uri": "x://1", "name": "n", "mimeType": 5},
    ],
)
def test_a_block_of_the_wrong_shape_is_said_not_a_crash(block: Any) -> None:
    assert render_block(block).startswith("[")


def test_a_prompt_message_of_the_wrong_shape_is_said_not_a_crash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    messages = ["not a message", {"role": "user", "content": "not a block"}]
    code, out, _ = run(
        cmd_prompt, {"prompts/get": [{"messages": messages}]}, capsys, name="p", arguments=""
    )
    assert code == 0
    assert out == [
        "?: [str where a content block belongs]",
        "user: [str where a content block belongs]",
    ]
