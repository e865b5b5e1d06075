"""A call's arguments as a person is shown them: at a glance, every key where they fit
and long values shortened where they stand, saying how much is left out; whole, every
part; and where even the keys do not fit, a glance that says how many it leaves out.
Through a running daemon, ``mcpd approvals`` shows every key of long arguments and
``mcpd approvals show`` all of them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.policy.redaction.masking import SecretSet, marker
from mcpd.policy.shown.reading import RepeatedKey, Unshowable, read_arguments
from mcpd.policy.shown.showing import GLANCE, canonical_json, glance, shown_arguments, whole_json
from tests.support.cli.on_socket import mcpd
from tests.support.clients.agent import connect
from tests.support.daemons.policy import LIMIT, policy_daemon, text

SECRET = "tok-9f8e7d6c5b4a3210"
WHERE = "servers.github.env.GITHUB_TOKEN"
BODY = "Small wording fix. " * 480
# The decisive keys come after a body longer than any view shows whole.
LONG = {
    "title": "Fix typo in README",
    "body": BODY,
    "repo": "acme/PRODUCTION-SECRETS",
    "force": True,
}


def encoded(value: object) -> bytes:
    return json.dumps(value).encode()


def test_short_arguments_are_shown_whole_and_compact() -> None:
    shown = shown_arguments(b'{"repo": "acme/web",  "n": [1, 2.50]}')
    assert shown.glance.text == '{"repo":"acme/web","n":[1,2.50]}'
    assert not shown.glance.shortened and shown.glance.keys_left_out == 0


def test_no_arguments_are_an_empty_object() -> None:
    assert shown_arguments(None).glance.text == "{}"


def test_one_canonical_writing_for_every_spelling_readers_read_alike() -> None:
    spellings = [
        b'{"b": [{"y": 1.50, "x": "\\u00e9"}], "a": -0}',
        b'{"a":-0,"b":[{"x":"\xc3\xa9","y":1.50}]}',
    ]
    written = {canonical_json(read_arguments(s)) for s in spellings}
    assert written == {'{"a":-0,"b":[{"x":"\u00e9","y":1.50}]}'}
    # A number is kept as written: a decimal reader tells these apart.
    assert canonical_json(read_arguments(b'{"y":1.5}')) != canonical_json(
        read_arguments(b'{"y":1.50}')
    )


def test_a_long_value_is_shortened_where_it_stands_and_every_key_after_it_shows() -> None:
    seen = shown_arguments(encoded(LONG)).glance
    assert seen.shortened and seen.keys_left_out == 0
    assert len(seen.text) <= GLANCE
    assert seen.text.endswith(',"repo":"acme/PRODUCTION-SECRETS","force":true}')
    assert seen.text.startswith('{"title":"Fix typo in README","body":"Small wording fix. ')
    found = re.search(r'"body":"([^"]*)"…\((\d+) more characters\)', seen.text)
    assert found is not None and BODY.startswith(found[1])
    assert len(found[1]) + int(found[2]) == len(BODY)


def test_a_long_array_keeps_its_first_items_and_every_item_that_holds_a_key() -> None:
    value = {"ids": [*range(5000), {"force": True}, *range(3000), [[{"repo": "prod"}]]]}
    seen = shown_arguments(encoded(value)).glance
    assert seen.shortened and seen.keys_left_out == 0 and len(seen.text) <= GLANCE
    assert '{"force":true}' in seen.text and '[[{"repo":"prod"}]]' in seen.text
    left = [int(n) for n in re.findall(r"…\((\d+) more items\)", seen.text)]
    shown_items = seen.text.count(",") - len(left) - 1  # separators, less the notes' and the key's
    assert sum(left) + shown_items == 8000


def test_every_key_at_every_depth_shows_when_values_are_long() -> None:
    value = {f"k{n}": {"inner": "v" * 3000, f"deep{n}": [n]} for n in range(20)}
    seen = shown_arguments(encoded(value)).glance
    assert seen.keys_left_out == 0
    for n in range(20):
        assert f'"k{n}":{{"inner":' in seen.text and f'"deep{n}":[{n}]' in seen.text


def test_where_even_the_keys_do_not_fit_the_glance_says_how_many_it_leaves_out() -> None:
    value = {f"key_{n:04}": n for n in range(1000)}
    seen = shown_arguments(encoded(value)).glance
    assert seen.keys_left_out > 0 and seen.shortened
    shown_keys = re.findall(r'"key_\d{4}":', seen.text)
    assert len(shown_keys) + seen.keys_left_out == 1000
    assert seen.text.endswith(f"…({seen.keys_left_out} more keys and their values left out)")
    assert len(seen.text) <= GLANCE + 60


def test_the_whole_is_every_part_one_member_or_item_a_line() -> None:
    shown = shown_arguments(encoded(LONG))
    whole = shown.whole()
    assert json.loads(whole) == LONG
    assert whole.splitlines()[3] == '  "repo": "acme/PRODUCTION-SECRETS",'
    assert shown.whole() == whole  # written again the same


def test_long_values_are_shortened_after_masking_so_no_part_of_a_secret_shows() -> None:
    secrets = SecretSet([HeldSecret(WHERE, SECRET)])
    for at in range(290, 310):  # the secret straddles each place a cut may fall
        value = {"k": "a" * at + SECRET + "b" * 50_000, "after": 1}
        seen = shown_arguments(encoded(value), secrets).glance
        assert SECRET[:6] not in seen.text and seen.text.endswith(',"after":1}')
    whole = shown_arguments(encoded(value), secrets).whole()
    assert SECRET not in whole and marker(WHERE) in whole


def test_a_glance_written_to_a_smaller_room_keeps_the_keys() -> None:
    seen = glance(read_arguments(encoded(LONG)), limit=200)
    assert seen.keys_left_out == 0 and len(seen.text) <= 200
    assert '"repo":"acme/PRODUCTION-SECRETS","force":true}' in seen.text


@pytest.mark.parametrize(
    ("raw", "refused"),
    [
        (b'{"repo":"acme/prod","action":"delete","pad":1e400}', Unshowable),
        (b'{"a":1,"a":2}', RepeatedKey),
        (b"{not json", Unshowable),
    ],
)
def test_what_cannot_be_shown_as_the_server_reads_it_is_refused(
    raw: bytes, refused: type[Exception]
) -> None:
    with pytest.raises(refused):
        shown_arguments(raw)


def test_the_audit_text_of_a_doubtful_reading_is_its_whole_compact() -> None:
    assert (
        whole_json(read_arguments(b'{"pad": 1e400, "s": "\\ud800"}'))
        == '{"pad":1e400,"s":"\\ud800"}'
    )


# -- through a running daemon --


async def test_the_operator_sees_every_key_of_long_arguments_and_can_read_them_whole(
    tmp_path: Path,
) -> None:
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path) as setup:
            sock = Path(setup.daemon.socket_path)
            async with connect(setup.daemon.socket_path) as agent, trio.open_nursery() as nursery:
                got: list[Any] = []

                async def call() -> None:
                    got.append(await agent.call("mcp__gh__create_issue", {**LONG, "text": "t"}))

                nursery.start_soon(call)
                [waiting] = await setup.pending()
                listed = await mcpd(sock, "approvals")
                [arguments] = [x for x in listed.splitlines() if x.startswith('  {"title"')]
                assert arguments.endswith(
                    ',"repo":"acme/PRODUCTION-SECRETS","force":true,"text":"t"}'
                )
                assert re.search(r'"body":"Small wording fix\. [^"]*"…\(\d+ more', arguments)
                assert f"mcpd approvals show {waiting.id} shows them whole" in listed
                [as_json] = json.loads(await mcpd(sock, "approvals", "--json"))
                assert as_json["shortened"] is True and as_json["keys_left_out"] == 0
                assert '"repo":"acme/PRODUCTION-SECRETS","force":true' in as_json["arguments"]
                whole = await mcpd(sock, "approvals", "show", waiting.id)
                assert f'    "body": "{BODY}",' in whole.splitlines()
                assert '    "repo": "acme/PRODUCTION-SECRETS",' in whole.splitlines()
                assert '    "force": true,' in whole.splitlines()
                setup.daemon.approvals.decide(waiting.id, True, "uid 0 (root)")
            assert text(got[0]) == "create_issue:t"
            [sent] = setup.reached("create_issue")
            assert sent["params"]["arguments"] == {**LONG, "text": "t"}
