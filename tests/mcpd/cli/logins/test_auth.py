"""``mcpd auth status`` for people: rendering only, no daemon."""

from __future__ import annotations

from mcpd.cli.logins.auth import render_auth_status
from tests.support.parts.status_rows import login_row


def test_an_issuer_written_with_non_ascii_letters_is_shown_in_ascii_and_said_to_be() -> None:
    homograph = "https://\u0430ccounts.google.com"
    out = render_auth_status(
        [
            login_row(
                "tickets",
                issuer=homograph,
                scopes=["read"],
                needs_login=f"the server moved to the authorization server {homograph}",
            )
        ]
    )
    assert "\u0430" not in out
    (row, reason) = out.splitlines()[1:]
    assert "https://xn--ccounts-1fg.google.com (written with non-ASCII letters) read" in row
    assert reason.strip().startswith("the server moved to the authorization server https://xn--")
    assert "is written with non-ASCII letters" in reason


def test_a_saved_login_of_a_server_no_longer_configured_is_listed_with_how_to_remove_it() -> None:
    out = render_auth_status([], ["cc"])
    assert out.splitlines() == [
        "no HTTP servers",
        "cc: not configured, its saved login stays on disk; "
        "`mcpd auth logout cc` revokes and removes it",
    ]
