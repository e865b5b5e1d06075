"""The page's requests: ``GET /`` (the page; ``?code=`` opens a session), ``GET
/page/events`` (its live updates), ``POST /page/login`` (start a server's login) and
``GET /page/oauth/ALIAS`` (where that login comes back).

Who may do what is settled at a request's headers (``admit``), before its body is
read. On the HTTP endpoint the page wants its session cookie (or the bearer token, for
``curl``); on the socket, whose peer check already let the caller in, it is served
without one, for reading. Acting takes a session on either: its cookie, its CSRF
token, and an ``Origin`` that is the page's own. What a reader sees is what ``mcpd
status`` shows them (``Profiles.scope``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from html import escape
from typing import Final
from urllib.parse import parse_qs, unquote

import h11
import msgspec
import trio

from protocol import jsonrpc as rpc
from protocol.urls import openable

from ...registry.views import ProfileView
from ..backend import Control, Servers
from ..http_exchange import Caller
from ..http_wire import HeaderList, Headers, Reject, Response, Wire, head
from . import render
from .assets import SECURITY_HEADERS
from .model import PageData, read_page
from .passes import (
    CODE_TTL,
    SESSION_TTL,
    PageSession,
    Passes,
    cookie_name,
    csrf_matches,
    read_cookie,
)

Scope = Callable[[], ProfileView | None]  # raises Reject (a profile it may not read)
_encode: Final = msgspec.json.Encoder().encode
HTML: Final = (b"content-type", b"text/html; charset=utf-8")
JSON: Final = (b"content-type", b"application/json")
MAX_STREAMS: Final = 8  # live pages at once; a new one ends the oldest
KEEPALIVE: Final = 15.0
WRITE_TIMEOUT: Final = 30.0
DEBOUNCE: Final = 0.1  # a burst of changes (a restart, a reload) is drawn once
MAX_FORM: Final = 4096
OAUTH: Final = "/page/oauth/"


class Access(msgspec.Struct, frozen=True):
    """What ``admit`` found: the session, when the request came with one."""

    session: PageSession | None = None
    sid: str | None = None


def _refuse(status: int, title: str, text: str) -> Reject:
    body = render.message(title, text).encode()
    return Reject(status, body, [HTML, *SECURITY_HEADERS])


def _refuse_action(status: int, error: str) -> Reject:
    return Reject(status, _encode({"error": error}), [JSON, *SECURITY_HEADERS])


class Page:
    def __init__(self, control: Control, servers: Servers) -> None:
        self.control = control
        self.passes = Passes(control.http_token)
        self._news = trio.Event()
        self._streams: dict[trio.CancelScope, None] = {}  # oldest first
        self._logins: dict[str, str] = {}  # alias -> the login the page started
        servers.subscribe(self._changed)

    def _changed(self) -> None:
        self._news.set()
        self._news = trio.Event()

    def admit(self, request: h11.Request, caller: Caller) -> Access:
        """Who asks, from the request's headers; raises Reject for whoever may not."""
        headers = Headers(request.headers)
        path, _, query = request.target.decode("latin-1").partition("?")
        if path.startswith(OAUTH):
            return Access()  # the login's state, in the query, is what it is checked by
        sid = read_cookie(headers.get("cookie"), cookie_name(headers.get("host")))
        session = self.passes.session(sid)
        if session is not None:
            return Access(session, sid)
        if request.method == b"POST":
            raise _refuse_action(403, "acting on the page takes a session: run mcpd dashboard")
        # On the socket its peer check admitted the caller; on the endpoint its gate
        # checked any bearer token already.
        if caller.guard is None or headers.get("authorization") is not None:
            return Access()
        if path == "/" and "code" in parse_qs(query):
            return Access()  # traded for a session, or refused, in ``serve``
        raise _refuse(
            401,
            "Open the page from mcpd dashboard",
            "This page needs a session: run <code>mcpd dashboard</code> and open the "
            "address it prints (it works once, for a minute).",
        )

    async def serve(
        self, wire: Wire, request: h11.Request, body: bytes, caller: Caller, access: Access,
        scope: Scope,
    ) -> None:  # fmt: skip
        target = request.target.decode("latin-1")
        path, _, query_text = target.partition("?")
        query = parse_qs(query_text)
        method = request.method
        headers = Headers(request.headers)
        if path == "/" and method in (b"GET", b"HEAD"):
            if "code" in query:
                await self._trade(wire, query, headers)
                return
            data = self._read(access, caller, scope)
            await _send(wire, 200, HTML, render.page(data).encode(), head_only=method == b"HEAD")
        elif path == "/page/events" and method == b"GET":
            await self._events(wire, access, caller, scope)
        elif path == "/page/login" and method == b"POST":
            await self._login(wire, headers, body, access, scope)
        elif path.startswith(OAUTH) and method == b"GET":
            await self._landing(wire, unquote(path[len(OAUTH) :]), target, headers)
        else:
            allowed = b"POST" if path == "/page/login" else b"GET, HEAD"
            raise Reject(405 if path in ("/", "/page/events", "/page/login") else 404,
                         headers=[(b"allow", allowed)])  # fmt: skip

    def _read(self, access: Access, caller: Caller, scope: Scope) -> PageData:
        session = access.session
        return read_page(
            self.control,
            scope(),
            time.time(),
            csrf=None if session is None else session.csrf,
            logins_from_page=session is not None and caller.guard is not None,
        )

    # -- a session --

    async def _trade(self, wire: Wire, query: dict[str, list[str]], headers: Headers) -> None:
        sid = self.passes.redeem(query["code"][0])
        if sid is None:
            raise _refuse(
                403,
                "This address has been used",
                f"Each address from <code>mcpd dashboard</code> opens the page once, within "
                f"{CODE_TTL:.0f} seconds. Run it again for a new one.",
            )
        cookie = (
            f"{cookie_name(headers.get('host'))}={sid}; Path=/; HttpOnly; SameSite=Strict; "
            f"Max-Age={SESSION_TTL:.0f}"
        )
        # Away from the address with the code: the browser keeps the page without it.
        back = "/" + (f"?profile={query['profile'][0]}" if "profile" in query else "")
        extra = [(b"set-cookie", cookie.encode()), (b"location", back.encode())]
        await _send(wire, 303, HTML, b"", extra)

    # -- live updates --

    async def _events(self, wire: Wire, access: Access, caller: Caller, scope: Scope) -> None:
        if len(self._streams) >= MAX_STREAMS:
            oldest = next(iter(self._streams))
            del self._streams[oldest]
            oldest.cancel()
        response = Response(wire, headers=SECURITY_HEADERS)
        cancel = trio.CancelScope()
        self._streams[cancel] = None
        try:
            with cancel:
                with trio.move_on_after(WRITE_TIMEOUT):
                    await response.open_stream()
                async with trio.open_nursery() as nursery:

                    async def end_on_hangup() -> None:
                        await wire.wait_gone()
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(end_on_hangup)
                    await self._pump(response, access, caller, scope)
                    nursery.cancel_scope.cancel()
        except (trio.TooSlowError, Reject):
            pass  # a reader that stopped reading, or a profile it may no longer read
        finally:
            self._streams.pop(cancel, None)
            if not wire.broken:
                with trio.move_on_after(1, shield=True):
                    await response.finish(None, 200)

    async def _pump(self, response: Response, access: Access, caller: Caller, scope: Scope) -> None:
        sent: dict[str, str] = {}
        quiet = False
        while not response.wire.broken:
            news = self._news  # taken first: a change while drawing is not missed
            parts = render.regions(self._read(access, caller, scope))
            changed = {k: v for k, v in parts.items() if sent.get(k) != v}
            with trio.fail_after(WRITE_TIMEOUT):
                if changed:
                    await response.event(_encode(changed))
                    sent = parts
                elif quiet:
                    await response.comment(b"keep-alive")
            with trio.move_on_after(KEEPALIVE) as idle:
                await news.wait()
            quiet = idle.cancelled_caught
            if quiet and access.sid is not None and self.passes.session(access.sid) is None:
                return  # the session ended (its time, a new token)
            if not quiet:
                await trio.sleep(DEBOUNCE)

    # -- logins --

    async def _login(
        self, wire: Wire, headers: Headers, body: bytes, access: Access, scope: Scope
    ) -> None:
        session = access.session
        if session is None:
            raise _refuse_action(403, "acting on the page takes a session: run mcpd dashboard")
        form = parse_qs(body[:MAX_FORM].decode("utf-8", "replace"))
        presented = headers.get("x-mcpd-csrf") or next(iter(form.get("csrf", [])), None)
        if not csrf_matches(session, presented):
            raise _refuse_action(403, "this request does not carry the page's CSRF token")
        host = headers.get("host") or ""
        if headers.get("origin") != f"http://{host}":
            raise _refuse_action(403, "this request does not come from the page itself")
        alias = (form.get("server") or [""])[0]
        view = scope()
        if not alias or (view is not None and not view.has_server(alias)):
            raise _refuse_action(404, f"no server {alias!r} on this page")
        try:
            out = await self.control.logins.begin(
                alias, f"http://{host}{render.login_target(alias)}"
            )
        except rpc.RPCError as exc:
            raise _refuse_action(409, exc.message) from None
        url = out.get("url")
        wants_json = "application/json" in (headers.get("accept") or "")
        if not isinstance(url, str):  # no browser needed (client credentials): done
            said = f"{alias}: {out.get('state', 'done')}"
            if wants_json:
                await _send(wire, 200, JSON, _encode({"message": said}))
            else:
                await _send(wire, 200, HTML, render.message("Logged in", escape(said)).encode())
            return
        if not openable(url):
            raise _refuse_action(502, f"{alias}'s authorization server sent an address to refuse")
        self._logins[alias] = str(out["login"])
        if wants_json:
            await _send(wire, 200, JSON, _encode({"url": url}))
            return
        link = f'<a href="{escape(url)}" rel="noopener noreferrer">the login page</a>'
        text = f"Log in to {escape(alias)} at {link}; it comes back here when done."
        await _send(wire, 200, HTML, render.message("Log in", text).encode())

    async def _landing(self, wire: Wire, alias: str, target: str, headers: Headers) -> None:
        login = self._logins.get(alias)
        if login is None:
            raise _refuse(
                404,
                "No login is waiting",
                f"No login of {escape(alias)} started from this page is waiting. Start "
                f"one from the page, or run <code>mcpd auth login {escape(alias)}</code>.",
            )
        redirect = f"http://{headers.get('host') or ''}{target}"
        try:
            out = await self.control.logins.finish(alias, login, redirect)
        except rpc.RPCError as exc:
            raise _refuse(400, "The login did not work", escape(exc.message)) from None
        self._logins.pop(alias, None)
        state = str(out.get("state"))
        said = f"{alias} is {state} with {out.get('tools', 0)} tools"
        if state not in ("ready", "degraded"):
            said = f"{alias}: logged in, but the server is {state}: {out.get('reason', '')}"
        await _send(wire, 200, HTML, render.message("Logged in", escape(said)).encode())


async def _send(
    wire: Wire,
    status: int,
    content_type: tuple[bytes, bytes],
    body: bytes,
    extra: HeaderList | None = None,
    *,
    head_only: bool = False,
) -> None:
    fields = [
        content_type,
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
        *(extra or []),
    ]
    events: list[h11.Request | h11.Data | h11.EndOfMessage | h11.Response] = [head(status, fields)]
    if not head_only:
        events.append(h11.Data(data=body))
    await wire.send(*events, h11.EndOfMessage())
