"""What a person does on the page, each a POST: ``/page/login`` starts a server's OAuth
login (its address comes back for the browser to open, and the login comes back to
``/page/oauth/ALIAS``), ``/page/decide`` approves or denies a waiting call and
``/page/release`` approves a held definition change, where ``sources`` has them.

Every action takes the session's cookie (checked at the headers), its CSRF token (a
header from the page's script, or a form field without it) and an ``Origin`` that is
the page's own; ``checked_form`` checks the last two. A decision is made by who opened
the session and by who sends it (``opener``): a cookie taken from the browser is no
more use to an agent's process than a code. The answer is JSON for the script, or a
small page for a plain form.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from html import escape
from typing import Final
from urllib.parse import parse_qs

import h11
import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.shown.server_urls import ascii_hosts, openable
from protocol.shown.visible import visible

from ...policy.deciders.kin import Decider
from ...registry.profiles.views import ProfileView
from ...servers.shared import LoginDone
from ..daemon_seam import DaemonForAgents
from ..http.wire import HeaderList, Headers, Reject, Wire, head
from . import render
from .assets import SECURITY_HEADERS
from .opener import Opener
from .passes import PageSession, csrf_matches
from .sources import ApproveOrDeny, Sources
from .words import on_page

ProfileScope = Callable[[], ProfileView | None]  # raises Reject (a profile it may not read)
# Who sends a request, as /proc tells (``RequestSender.deciders``).
Senders = Callable[[], Awaitable[tuple[Decider, ...]]]
_encode: Final = msgspec.json.Encoder().encode
HTML: Final = (b"content-type", b"text/html; charset=utf-8")
JSON: Final = (b"content-type", b"application/json")
MAX_FORM: Final = 4096
OAUTH: Final = "/page/oauth/"
PATHS: Final = ("/page/login", "/page/decide", "/page/release")
NO_SESSION: Final = "acting on the page takes a session: run mcpd dashboard"


def refuse_page(status: int, title: str, text: str) -> Reject:
    """A refusal as a small page (``text`` is HTML)."""
    return Reject(status, render.message(title, text).encode(), [HTML, *SECURITY_HEADERS])


def refuse_action(status: int, error: str) -> Reject:
    """A refusal for the page's script, which shows ``error`` as text: a server's words
    in it have what hides or reorders them written out, and the hosts of its addresses
    are in ASCII."""
    error = ascii_hosts(visible(error))
    return Reject(status, _encode({"error": error}), [JSON, *SECURITY_HEADERS])


def checked_form(headers: Headers, body: bytes, session: PageSession | None) -> dict[str, str]:
    """The fields of an action's form, once its session, CSRF token and Origin pass."""
    if session is None:
        raise refuse_action(403, NO_SESSION)
    form = {k: v[0] for k, v in parse_qs(body[:MAX_FORM].decode("utf-8", "replace")).items()}
    if not csrf_matches(session, headers.get("x-mcpd-csrf") or form.get("csrf")):
        raise refuse_action(403, "this request does not carry the page's CSRF token")
    if headers.get("origin") != f"http://{headers.get('host') or ''}":
        raise refuse_action(403, "this request does not come from the page itself")
    return form


