"""``mcpd auth status`` for people: rendering only, no daemon."""

from __future__ import annotations

from mcpd.cli.logins.auth import render_auth_status


def test_an_issuer_written_with_non_ascii_letters_is_shown_in_ascii_and_said_to_be() -> None:
    homograph = "https://\u0430ccounts.google.com"
    out = render_auth_status(
        [
            {
                "server": "tickets",
                "state": "needs_login",
                "issuer": homograph,
                "scopes": ["read"],
                "needs_login": f"the server moved to the authorization server {homograph}",
            }
        ]
    )
    assert "\u0430" not in out
    (row, reason) = out.splitlines()[1:]
    assert "https://xn--ccounts-1fg.google.com (written with non-ASCII letters) read" in row
    assert reason.strip().startswith("the server moved to the authorization server https://xn--")
    assert "is written with non-ASCII letters" in reason
