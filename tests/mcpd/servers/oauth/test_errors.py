"""What can go wrong with a server's authorization: which errors the runners take for
a transport's (so a login wait is not a failure), and the words each one gives."""

from __future__ import annotations

import pytest

from mcpd.servers.oauth.errors import (
    AuthFailed,
    LoginError,
    LoginRequired,
    NoOAuthLogin,
    RedirectFailed,
    why,
)
from transports.errors import TransportError


def test_a_login_wait_and_a_failed_renewal_are_transport_errors() -> None:
    # Every runner, session and scheduler catches TransportError: these must reach them.
    assert issubclass(LoginRequired, TransportError)
    assert issubclass(AuthFailed, TransportError)
    assert not issubclass(LoginRequired, AuthFailed)


def test_login_errors_are_for_the_person_not_the_transport() -> None:
    assert issubclass(RedirectFailed, LoginError) and issubclass(NoOAuthLogin, LoginError)
    assert not issubclass(LoginError, TransportError)


@pytest.mark.parametrize(
    ("exc", "said"),
    [
        (LoginRequired("run `mcpd auth login srv`"), "run `mcpd auth login srv`"),
        (AuthFailed("cannot refresh", detail="HTTP 500 body"), "cannot refresh"),
        (TransportError("connection refused", detail="more"), "connection refused"),
        (ValueError("bad value"), "bad value"),
        (NoOAuthLogin("no OAuth"), "no OAuth"),
    ],
)
def test_why_gives_the_one_line_reason_without_the_detail(exc: Exception, said: str) -> None:
    assert why(exc) == said
