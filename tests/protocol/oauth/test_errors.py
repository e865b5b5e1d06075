"""The OAuth core's errors: what their messages say, and which of them tell the
daemon that only a new login helps."""

from __future__ import annotations

import pytest

from protocol.oauth.errors import (
    AuthorizationDenied,
    BlockedUrl,
    NoAuthorizationMetadata,
    OAuthConfigError,
    OAuthError,
    OAuthProtocolError,
    OAuthUsageError,
    StepUpLimit,
    TokenEndpointError,
)

A = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
B = "https://mcp.example.com/.well-known/oauth-protected-resource"


@pytest.mark.parametrize(
    "error",
    [
        OAuthUsageError,
        OAuthConfigError,
        OAuthProtocolError,
        BlockedUrl,
        StepUpLimit,
    ],
)
def test_every_error_is_an_oauth_error(error: type[Exception]) -> None:
    # The daemon catches OAuthError to tell a server's fault from a bug of its own.
    assert issubclass(error, OAuthError)
    assert isinstance(NoAuthorizationMetadata(((A, 404),)), OAuthError)
    assert isinstance(AuthorizationDenied("m", error="access_denied"), OAuthError)
    assert isinstance(TokenEndpointError("m", status=400), OAuthError)


def test_urls_that_answered_alike_are_listed_with_one_answer() -> None:
    exc = NoAuthorizationMetadata(((A, 404), (B, 404)))
    assert exc.where == f'"{A}", "{B}" (HTTP 404)'
    assert str(exc) == f'no OAuth authorization metadata at "{A}", "{B}" (HTTP 404)'
    assert exc.looked_at == ((A, 404), (B, 404))
    assert exc.detail == ""


def test_urls_that_answered_differently_each_say_what_they_answered() -> None:
    exc = NoAuthorizationMetadata(((A, 404), (B, 301)))
    assert exc.where == f'"{A}" (HTTP 404), "{B}" (HTTP 301, a redirect, not followed)'


@pytest.mark.parametrize(
    ("status", "redirect"), [(299, False), (300, True), (399, True), (400, False)]
)
def test_only_3xx_answers_are_called_redirects(status: int, redirect: bool) -> None:
    assert ("redirect" in NoAuthorizationMetadata(((A, status),)).where) == redirect


def test_what_a_guessed_endpoint_answered_follows_the_urls() -> None:
    exc = NoAuthorizationMetadata(((A, 404),), "the registration endpoint answered HTTP 200")
    assert str(exc) == (
        f'no OAuth authorization metadata at "{A}" (HTTP 404); '
        "the registration endpoint answered HTTP 200"
    )
    assert exc.detail == "the registration endpoint answered HTTP 200"


@pytest.mark.parametrize(
    ("error", "needs_login"),
    [
        ("invalid_grant", True),
        ("invalid_client", False),
        ("invalid_request", False),
        ("temporarily_unavailable", False),
        ("INVALID_GRANT", False),
        (None, False),
    ],
)
def test_only_a_grant_that_is_gone_asks_for_a_new_login(
    error: str | None, needs_login: bool
) -> None:
    exc = TokenEndpointError("refused", status=400, error=error)
    assert exc.needs_login is needs_login


def test_a_refusal_keeps_its_parts_and_the_words_without_advice() -> None:
    exc = TokenEndpointError(
        "token request was refused (HTTP 400); a new login is needed",
        status=400,
        error="invalid_grant",
        description="expired",
        refused="token request was refused (HTTP 400)",
    )
    assert (exc.status, exc.error, exc.description) == (400, "invalid_grant", "expired")
    assert exc.refused == "token request was refused (HTTP 400)"
    assert str(exc).endswith("a new login is needed")


def test_a_refusal_without_separate_words_uses_its_message() -> None:
    exc = TokenEndpointError("revocation was refused (HTTP 503)", status=503)
    assert exc.refused == "revocation was refused (HTTP 503)"
    assert exc.error is None and exc.description is None


def test_a_denied_authorization_keeps_the_code_and_description() -> None:
    exc = AuthorizationDenied("the user declined", error="access_denied", description="no")
    assert (str(exc), exc.error, exc.description) == ("the user declined", "access_denied", "no")
    assert AuthorizationDenied("m", error="x").description is None
