"""The page's requests: ``GET /`` (the page; ``?code=`` opens a session), ``GET
/page/events`` (its live updates: ``live``), the actions (``actions``: ``POST /page/login``,
``/page/decide``, ``/page/release``) and ``GET /page/oauth/ALIAS`` (where a login
started on the page comes back).

Who may do what is settled at a request's headers (``admit``), before its body is
read. On the HTTP endpoint the page wants its session cookie (or the bearer token, for
``curl``); on the socket, whose peer check already let the caller in, it is served
without one, for reading. Acting takes a session on either: its cookie, its CSRF
token, and an ``Origin`` that is the page's own. A session is taken, and a code
traded, only on a connection of the local user that opened it which no process of
mcpd's servers holds (``whose``); who holds it (``RequestSender.holder``) is looked up for a
request that brings a live session's cookie or a good code, and for no other; so are
the processes that trade a good code (``opener``). Whose side the sessions kept are on
is judged against the agents connected now as a session is used to draw the page or
open a stream (``Passes.judge``). What a reader sees is what ``mcpd status`` shows
them (``Profiles.scope``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable
from html import escape
from urllib.parse import parse_qs, unquote, urlencode

import h11
import msgspec

from ...policy.deciders.kin import AgentKin
from ...servers.all_servers import AllServers
from ..daemon_seam import DaemonForAgents
from ..entry.holders import ServerRefusals
from ..http.exchange import RequestSender
from ..http.wire import Headers, Reject, Wire
from . import render
from .actions import (
    HTML,
    NO_SESSION,
    OAUTH,
    PATHS,
    Actions,
    ProfileScope,
    refuse_action,
    refuse_page,
    send_page_answer,
)
from .decisions import call_filter
from .live import Live, Regions
from .model import PageData, PageReader, read_page
from .opener import Opener, look_only
from .passes import (
    CODE_TTL,
    SESSION_TTL,
    PageSession,
    Passes,
    cookie_name,
    read_cookies,
    users_session,
)
from .sources import NO_SOURCES, Sources
from .whose import connection_holder


class Access(msgspec.Struct, frozen=True):
    """What ``admit`` found: the session, when the request came with one."""

    session: PageSession | None = None
    sid: str | None = None


class Page:
    def __init__(
        self,
        control: DaemonForAgents,
        servers: AllServers,
        agents_kin: Callable[[], Awaitable[list[AgentKin]]],
        sources: Sources = NO_SOURCES,
    ) -> None:
        """``agents_kin``: who is kin to each agent connected now (``policy.deciders.kin``)."""
        self.control = control
        self._agents_kin = agents_kin
        self.sources = sources
        self.passes = Passes(control.http_token)
        self.actions = Actions(control, sources)
        self.live = Live(self._regions)
        self._refusals = ServerRefusals()
        servers.subscribe(self._changed)
        if sources.calls is not None:
            control.audit.watch(self._changed)  # the latest calls, as they are written

    def _changed(self) -> None:
        self.live.changed()

    async def admit(self, request: h11.Request, caller: RequestSender) -> Access:
        """Who asks, from the request's headers; raises Reject for whoever may not."""
        headers = Headers(request.headers)
        path, _, query = request.target.decode("latin-1").partition("?")
        if path.startswith(OAUTH):
            return Access()  # the login's state, in the query, is what it is checked by
        sids = read_cookies(headers.get("cookie"), cookie_name(headers.get("host")))
        live = self.passes.live(sids)
        found = None
        if live:
            acting = request.method == b"POST"
            held = await connection_holder(
                caller, acting, self._refusals, "the status page's session"
            )
            found = users_session(live, held.uid)
        if found is not None:
            return Access(found[1], found[0])
        if request.method == b"POST":
            raise refuse_action(403, NO_SESSION)
        # On the socket its peer check admitted the caller; on the endpoint its gate
        # checked any bearer token already.
        if caller.guard is None or headers.get("authorization") is not None:
            return Access()
        if path == "/" and "code" in parse_qs(query):
            return Access()  # traded for a session, or refused, in ``serve``
        raise refuse_page(
            401,
            "Open the page from mcpd dashboard",
            "This page needs a session: run <code>mcpd dashboard</code> and open the "
            "address it prints (it works once, for a minute).",
        )

    async def serve(
        self, wire: Wire, request: h11.Request, body: bytes, caller: RequestSender, access: Access,
        scope: ProfileScope,
    ) -> None:  # fmt: skip
        target = request.target.decode("latin-1")
        path, _, query_text = target.partition("?")
        query = parse_qs(query_text)
        method = request.method
        headers = Headers(request.headers)
        if access.session is not None and path in ("/", "/page/events"):
            self.passes.judge(await self._agents_kin())
        if path == "/" and method in (b"GET", b"HEAD"):
            if "code" in query and method == b"HEAD":
                # A link preview or a checker asks first: the code stays for the
                # browser, and the page is not drawn for whoever holds no session.
                await send_page_answer(wire, 200, HTML, b"", head_only=True)
                return
            if "code" in query:
                await self._trade(wire, query, headers, caller)
                return
            data = self._read(self._reading(access, caller, scope, query))
            await send_page_answer(
                wire, 200, HTML, render.page(data).encode(), head_only=method == b"HEAD"
            )
        elif path == "/page/events" and method == b"GET":
            sid = access.sid

            def alive() -> bool:
                return sid is None or self.passes.session(sid) is not None

            await self.live.stream(
                wire,
                lambda: self._reading(access, caller, scope, query),
                alive,
                self._stream_holder(access, caller),
                None if caller.leave is None else caller.leave.asked,
            )
        elif path in PATHS and method == b"POST":
            try:
                await self.actions.serve(
                    wire, path, headers, body, access.session, scope, caller.deciders
                )
            finally:
                self._changed()  # what was decided leaves every open page
        elif path.startswith(OAUTH) and method == b"GET":
            # The segment after the alias is the authorization server's (the login's
            # redirect URI names it), checked where the login is finished.
            alias = unquote(path[len(OAUTH) :].split("/", 1)[0])
            await self.actions.landing(wire, alias, target, headers)
        elif path in ("/", "/page/events", *PATHS):
            allowed = {"/": b"GET, HEAD", "/page/events": b"GET"}.get(path, b"POST")
            raise Reject(405, headers=[(b"allow", allowed)])
        else:
            raise Reject(404)

    def _reading(
        self,
        access: Access,
        caller: RequestSender,
        scope: ProfileScope,
        query: dict[str, list[str]],
    ) -> PageReader:
        """Raises Reject for a profile the reader may not read (any longer)."""
        # As last judged: a session found an agent's since it was admitted says so.
        current = None if access.sid is None else self.passes.session(access.sid)
        session = current or access.session
        who = caller.who()
        owner = who.reads_as_owner()
        chosen = call_filter(query)
        if not owner and who.peer is not None:  # another user's: its own calls only
            chosen = msgspec.structs.replace(chosen, uid=who.peer.uid)
        return PageReader(
            scope(),
            owner,
            chosen,
            csrf=None if session is None else session.csrf,
            logins_from_page=session is not None and caller.guard is not None,
            look_only=None if session is None else look_only(session.opener),
        )

    def _stream_holder(
        self, access: Access, caller: RequestSender
    ) -> Callable[[], Hashable | None]:
        """Who a stream of the page is counted with (``live``) when asked: None for a
        session that may decide; a session found to be opened from an agent's side,
        by that agent; a reader without a session, by its process on the socket, or as
        one of the token's holders."""
        sid = access.sid
        if sid is None:
            reader = ("token",) if caller.peer is None else ("peer", caller.peer.pid)
            return lambda: reader

        def of_session() -> Hashable | None:
            session = self.passes.session(sid)
            if session is None:
                return ("ended",)  # its stream ends as it next looks
            found = session.opener.found
            return None if found is None else ("agent", found)

        return of_session

    def _read(self, reading: PageReader) -> PageData:
        return read_page(
            self.control,
            reading.scope,
            time.time(),
            own_user=reading.own_user,
            sources=self.sources,
            call_filter=reading.call_filter,
            csrf=reading.csrf,
            logins_from_page=reading.logins_from_page,
            look_only=reading.look_only,
        )

    def _regions(self, reading: PageReader) -> Regions:
        return render.regions(self._read(reading))

    # -- a session --

    async def _trade(
        self, wire: Wire, query: dict[str, list[str]], headers: Headers, caller: RequestSender
    ) -> None:
        code = query["code"][0]
        if not self.passes.good(code):
            raise _used()
        # Who holds the connection, and whoever trades it (the agent a person's code
        # reached too), are read here: for a good code only, so that a made-up one
        # costs no look through /proc. A code refused here stays good, for the browser.
        held = await connection_holder(caller, False, self._refusals, "a one-time code of the page")
        trader = Opener(await caller.deciders())
        sid = self.passes.redeem(code, held.uid, trader, await self._agents_kin())
        if sid is None:
            raise _used()
        cookie = (
            f"{cookie_name(headers.get('host'))}={sid}; Path=/; HttpOnly; SameSite=Strict; "
            f"Max-Age={SESSION_TTL:.0f}"
        )
        # Away from the address with the code: the browser keeps the page without it.
        # Not by a redirect: a navigation that began off the site (the file: page of
        # mcpd dashboard) sends no SameSite=Strict cookie on its redirects, but a step
        # this page takes itself is the site's own.
        back = "/" + (
            f"?{urlencode({'profile': query['profile'][0]})}" if "profile" in query else ""
        )
        extra = [(b"set-cookie", cookie.encode()), (b"refresh", f"0; url={back}".encode())]
        await send_page_answer(wire, 200, HTML, _moving_on(back), extra)


def _used() -> Reject:
    return refuse_page(
        403,
        "This address has been used",
        f"Each address from <code>mcpd dashboard</code> opens the page once, within "
        f"{CODE_TTL:.0f} seconds. Run it again for a new one.",
    )


def _moving_on(back: str) -> bytes:
    """The answer to a traded code, for a browser that does not follow its refresh."""
    link = f'<a href="{escape(back, quote=True)}">Open the status page</a>'
    return render.message("Session opened", f"{link}.", back=False).encode()
