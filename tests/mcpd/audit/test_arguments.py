"""The arguments a record keeps with ``audit_arguments``: masked; at most so many bytes,
before and after masking; and when an object gives a key twice, at any depth, or a
decoding cannot read them (a number past a double, half of a UTF-16 pair), the text the
server was sent, masked as the decoded form would be, never one decoder's pick nor a
note that hides them."""

from __future__ import annotations

import json

import msgspec
import pytest

from mcpd.audit.arguments import MAX_KEPT, kept_arguments
from mcpd.config.credentials.secrets import HeldSecret
from mcpd.policy.redaction.masking import SecretSet, marker

SECRET = "ghp-secret-1"
WHERE = "servers.gh.headers.Authorization"
SECRETS = SecretSet([HeldSecret(WHERE, SECRET)])
MASKED = marker(WHERE)


def test_arguments_are_kept_decoded_with_secrets_masked() -> None:
    kept = kept_arguments(b'{"note": "token ghp-secret-1", "n": [1, 2.5, null]}', SECRETS)
    assert isinstance(kept, msgspec.Raw)
    assert json.loads(bytes(kept)) == {"note": f"token {MASKED}", "n": [1, 2.5, None]}


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b'{"mode": "delete", "mode": "read"}', '{"mode":"delete","mode":"read"}'),
        (
            b'{"ops": [1, {"path": "/a", "x": {"k": 1, "k": 2}}]}',
            '{"ops":[1,{"path":"/a","x":{"k":1,"k":2}}]}',
        ),
        # The same key, spelled with an escape: a parser reads it as the same.
        (b'{"a": 1, "\\u0061": 2.50}', '{"a":1,"a":2.50}'),
        (b'[{"t": true, "t": false}]', '[{"t":true,"t":false}]'),
    ],
)
def test_a_key_given_twice_at_any_depth_keeps_the_text_as_sent(raw: bytes, text: str) -> None:
    assert kept_arguments(raw, SecretSet(())) == text


def test_the_text_kept_is_masked_however_a_secret_is_spelled() -> None:
    raw = b'{"k": "ghp\\u002dsecret-1", "k": 1, "ghp-secret-1": "x", "n": 5}'
    kept = kept_arguments(raw, SECRETS)
    assert isinstance(kept, str) and SECRET not in kept and "\\u002d" not in kept
    assert json.loads(f"[{kept}]") == [{"k": 1, MASKED: "x", "n": 5}]
    assert kept.count(json.dumps(MASKED)) == 2
    digits = SecretSet([HeldSecret("daemon.pin", "31415926")])
    assert kept_arguments(b'{"p": 31415926, "p": 0}', digits) == (
        f'{{"p":{json.dumps(marker("daemon.pin"))},"p":0}}'
    )


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (
            b'{"repo": "acme/prod", "action": "delete", "pad": 1e400}',
            '{"repo":"acme/prod","action":"delete","pad":1e400}',
        ),
        (b'{"pad": -1.8E308, "n": 1.10}', '{"pad":-1.8E308,"n":1.10}'),
        (b'{"pad": "\\ud800", "k": "ghp-secret-1"}', f'{{"pad":"\\ud800","k":"{MASKED}"}}'),
    ],
)
def test_arguments_a_decoding_cannot_read_are_kept_as_sent(raw: bytes, text: str) -> None:
    kept = kept_arguments(raw, SECRETS)
    assert kept == text


def test_what_cannot_be_kept_is_a_note() -> None:
    assert kept_arguments(b"not json", SECRETS) == "(not valid JSON)"
    assert kept_arguments(b'{"a": NaN}', SECRETS) == "(not valid JSON)"
    big = b'{"x": "' + b"a" * MAX_KEPT + b'"}'
    assert kept_arguments(big, SECRETS) == f"({len(big)} bytes, more than the 65536 kept)"


@pytest.mark.parametrize("twice", [False, True])
def test_arguments_that_masking_makes_too_large_are_a_note(twice: bool) -> None:
    """A secret's marker is longer than it: what is kept is measured once masked."""
    items = ",".join([f'"{SECRET}"'] * (MAX_KEPT // 20))
    raw = f'{{"a": [{items}]{", " + chr(34) + "a" + chr(34) + ": 1" if twice else ""}}}'.encode()
    assert len(raw) <= MAX_KEPT
    kept = kept_arguments(raw, SECRETS)
    assert isinstance(kept, str) and kept.endswith("kept)") and kept.startswith("(")


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (
            b'{"ghp-secret-1": "DANGEROUS", "[secret of ' + WHERE.encode() + b']": "harmless"}',
            f'{{"{MASKED}":"DANGEROUS","{MASKED}":"harmless"}}',
        ),
        # Keys that only hold the secret, deep in the arguments.
        (
            b'{"a": [{"aghp-secret-1": 1, "a' + MASKED.encode() + b'": 2}]}',
            f'{{"a":[{{"a{MASKED}":1,"a{MASKED}":2}}]}}',
        ),
    ],
)
def test_keys_masking_makes_one_are_each_kept_as_sent(raw: bytes, text: str) -> None:
    assert kept_arguments(raw, SECRETS) == text
