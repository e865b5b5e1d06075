"""``mcpd auth status`` for people: rendering only, no daemon."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize(
    "expires_at",
    # Past the last day a clock can show once in local time, east or west of UTC.
    ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "soon\x1b[2J"],
)
def test_an_expiry_no_clock_here_can_show_is_shown_as_written_and_visible(
    expires_at: str,
) -> None:
    out = render_auth_status([login_row("web", logged_in=True, expires_at=expires_at)])
    assert "\x1b" not in out
    assert expires_at.replace("\x1b", "\\x1b") in out
