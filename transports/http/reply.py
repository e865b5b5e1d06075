"""What an HTTP reply means: a JSON body or an event stream, or an error status.

``status_error`` is the one place where a status code, its headers and the start of
its body become an exception. The order matters: credentials first (401/403), then
a legacy session the server forgot, then overload (429/503, with Retry-After), then
any JSON-RPC error the body carries, then the bare status. A 4xx with no JSON-RPC
error is ``UnexpectedReply``: for era detection that is the sign of a legacy server.
What the server wrote (an error's message, a status line's own phrase, a challenge)
goes into the reason quoted (``protocol.shown.visible.quote``): the reason is mcpd's sentence.

Reading a 2xx reply to a request until its response is ``answer``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Final, TypeAlias

from protocol.http.parts import ResponseHead, error_in, names_unknown_session, parse_retry_after
from protocol.jsonrpc import envelope
from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.refused_replies import named_twice
from protocol.oauth.challenge import bearer_challenge
from protocol.pacing.read_budget import drop_oversized
from protocol.shown.logfields import log_extra
from protocol.shown.visible import cut_bytes, quote

from ..base import NotificationHandler
from ..complaints import Complain
from ..errors import (
    AuthError,
    HttpRPCError,
    HTTPStatusError,
    InvalidResponse,
    SessionExpired,
    UnexpectedReply,
)

logger = logging.getLogger("mcpd.http")

ServerRequestSink: TypeAlias = Callable[[rpc.Request], Awaitable[None]]

SNIPPET: Final = 512


def decode_reply(data: bytes, status: int, label: str, where: str) -> rpc.Message:
    """One JSON-RPC message from a 2xx reply's body or an event's data: a plain response
    in one pass, as a stdio server's line is read; anything else classified and checked.

    An error under an id that is not one (``true``, ``1.5``) is no message, and answers
    no request: a response's id is its request's. Only an HTTP error status makes a
    body the answer whatever id it names (``status_error``). A response that cannot be
    taken raises ``InvalidResponse``, which keeps what failing its requests takes: a
    batch of responses names each request it answered."""
    answer = envelope.decode_response(data)
    if answer is not None:
        return answer
    try:
        # It checks the UTF-8 of raw results, which msgspec does not, without a copy
        # of an ASCII message.
        return envelope.decode_message(data)
    except rpc.DecodeFailure as exc:
        reason = f"{label}: invalid JSON-RPC in the {where}: {exc}"
        if isinstance(exc, rpc.MalformedResponse):
            given: tuple[object, ...] = (exc.given,)
        elif isinstance(exc, rpc.BatchedReplies):
            given = exc.given
        else:
            raise UnexpectedReply(reason, status=status, body=data[:SNIPPET]) from None
        raise InvalidResponse(
            reason, given=given, why=exc.why, status=status, body=data[:SNIPPET]
        ) from None


def named_twice_reply(data: bytes, status: int, label: str, where: str) -> InvalidResponse | None:
    """What a sound response that answered no request waiting for it is when it gives
    its ``"id"`` more than once (``protocol.jsonrpc.refused_replies.named_twice``): a
    response that cannot be taken, naming each of them; None when it gives one. Read
    again only then, as on stdio: an answer taken costs no second pass."""
    twice = named_twice(data)
    if twice is None:
        return None
    given, why = twice
    reason = f"{label}: invalid JSON-RPC in the {where}: Invalid response: {why}"
    return InvalidResponse(reason, given=given, why=why, status=status, body=data[:SNIPPET])


def status_error(
    label: str,
    head: ResponseHead,
    body: bytes,
    what: str,
    *,
    had_session: bool,
    now: float,
    peer: str | None = None,
    sessionful: bool = False,
) -> Exception:
    """The exception for an HTTP error reply to ``what`` (a request or notification),
    which came from the address ``peer``. ``sessionful``: the server handed out a
    session before, so one that says a session is missing or unknown lost it, even
    when the message went without one."""
    status = head.status
    error = error_in(body)
    said = f": {quote(error.message)} ({error.code})" if error is not None else ""
    if status in (401, 403):
        challenge = head.get_all("www-authenticate")
        return AuthError(
            auth_reason(label, status, challenge, said),
            status=status,
            challenge=challenge,
            peer=peer,
        )
    names_session = status in (400, 404) and error is not None and names_unknown_session(error)
    if (had_session and (status == 404 or names_session)) or (sessionful and names_session):
        return SessionExpired(f"{label}: the server no longer knows our session{said}")
    if status in (429, 503):
        return HTTPStatusError(
            f"{label}: {status_line(status, head.reason)}{said}",
            status=status,
            retry_after=parse_retry_after(head.get("retry-after"), now),
        )
    if error is not None:
        return HttpRPCError.received(error, status)
    if status >= 500:
        return HTTPStatusError(
            f"{label}: {status_line(status, head.reason)}",
            status=status,
            detail=cut_bytes(body, SNIPPET),
        )
    return UnexpectedReply(
        f"{label}: HTTP {status} to {what} without a JSON-RPC error", status=status, body=body
    )


def auth_reason(label: str, status: int, challenge: str, said: str = "") -> str:
    """A 401 or 403 in words a user can act on, with the server's challenge as it was."""
    bearer = bearer_challenge([challenge]) if challenge else None
    if status == 401:
        text = f"{label}: unauthorized (HTTP 401)"
        if bearer is None:
            text += (
                ": the server wants credentials mcpd did not send; give them in the "
                f"config (an Authorization header under [servers.{label}.headers])"
            )
        else:
            scope = f" with the scope {quote(' '.join(bearer.scope))}" if bearer.scope else ""
            text += (
                f": the server asks for a login{scope}; run `mcpd auth login {label}` "
                "(or give a token in the config)"
            )
    else:
        text = f"{label}: forbidden (HTTP 403)"
        if bearer is not None and bearer.error == "insufficient_scope":
            scope = f" ({quote(' '.join(bearer.scope))})" if bearer.scope else ""
            text += f": the token mcpd holds lacks the scope the request needs{scope}"
        else:
            text += ": the server refuses mcpd's credentials for this request" + said
    if challenge:
        text += f" [WWW-Authenticate: {quote(challenge)}]"
    return text


