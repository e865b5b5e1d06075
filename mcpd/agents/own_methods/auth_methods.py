"""``mcpd/auth/...``: the socket methods behind ``mcpd auth login|status|logout``.

``status`` is for anyone who may use the socket (it shows issuers, scopes and
expiry, never a token), of the servers of the caller's profile (``Profiles.scope``).
Logging in and out changes what every agent's calls run as, so, like
``mcpd/reload``, those are only for the daemon's own user and root, on a socket (the
daemon's own, not a profile's: ``profile_bound``): a request on the HTTP endpoint has
no peer, and its token is what agents are given.

A login takes two requests: ``mcpd/auth/login`` starts it (the URL to open and the
login's id) and ``mcpd/auth/complete`` hands over the redirect the browser came
back to; it answers once the server has tried the new token.

``mcpd/auth/dashboard`` is the other way round: it logs a person's browser in to mcpd's
own status page, with an address on the HTTP endpoint that carries a one-time code
(``page.passes``). Like a login, it is for the daemon's own user and root (the page
shows the whole daemon); the code
keeps who asked for it and whether that is an agent's kin (``page.opener``), which
decides what the page it opens may decide. ``mcpd/auth/dashboard_spent`` answers once
such a code can open no session (traded, or past its time): ``mcpd dashboard`` waits
for that to remove the page that carried the code to the browser.

Both answers that hand over something for a browser (the login's address, the page's)
name the directory to write the page that carries it in (``pages``): the one this
daemon hides from every server it sandboxes, found in its own environment, which the
command's may not match (``config.loading.paths.pages_directory``).
"""

from __future__ import annotations

import contextlib

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.mcp.serving import RequestContext

from ...config.loading.paths import pages_directory
from ...local.state.privatefile import make_private_directory
from ...login_answers import PageAddress
from ...servers.shared import LoginBegun
from ..agent import Agent
from .profile_methods import OwnMethod, ProfileMethods


class _Logout(msgspec.Struct):
    server: str
    forget_client: bool = False


class _Begin(msgspec.Struct):
    server: str
    redirect_uri: str | None = None


class _Code(msgspec.Struct):
    code: str


class _Complete(msgspec.Struct):
    server: str
    login: str
    redirect: str


def _owner_only(conn: Agent, method: str) -> None:
    if not conn.may_control():
        raise rpc.RPCError(-32000, f"{method} is only for the daemon's user and root")


async def _status(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    scope = api.scope_of(conn)
    if scope is not None:
        return {"servers": api.control.logins.status(scope.has_server)}
    # Only for a caller of every server: the names of others are no profile's to see.
    unconfigured = await api.control.logins.unconfigured()
    return {"servers": api.control.logins.status(None), "unconfigured": unconfigured}


async def _login(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    _owner_only(conn, req.method)
    params = rpc.decode_as(req.params, _Begin)
    out = await api.control.logins.begin(params.server, params.redirect_uri)
    return msgspec.structs.replace(out, pages=_pages()) if isinstance(out, LoginBegun) else out


async def _complete(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    _owner_only(conn, req.method)
    params = rpc.decode_as(req.params, _Complete)
    return await api.control.logins.finish(params.server, params.login, params.redirect)


async def _logout(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    _owner_only(conn, req.method)
    params = rpc.decode_as(req.params, _Logout)
    return await api.control.logins.logout(params.server, forget_client=params.forget_client)


async def _dashboard(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    """The page's address with a new one-time code; ``url`` None: no HTTP endpoint."""
    _owner_only(conn, req.method)
    endpoint = api.endpoint
    if endpoint is None:
        return PageAddress(url=None)
    from ..page.opener import Opener
    from ..page.passes import CODE_TTL

    assert conn.peer is not None  # the owner on the socket, as the kernel says
    asker = Opener((conn.peer.decider(),))
    code = api.http.page.passes.issue(asker, await api.agents_kin())
    # Where the endpoint listens on every address, this machine reaches it on loopback.
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(endpoint.host, endpoint.host)
    host = f"[{host}]" if ":" in host else host
    url = f"http://{host}:{endpoint.port}/?code={code}"
    return PageAddress(url=url, expires_in=CODE_TTL, pages=_pages())


def _pages() -> str:
    """The directory of pages for a browser, made (0700) if missing. One that cannot be
    made so is named all the same: the command checks it before it writes there, and
    says what is wrong with it."""
    folder = pages_directory()
    with contextlib.suppress(OSError):
        make_private_directory(folder)
    return folder


async def _dashboard_spent(
    api: ProfileMethods, conn: Agent, req: rpc.Request, ctx: RequestContext | None
) -> object:
    """An empty answer once the code can open no session; at most its time to live."""
    _owner_only(conn, req.method)
    params = rpc.decode_as(req.params, _Code)
    await api.http.page.passes.until_spent(params.code)
    return {}


HANDLERS: dict[str, OwnMethod[ProfileMethods]] = {
    "mcpd/auth/status": _status,
    "mcpd/auth/login": _login,
    "mcpd/auth/complete": _complete,
    "mcpd/auth/logout": _logout,
    "mcpd/auth/dashboard": _dashboard,
    "mcpd/auth/dashboard_spent": _dashboard_spent,
}
