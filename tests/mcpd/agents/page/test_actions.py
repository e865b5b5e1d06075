"""What every action on the page must carry before it is done: a session, the session's
CSRF token (as the script's header or a form field) and an Origin that is the page's own;
each refusal says which is missing, as JSON for the page's script."""

from __future__ import annotations

import json

import pytest

from mcpd.agents.http_wire import Headers, Reject
from mcpd.agents.page.actions import MAX_FORM, NO_SESSION, checked_form
from mcpd.agents.page.assets import SECURITY_HEADERS
from mcpd.agents.page.passes import PageSession

SESSION = PageSession("the-csrf", 0.0, b"")
HOST = "127.0.0.1:8765"


def headers(**fields: str) -> Headers:
    base = {"host": HOST, "origin": f"http://{HOST}"}
    base.update({k.replace("_", "-"): v for k, v in fields.items()})
    return Headers((k.encode(), v.encode("latin-1")) for k, v in base.items())


def refusal(h: Headers, body: bytes, session: PageSession | None = SESSION) -> tuple[int, str]:
    with pytest.raises(Reject) as info:
        checked_form(h, body, session)
    return info.value.status, json.loads(info.value.body)["error"]


def test_a_form_with_the_token_in_a_field_passes() -> None:
    form = checked_form(headers(), b"csrf=the-csrf&id=7&decision=approve", SESSION)
    assert form == {"csrf": "the-csrf", "id": "7", "decision": "approve"}


def test_the_scripts_header_carries_the_token_too() -> None:
    form = checked_form(headers(x_mcpd_csrf="the-csrf"), b"server=notes", SESSION)
    assert form == {"server": "notes"}


def test_an_action_without_a_session_is_refused() -> None:
    assert refusal(headers(), b"csrf=the-csrf", None) == (403, NO_SESSION)


@pytest.mark.parametrize(
    ("h", "body"),
    [
        (headers(), b"id=7"),
        (headers(), b"csrf=other"),
        (headers(x_mcpd_csrf="other"), b"csrf=the-csrf"),  # the header is the one read
        (headers(), b"csrf="),
    ],
)
def test_an_action_without_the_sessions_csrf_token_is_refused(h: Headers, body: bytes) -> None:
    assert refusal(h, body) == (403, "this request does not carry the page's CSRF token")


@pytest.mark.parametrize(
    "origin",
    [
        "https://127.0.0.1:8765",
        "http://127.0.0.1:8766",
        "http://evil.example.test",
        "null",
        "",
    ],
)
def test_an_action_from_another_origin_is_refused(origin: str) -> None:
    assert refusal(headers(origin=origin), b"csrf=the-csrf") == (
        403,
        "this request does not come from the page itself",
    )


def test_an_action_without_an_origin_is_refused() -> None:
    h = Headers([(b"host", HOST.encode())])
    assert refusal(h, b"csrf=the-csrf")[1] == "this request does not come from the page itself"


def test_only_the_start_of_a_long_form_is_read() -> None:
    padding = b"pad=" + b"x" * MAX_FORM
    assert refusal(headers(), padding + b"&csrf=the-csrf")[0] == 403
    assert checked_form(headers(), b"csrf=the-csrf&" + padding, SESSION)["csrf"] == "the-csrf"


def test_a_refusal_is_json_with_the_pages_security_headers() -> None:
    with pytest.raises(Reject) as info:
        checked_form(headers(), b"", None)
    assert info.value.headers == [(b"content-type", b"application/json"), *SECURITY_HEADERS]
