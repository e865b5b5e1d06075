"""What the daemon answers ``mcpd auth`` with: a server's login as ``mcpd auth status``
and its row in ``mcpd status`` show it (``LoginStatus``), a login begun
(``LoginBegun``) or done (``LoginDone``), a logout (``LoggedOut``), and the address
that logs a browser in to mcpd's status page (``PageAddress``).

Both ends read these: the daemon builds them (``servers.auth_commands``, the OAuth
package's ``Login.status``) and the command line decodes its replies into them, so
they hold only msgspec values and import nothing of mcpd's. A field unset is a key the
JSON leaves out. The fields are in the order the JSON shows them."""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType


class LoginStatus(msgspec.Struct, kw_only=True):
    """An HTTP server's login: with whom, for what, until when, and its state. What
    only a login that holds tokens has is unset without one; ``server_state`` is the
    server's own state, said beside its login by ``mcpd auth status`` alone."""

    server: str
    type: str  # "oauth", "client_credentials", or "header": the configuration's own
    url: str
    issuer: str | None
    client_id: str | None
    logged_in: bool
    scopes: list[str] | UnsetType = UNSET
    expires_at: str | UnsetType | None = UNSET
    expired: bool | UnsetType = UNSET
    refresh_token: bool | UnsetType = UNSET  # whether one is held
    # A refresh token is of no use without the client it was issued to.
    refreshable: bool | UnsetType = UNSET
    obtained_at: str | UnsetType | None = UNSET
    needs_login: str | None  # why a person must log in again
    redirect_port: int  # the loopback port a login listens on (0: any)
    state: str
    login_pending: bool | UnsetType = UNSET  # a login begun waits for its redirect
    server_state: str | UnsetType = UNSET


class AuthStatus(msgspec.Struct, kw_only=True):
    """``mcpd auth status``: each HTTP server's login, and the servers no longer
    configured whose saved login stays on disk."""

    servers: list[LoginStatus]
    unconfigured: list[str] = []


class LoginBegun(msgspec.Struct, kw_only=True):
    """A login that waits for a person: the authorization page to send them to, and
    the login's id to finish it with."""

    server: str
    url: str
    login: str
    pages: str | UnsetType = UNSET  # where ``mcpd auth login`` may write a page to open


class TokensReplaced(msgspec.Struct, kw_only=True):
    """What became of the tokens of a login another replaced or a logout forgot:
    revoked, not revocable at their server, or left valid and why."""

    revoked: list[str]
    not_revocable: list[str]
    problem: str | None
    unrevoked: list[str]


class LoginDone(msgspec.Struct, kw_only=True):
    """A login the server has used: its state then and the tools it lists, and why it
    is unavailable, if it is."""

    server: str
    state: str
    tools: int
    reason: str | UnsetType = UNSET
    # Said once, to the person at the terminal, of a login with no refresh token.
    refreshable: bool | UnsetType = UNSET
    expires_at: str | UnsetType | None = UNSET
    # The tokens of the login this one replaced: revoked, or left valid and why.
    replaced: TokensReplaced | UnsetType = UNSET


class LoggedOut(msgspec.Struct, kw_only=True):
    """A login forgotten: whether it held tokens, what revoking them did, and whether
    the clients mcpd registered went too, or, of a server no longer configured, the
    saved login's file removed."""

    server: str
    had_tokens: bool
    revoked: list[str]
    not_revocable: list[str]
    problem: str | None
    unrevoked: list[str]
    forgot_client: bool | UnsetType = UNSET
    removed: str | UnsetType = UNSET


class PageAddress(msgspec.Struct, kw_only=True):
    """``mcpd dashboard``: the status page's address with a one-time code, good for
    ``expires_in`` seconds, and where the command may write a page that carries it; or
    ``url`` None where no HTTP endpoint serves the page."""

    url: str | None = None
    expires_in: float | UnsetType = UNSET
    pages: str | UnsetType = UNSET
