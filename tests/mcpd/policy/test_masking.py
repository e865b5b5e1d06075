"""Masking the secrets mcpd holds, where the tests of the config's secrets do not go:
whose marker each masked secret leaves, secrets inside, beside and around each other,
JSON values, and the secrets of sources a server has a say in."""

from __future__ import annotations

from mcpd.config.secrets import HeldSecret
from mcpd.policy.masking import KnownSecrets, marker


def test_a_token_too_short_to_tell_from_text_is_not_masked_everywhere() -> None:
    # A server's authorization server chooses its tokens: a token of one letter would
    # have that letter masked in everything mcpd writes and every server's replies.
    tokens = ["e"]
    known = KnownSecrets()
    known.watch("daemon", lambda: [HeldSecret("servers.evil (OAuth)", t) for t in tokens])
    text = "every server's text, every line of the log"
    assert known.mask(text) == text
    assert known.mask_value({"text": text}) == {"text": text}
    assert known.held() == []
    tokens[0] = "long-enough-token"
    assert known.mask("a long-enough-token") == f"a {marker('servers.evil (OAuth)')}"
