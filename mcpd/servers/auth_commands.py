"""``mcpd auth``'s side in the daemon: the logins of every server, by alias.

The agent side reaches this through ``agents.daemon_seam.DaemonForAgents.logins``; each method
answers a JSON-RPC request from ``mcpd auth``. Refusals are ``rpc.RPCError`` with a
message for the person at the terminal. A login begun waits for a person at a browser
(``LoginBegun``) or, with nobody to wait for, is done at once; a login done
(``LoginDone``) returns once the server has used it: connected, or failed with the
reason. A logout says what became of the tokens (``LoggedOut``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import msgspec
import trio
from msgspec import UNSET, UnsetType

from protocol.jsonrpc import messages as rpc

from ..login_answers import LoggedOut, LoginBegun, LoginDone, LoginStatus
from .life.server_parts import ServerParts
from .oauth import (
    LoginError,
    NoOAuthLogin,
    RedirectFailed,
    forget_unconfigured,
    unconfigured_logins,
)
from .supervisor import Supervisor

if TYPE_CHECKING:
    from .oauth import Login

REFUSED: Final = -32000


def _refused(message: str) -> rpc.RPCError:
    return rpc.RPCError(REFUSED, message)


class Logins:
    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor

    def _server(self, alias: str) -> tuple[ServerParts, Login]:
        server = self._supervisor.servers.get(alias)
        if server is None:
            known = ", ".join(sorted(self._supervisor.servers)) or "none"
            raise _refused(f"no server named {alias!r} is running (servers: {known})")
        if server.login is None or server.auth is None:
            raise _refused(f"{alias} is a stdio server; logins are for HTTP servers")
        if not server.auth.enabled:
            raise _refused(
                f"{alias} sends the Authorization header from the configuration; remove it "
                "to log in with OAuth instead"
            )
        return server, server.login

    def status(self, only: Callable[[str], bool] | None = None) -> list[LoginStatus]:
        out = []
        for alias in sorted(self._supervisor.servers):
            if only is not None and not only(alias):
                continue
            server = self._supervisor.servers[alias]
            login = server.login_status()
            if login is not None:
                out.append(msgspec.structs.replace(login, server_state=server.state))
        return out

    async def unconfigured(self) -> list[str]:
        """The servers no longer configured whose saved login stays on disk until
        ``mcpd auth logout`` removes it."""
        return await unconfigured_logins(self._supervisor.config)

    async def begin(self, alias: str, redirect_uri: str | None) -> LoginBegun | LoginDone:
        server, login = self._server(alias)
        before = server.attempts
        try:
            started = await login.begin(redirect_uri)
        except NoOAuthLogin as exc:
            raise _refused(str(exc)) from None
        except LoginError as exc:
            raise _refused(f"{alias}: {exc}") from None
        if started is None:  # client credentials: done already
            return await self._outcome(server, before)
        url, login_id = started
        return LoginBegun(server=alias, url=url, login=login_id)

    async def finish(self, alias: str, login_id: str, redirect: str) -> LoginDone:
        server, login = self._server(alias)
        before = server.attempts
        try:
            replaced = await login.finish(login_id, redirect)
        except RedirectFailed as exc:
            # The refusal says the login was not ended by it (``mcpd auth login`` waits on).
            raise rpc.RPCError(REFUSED, f"{alias}: {exc}", {"login": "waiting"}) from None
        except LoginError as exc:
            raise _refused(f"{alias}: {exc}") from None
        out = await self._outcome(server, before)
        if not login.renewable():
            # The person is still at the terminal: the one moment to say the login
            # ends with its access token.
            out.refreshable = False
            expires_at = login.status().expires_at
            out.expires_at = None if isinstance(expires_at, UnsetType) else expires_at
        if replaced is not None:
            out.replaced = replaced.said()
        return out

    async def logout(self, alias: str, *, forget_client: bool = False) -> LoggedOut:
        sup = self._supervisor
        if alias not in sup.servers and alias not in sup.config.servers:
            # A server removed from the configuration leaves its login on disk.
            gone = await forget_unconfigured(alias, sup.config)
            if gone is not None:
                return gone
        _, login = self._server(alias)
        return await login.logout(forget_client=forget_client)

    async def _outcome(self, server: ServerParts, before: int) -> LoginDone:
        """Once the server has tried the new credentials: its state afterwards."""
        with trio.move_on_after(self._supervisor.config.daemon.startup_deadline):
            while not (
                server.phase == "connected"
                or (server.attempts > before and server.phase != "starting")
            ):
                await server.phase_changed()
        return LoginDone(
            server=server.alias,
            state=server.state,
            tools=self._supervisor.registry.count(server.alias),
            reason=UNSET if server.available else server.outage().reason,
        )
