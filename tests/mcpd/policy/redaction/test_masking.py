"""Masking the secrets mcpd holds, where the tests of the config's secrets do not go:
whose marker each masked secret leaves, secrets inside, beside and around each other,
JSON values, and the secrets of sources a server has a say in."""

from __future__ import annotations

from mcpd.config.credentials.secrets import HeldSecret
from mcpd.policy.redaction.masking import KnownSecrets, SecretSet, marker

A, B, C = "servers.a.env.KEY", "servers.b.env.KEY", "servers.c.env.KEY"


def secrets(*pairs: tuple[str, str]) -> SecretSet:
    return SecretSet([HeldSecret(where, value) for where, value in pairs])


def test_each_marker_put_in_is_told_whose_it_was_in_order() -> None:
    s = secrets((A, "alpha-123"), (B, "beta-4567"))
    seen: list[str] = []
    assert s.mask("beta-4567 then alpha-123 and beta-4567", seen) == (
        f"{marker(B)} then {marker(A)} and {marker(B)}"
    )
    assert seen == [B, A, B]
    seen = []
    assert s.mask("nothing", seen) == "nothing" and seen == []


def test_a_secret_inside_another_is_masked_with_it_once() -> None:
    s = secrets((A, "outer-secret-value"), (B, "secret"))
    seen: list[str] = []
    assert s.mask("[outer-secret-value]", seen) == f"[{marker(A)}]"
    assert seen == [A]
    # A secret that ends another one is found by the same pass.
    s = secrets((A, "abcdefgh"), (B, "efgh"))
    assert s.mask("xxabcdefghxx efgh") == f"xx{marker(A)}xx {marker(B)}"


def test_secrets_side_by_side_are_masked_apart() -> None:
    s = secrets((A, "first-1"), (B, "second-2"))
    seen: list[str] = []
    assert s.mask("first-1second-2", seen) == marker(A) + marker(B)
    assert seen == [A, B]


def test_a_chain_of_overlaps_is_one_marker_whatever_its_length() -> None:
    s = secrets((A, "abcabc"), (B, "cabcab"))
    text = "abcabc" * 50
    seen: list[str] = []
    assert s.mask(f"<{text}>", seen) == f"<{marker(A)}>"
    assert seen == [A]


def test_one_value_held_twice_is_one_secret_under_its_first_owner() -> None:
    s = secrets((A, "shared-token"), (B, "shared-token"), (C, ""))
    assert s.size == 1
    assert s.mask("shared-token") == marker(A)


def test_no_secret_leaves_text_and_values_as_they_are() -> None:
    s = secrets((A, ""))
    value = {"a": ["b", 1]}
    assert s.size == 0
    assert s.mask_value(value) is value
    assert s.find("anything") == [] and s.mask("anything") == "anything"


def test_a_secret_in_any_part_of_a_json_value_is_masked() -> None:
    s = secrets((A, "tok-secret"), (B, "31415926"))
    value = {
        "tok-secret": {"nested": ["x tok-secret y", {"deep-tok-secret": 31415926}]},
        "float": 31415926.5,
        "negative": -31415926,
        "flag": True,
        "none": None,
        "other": 27182818,
    }
    seen: list[str] = []
    assert s.mask_value(value, seen) == {
        marker(A): {"nested": [f"x {marker(A)} y", {f"deep-{marker(A)}": marker(B)}]},
        "float": f"{marker(B)}.5",
        "negative": f"-{marker(B)}",
        "flag": True,
        "none": None,
        "other": 27182818,
    }
    assert sorted(seen) == [A, A, A, B, B, B]
    assert value["tok-secret"] == {"nested": ["x tok-secret y", {"deep-tok-secret": 31415926}]}


def test_a_marker_in_the_text_is_left_as_it_is() -> None:
    s = secrets((A, "tok-secret"))
    text = f"{marker(B)} is what it says"
    assert s.mask(text) == text


def test_secrets_of_any_characters_are_found() -> None:
    s = secrets((A, "p\u00e4ss.w*rd(\U0001f511)"), (B, "line\nbreak"))
    assert s.mask("x p\u00e4ss.w*rd(\U0001f511) line\nbreak pass.word") == (
        f"x {marker(A)} {marker(B)} pass.word"
    )


# -- the set held now --


def test_the_set_is_built_again_only_when_what_is_held_changes() -> None:
    tokens = [HeldSecret("servers.b (OAuth)", "access-token-1")]
    known = KnownSecrets()
    known.watch("oauth", lambda: iter(tokens))
    first = known.current()
    assert known.current() is first
    tokens[0] = HeldSecret("servers.c (OAuth)", "access-token-1")  # same value, new owner
    assert known.current() is not first
    assert known.mask("access-token-1") == marker("servers.c (OAuth)")
    known.watch("oauth", lambda: ())  # watched anew under its name: replaced
    assert known.mask("access-token-1") == "access-token-1"


def test_what_is_held_comes_from_every_place() -> None:
    known = KnownSecrets()
    known.replace("config", [HeldSecret(A, "config-value")])
    known.replace("next config", [HeldSecret(B, "next-config-value")])
    known.watch("daemon", lambda: [HeldSecret(C, "endpoint-token")])
    assert [s.where for s in known.held()] == [A, B, C]
    assert known.mask_value(["config-value", "next-config-value", "endpoint-token"]) == [
        marker(A),
        marker(B),
        marker(C),
    ]


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