class Actions:
    def __init__(self, control: DaemonForAgents, sources: Sources) -> None:
        self.control = control
        self.sources = sources
        self._logins: dict[str, str] = {}  # alias -> the login the page started

    async def serve(
        self, wire: Wire, path: str, headers: Headers, body: bytes, session: PageSession | None,
        scope: ProfileScope, senders: Senders,
    ) -> None:  # fmt: skip
        form = checked_form(headers, body, session)
        wants_json = "application/json" in (headers.get("accept") or "")
        if path == "/page/login":
            await self._login(wire, headers, form, scope, wants_json)
            return
        view = scope()
        assert session is not None  # checked_form let it through

        async def deciding() -> Opener:
            return session.opener.joined(Opener(await senders()))

        said: str
        try:
            if path == "/page/decide" and self.sources.decide is not None:
                decision: ApproveOrDeny
                if form.get("decision") == "approve":
                    decision = "approve"
                elif form.get("decision") == "deny":
                    decision = "deny"
                else:
                    raise refuse_action(400, "a decision is approve or deny")
                opener = await deciding()
                said = await self.sources.decide(form.get("id", ""), decision, view, opener)
            elif path == "/page/release" and self.sources.release is not None:
                server, kind, name, digest = (
                    form.get(k, "") for k in ("server", "kind", "name", "digest")
                )
                opener = await deciding()
                said = await self.sources.release(server, kind, name, digest, view, opener)
            else:
                raise refuse_action(404, "this mcpd has nothing of that kind to decide")
        except rpc.RPCError as exc:
            raise refuse_action(409, exc.message) from None
        await _answer(wire, said, wants_json)

    async def _login(
        self,
        wire: Wire,
        headers: Headers,
        form: dict[str, str],
        scope: ProfileScope,
        wants_json: bool,
    ) -> None:
        alias = form.get("server", "")
        view = scope()
        if not alias or (view is not None and not view.has_server(alias)):
            raise refuse_action(404, f"no server {alias!r} on this page")
        back = f"http://{headers.get('host') or ''}{render.login_target(alias)}"
        try:
            out = await self.control.logins.begin(alias, back)
        except rpc.RPCError as exc:
            raise refuse_action(409, exc.message) from None
        if isinstance(out, LoginDone):  # no browser needed (client credentials): done
            await _answer(wire, f"{alias}: {out.state}", wants_json)
            return
        url = out.url
        if not openable(url):
            raise refuse_action(502, f"{alias}'s authorization server sent an address to refuse")
        self._logins[alias] = out.login
        if wants_json:
            await send_page_answer(wire, 200, JSON, _encode({"url": url}))
            return
        link = f'<a href="{escape(url)}" rel="noopener noreferrer">the login page</a>'
        text = f"Log in to {on_page(alias)} at {link}; it comes back here when done."
        await send_page_answer(wire, 200, HTML, render.message("Log in", text).encode())

    async def landing(self, wire: Wire, alias: str, target: str, headers: Headers) -> None:
        """The browser back from the authorization server: the login the page began
        ends here (the state in ``target`` says whether this is its answer)."""
        login = self._logins.get(alias)
        if login is None:
            raise refuse_page(
                404,
                "No login is waiting",
                f"No login of {on_page(alias)} started from this page is waiting. Start "
                f"one from the page, or run <code>mcpd auth login {on_page(alias)}</code>.",
            )
        redirect = f"http://{headers.get('host') or ''}{target}"
        try:
            out = await self.control.logins.finish(alias, login, redirect)
        except rpc.RPCError as exc:
            said = on_page(ascii_hosts(exc.message))
            raise refuse_page(400, "The login did not work", said) from None
        self._logins.pop(alias, None)
        said = f"{alias} is {out.state} with {out.tools} tools"
        if out.state not in ("ready", "degraded"):
            reason = ascii_hosts(out.reason or "")
            said = f"{alias}: logged in, but the server is {out.state}: {reason}"
        await send_page_answer(wire, 200, HTML, render.message("Logged in", on_page(said)).encode())


async def _answer(wire: Wire, said: str, wants_json: bool) -> None:
    if wants_json:
        await send_page_answer(wire, 200, JSON, _encode({"message": visible(said)}))
    else:
        await send_page_answer(wire, 200, HTML, render.message("Done", on_page(said)).encode())


async def send_page_answer(
    wire: Wire,
    status: int,
    content_type: tuple[bytes, bytes],
    body: bytes,
    extra: HeaderList | None = None,
    *,
    head_only: bool = False,
) -> None:
    """One whole answer, with the page's security headers."""
    fields = [
        content_type,
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
        *(extra or []),
    ]
    events: list[h11.Response | h11.Data] = [head(status, fields)]
    if not head_only:
        events.append(h11.Data(data=body))
    await wire.send(*events, h11.EndOfMessage())
