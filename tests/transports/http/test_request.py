"""What a Streamable HTTP request carries: the transport's headers, the configured
ones and the caller's, the version a legacy session repeats, its session id."""

from __future__ import annotations

import logging

import pytest

from protocol.http.parts import Origin, ResponseHead
from transports.errors import SessionExpired, UnexpectedReply
from transports.http.request import OutgoingMessage, RequestHeaders, SessionId, redirect_target


def named(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    return {k.decode().lower(): v.decode() for k, v in headers}


def test_a_callers_header_wins_over_a_configured_one_of_the_same_name() -> None:
    head = RequestHeaders("h:8080", {"X-Key": "configured", "X-Other": "o"})
    sent = head.post([("x-key", "caller")], OutgoingMessage("tools/call", 1, None))
    names = [k.decode().lower() for k, _ in sent]
    assert names.count("x-key") == 1
    assert named(sent) == {
        "host": "h:8080",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "accept-encoding": "identity",
        "x-other": "o",
        "x-key": "caller",
    }


def test_the_version_a_request_carried_goes_with_later_notifications() -> None:
    head = RequestHeaders("h", {})
    note = OutgoingMessage("notifications/initialized", None, "sid")
    assert "mcp-protocol-version" not in named(head.post([], note))
    head.post([("MCP-Protocol-Version", "2025-06-18")], OutgoingMessage("initialize", 1, None))
    sent = named(head.post([], note))
    assert (sent["mcp-protocol-version"], sent["mcp-session-id"]) == ("2025-06-18", "sid")
    stream = named(head.stream("sid", "ev-9"))
    assert (stream["mcp-protocol-version"], stream["last-event-id"]) == ("2025-06-18", "ev-9")
    assert stream["accept"] == "text/event-stream"


def test_headers_the_transport_sets_cannot_be_configured() -> None:
    with pytest.raises(ValueError, match="Mcp-Session-Id is set by the transport"):
        RequestHeaders("h", {"Mcp-Session-Id": "forged"})


def reply(session: str | None) -> ResponseHead:
    return ResponseHead(200, "OK", [] if session is None else [("mcp-session-id", session)])


def test_a_session_id_is_taken_once_from_a_legacy_reply_and_never_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = SessionId("s")
    with caplog.at_level(logging.DEBUG):
        session.capture(reply("abc-123"), "legacy", "initialize")
        session.capture(reply("abc-123"), "legacy", "initialize")
    assert session.value == "abc-123"
    assert caplog.text.count("legacy session started") == 1
    assert "abc-123" not in caplog.text


@pytest.mark.parametrize(
    ("era", "given"),
    [("modern", "abc"), ("legacy", "has space"), ("legacy", "caf\u00e9"), ("legacy", None)],
)
def test_no_session_is_kept_from_a_modern_server_or_a_malformed_id(
    era: str, given: str | None
) -> None:
    session = SessionId("s")
    session.capture(reply(given), era, "initialize")
    assert session.value is None


def test_a_session_id_on_the_reply_to_anything_but_initialize_is_not_taken(
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = SessionId("s")
    session.capture(reply("abc-123"), "legacy", "initialize")
    with caplog.at_level(logging.DEBUG):
        session.capture(reply("other"), "legacy", "tools/call")
    assert session.value == "abc-123"
    assert "other" not in caplog.text


def test_a_lost_session_lets_through_the_handshake_and_its_era_probe_alone() -> None:
    session = SessionId("s")
    session.capture(reply("abc-123"), "legacy", "initialize")
    session.reset(sessions=True)
    for method in ("initialize", "server/discover", "notifications/initialized"):
        assert session.for_message(method) is None
    with pytest.raises(SessionExpired, match="tools/call was not sent"):
        session.for_message("tools/call")


def test_a_server_that_turned_modern_gets_nothing_written_for_its_legacy_session() -> None:
    """A message whose headers name a legacy version is refused before it is sent, for
    its sender to write again; one written for 2026-07-28 goes, with no session."""
    session = SessionId("s")
    session.capture(reply("abc-123"), "legacy", "initialize")
    session.reset(sessions=False)
    with pytest.raises(SessionExpired, match="written for its legacy session"):
        session.for_message("tools/call", {"MCP-Protocol-Version": "2025-11-25"})
    assert session.for_message("tools/call", {"MCP-Protocol-Version": "2026-07-28"}) is None


ORIGIN = Origin("http", "h", 80)


def test_a_redirect_is_followed_only_on_its_origin() -> None:
    def head(status: int, location: str | None) -> ResponseHead:
        return ResponseHead(status, "", [] if location is None else [("location", location)])

    assert redirect_target("s", ORIGIN, head(307, "../v2"), "/mcp/x") == "/v2"
    with pytest.raises(UnexpectedReply, match="another origin"):
        redirect_target("s", ORIGIN, head(308, "http://elsewhere/mcp"), "/mcp")
    with pytest.raises(UnexpectedReply, match="without a Location"):
        redirect_target("s", ORIGIN, head(307, None), "/mcp")