def content_type_words(head: ResponseHead) -> str:
    """The content type a server answered with, quoted as it wrote it, for a sentence."""
    media = head.written_media_type
    return quote(media) if media else "no content type"


def unasked_coding(head: ResponseHead) -> str | None:
    """Why a body cannot be read when it came in a coding (gzip, br, ...): mcpd sends no
    Accept-Encoding and decodes none, and read as it is, such a body would only seem to
    hold text that is not UTF-8. None for a body as it is."""
    coding = head.content_coding
    if coding is None:
        return None
    token = coding.isascii() and coding.replace("-", "").isalnum() and len(coding) <= 20
    named = coding if token else quote(coding)
    return f"the server sent a {named}-encoded body, which mcpd did not ask for"


def status_line(status: int, phrase: str) -> str:
    """``HTTP 503 Service Unavailable``; a phrase of the server's own, quoted."""
    try:
        standard = HTTPStatus(status).phrase
    except ValueError:
        standard = ""
    if not phrase or phrase == standard:
        return f"HTTP {status} {phrase}".rstrip()
    return f"HTTP {status} {quote(phrase)}"


def deliver(
    label: str, handler: NotificationHandler | None, msg: rpc.Notification, complain: Complain
) -> None:
    """Hand a server's notification on; a failing handler is logged (within the
    server's ``complain``: the server may repeat what made it fail), never raised."""
    if handler is None or drop_oversized(label, msg, complain, logger):
        return
    try:
        handler(msg)
    except Exception:
        # The handler's bug must not cost a request its answer, or a stream its life.
        note = complain()
        if note is not None:
            logger.exception(
                "%s: notification handler failed on %s%s",
                label,
                msg.method,
                note,
                extra=log_extra(label, "notification_handler_failed"),
            )
