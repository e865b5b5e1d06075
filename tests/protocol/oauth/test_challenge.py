from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.oauth.challenge import (
    BearerChallenge,
    Challenge,
    bearer_challenge,
    parse_www_authenticate,
    split_scope,
)
from tests.support.hostile.cut_secret import MARKER, SECRET, beginnings, guarded, padded


def test_the_401_an_mcp_server_sends() -> None:
    header = (
        'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource",'
        ' scope="files:read"'
    )
    assert bearer_challenge([header]) == BearerChallenge(
        resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource",
        scope=("files:read",),
    )


def test_the_403_of_a_step_up() -> None:
    header = (
        'Bearer error="insufficient_scope", scope="mcp:admin", '
        'resource_metadata="http://localhost:3000/.well-known/oauth-protected-resource/mcp", '
        'error_description="Scope upgrade will never succeed"'
    )
    challenge = bearer_challenge([header])
    assert challenge is not None
    assert challenge.insufficient_scope
    assert challenge.scope == ("mcp:admin",)
    assert challenge.error_description == "Scope upgrade will never succeed"


def test_quoted_strings_with_escapes_and_commas() -> None:
    (c,) = parse_www_authenticate(['Bearer realm="a \\"b\\", c\\\\d", error=invalid_token'])
    assert c.params == {"realm": 'a "b", c\\d', "error": "invalid_token"}


def test_several_challenges_in_one_header_and_across_headers() -> None:
    got = parse_www_authenticate(
        [
            'Basic realm="x", Bearer scope="a b", error="invalid_token"',
            'Negotiate abc123==, DPoP algs="ES256"',
        ]
    )
    assert got == [
        Challenge("basic", {"realm": "x"}),
        Challenge("bearer", {"scope": "a b", "error": "invalid_token"}),
        Challenge("negotiate", {}, "abc123=="),
        Challenge("dpop", {"algs": "ES256"}),
    ]
    assert bearer_challenge(['Basic realm="x"', 'Bearer scope="a b"']) == BearerChallenge(
        scope=("a", "b")
    )


def test_scheme_and_parameter_names_are_case_insensitive() -> None:
    c = bearer_challenge(['BEARER Resource_Metadata="https://r", SCOPE="x"'])
    assert c == BearerChallenge(resource_metadata="https://r", scope=("x",))


def test_white_space_around_equals_and_empty_list_elements() -> None:
    (c,) = parse_www_authenticate([' , Bearer  scope = "a" ,, error= "e" , '])
    assert c.params == {"scope": "a", "error": "e"}


def test_first_of_duplicate_parameters_wins() -> None:
    assert bearer_challenge(['Bearer scope="a", scope="b"']) == BearerChallenge(scope=("a",))


def test_a_bare_scheme() -> None:
    assert bearer_challenge(["Bearer"]) == BearerChallenge()
    assert parse_www_authenticate(["Bearer, Basic"]) == [Challenge("bearer"), Challenge("basic")]


def test_garbage_costs_only_its_own_piece() -> None:
    c = bearer_challenge(['Bearer error="x", scope="unterminated'])
    assert c == BearerChallenge(error="x")
    c = bearer_challenge(['Bearer @@@, scope="ok", resource_metadata="https://r"'])
    assert c == BearerChallenge(resource_metadata="https://r", scope=("ok",))
    assert parse_www_authenticate(['Bearer scope="a\x01b"']) == [Challenge("bearer")]


def test_no_bearer_challenge_but_metadata_elsewhere() -> None:
    assert bearer_challenge(['Basic realm="x"']) is None
    assert bearer_challenge([]) is None
    got = bearer_challenge(['DPoP resource_metadata="https://r/prm"'])
    assert got == BearerChallenge(resource_metadata="https://r/prm")


@pytest.mark.parametrize(
    ("value", "scopes"),
    [
        (None, None),
        ("", None),
        ("   ", None),
        ("a", ("a",)),
        ("a  b a\tc", ("a", "b", "c")),
    ],
)
def test_split_scope(value: str | None, scopes: tuple[str, ...] | None) -> None:
    assert split_scope(value) == scopes


def test_empty_scope_means_no_guidance() -> None:
    assert bearer_challenge(['Bearer scope=""']) == BearerChallenge()


_token = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=8)
_value = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)


@given(st.dictionaries(_token, _value, min_size=1, max_size=4))
def test_quoted_values_round_trip(params: dict[str, str]) -> None:
    def quote(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'

    header = "Bearer " + ", ".join(f"{k}={quote(v)}" for k, v in params.items())
    assert parse_www_authenticate([header]) == [Challenge("bearer", params)]


@given(st.text(max_size=80))
def test_never_raises(text: str) -> None:
    parse_www_authenticate([text])
    bearer_challenge([text])


def test_the_words_of_a_challenge_are_quoted_only_as_far_as_they_are_safe() -> None:
    plain = bearer_challenge(['Bearer error="invalid_token", error_description="key missing"'])
    assert plain is not None
    assert plain.words() == 'Bearer error="invalid_token", error_description="key missing"'
    assert BearerChallenge().words() == "Bearer"
    # A server's text cannot close the quotes, hide text or speak at length.
    hostile = BearerChallenge(
        error="invalid_token",
        error_description='x", mcpd says="fine\u202e\u200b\\' + "a" * 300,
    )
    said = hostile.words()
    assert said.startswith(
        'Bearer error="invalid_token", error_description="x?, mcpd says=?fine???'
    )
    assert said.endswith('a… (and 202 more characters)"') and said.count('"') == 4
    assert all(" " <= c <= "~" or c == "…" for c in said)
    assert len(said) < 200


@given(st.text())
def test_words_are_always_printable_ascii_in_two_quotes(text: str) -> None:
    said = BearerChallenge(error=text or None, error_description=text or None).words()
    assert all(" " <= c <= "~" or c == "…" for c in said)
    assert said.count('"') in (0, 4)


def test_a_description_cut_inside_a_secret_shows_none_of_it_once_guarded() -> None:
    said = BearerChallenge(error_description=padded(120)).words()
    assert SECRET[:-1] in said and SECRET not in said
    assert beginnings(guarded(said)) == [] and MARKER in guarded(said)
