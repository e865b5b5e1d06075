"""OAuth credentials kept across daemon restarts: one file per server, mode 0600.

``<state_dir>/oauth/<alias>.json`` holds, per authorization server (keyed by its
issuer), the metadata needed to refresh, the client registration mcpd made there and
the tokens it got (with the client they were issued to, when logins there no longer
use it); ``issuer`` names the one in use. Credentials never travel between
issuers: a server that moved to another authorization server starts a new entry.
The URL the tokens were obtained for is kept too, so tokens are never sent to a
server whose configured URL changed.

Files are replaced whole (mode 0600 in a 0700 directory; see ``privatefile``), so a
crash never leaves half a file. A file that cannot be read is
reported, and the server asks for a new login saying why. Client secrets from
the configuration are not copied here; only what mcpd was issued is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from typing import Final

import msgspec
import trio

from protocol.oauth import AuthorizationServer, ClientRegistration, TokenSet
from protocol.oauth.secret import dec_hook, enc_hook
from protocol.shown.logfields import log_extra

from .privatefile import read_private, write_atomically

logger = logging.getLogger("mcpd.tokens")

FORMAT: Final = 1
SUBDIR: Final = "oauth"


class IssuerRecord(msgspec.Struct, kw_only=True):
    server: AuthorizationServer | None = None
    # The client a login there uses (None: the next one registers, or names one).
    registration: ClientRegistration | None = None
    tokens: TokenSet | None = None
    # The client ``tokens`` were issued to once logins no longer use it (the
    # authorization server refused it at a later login): they are refreshed and
    # revoked as that client until they are dropped. None: ``registration``.
    tokens_client: ClientRegistration | None = None

    @property
    def issued_to(self) -> ClientRegistration | None:
        """The client the tokens were issued to, as saved (a configured secret is not)."""
        return self.tokens_client or self.registration


class StoredLogin(msgspec.Struct, kw_only=True):
    format: int = FORMAT
    server_url: str
    issuer: str | None = None
    issuers: dict[str, IssuerRecord] = msgspec.field(default_factory=dict)
    # The scopes the configuration named at the login (None: saved before they were
    # kept): a configuration that names fewer since does not use the login.
    configured_scopes: list[str] | None = None

    @property
    def current(self) -> IssuerRecord | None:
        return self.issuers.get(self.issuer) if self.issuer is not None else None


_encoder: Final = msgspec.json.Encoder(enc_hook=enc_hook)
_decoder: Final = msgspec.json.Decoder(StoredLogin, dec_hook=dec_hook)


def encode_login(login: StoredLogin) -> bytes:
    return _encoder.encode(login)


class Unusable(msgspec.Struct, frozen=True):
    """A saved login that could not be read, and why."""

    path: str
    why: str


class OAuthStore:
    """The credential files under one state directory."""

    def __init__(self, state_dir: str) -> None:
        self.directory = os.path.join(state_dir, SUBDIR)

    def path(self, alias: str) -> str:
        return os.path.join(self.directory, f"{alias}.json")

    async def load(self, alias: str) -> StoredLogin | None:
        """The saved login (None: there is none that can be used)."""
        found = await self.read(alias)
        return found if isinstance(found, StoredLogin) else None

    async def read(self, alias: str) -> StoredLogin | Unusable | None:
        """The saved login, or why the file holding it cannot be used (None: none)."""
        return await trio.to_thread.run_sync(self._read, alias)

    async def save(self, alias: str, login: StoredLogin) -> None:
        data = encode_login(login)
        await trio.to_thread.run_sync(write_atomically, self.path(alias), data)

    def _read(self, alias: str) -> StoredLogin | Unusable | None:
        path = self.path(alias)
        try:
            found = read_private(path, f"`mcpd auth login {alias}` replaces it")
        except OSError as exc:
            return self._unusable(alias, path, exc.strerror or str(exc))
        if found is None:
            return None
        data, st = found
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            # Someone loosened it; credentials are for mcpd's user alone.
            with contextlib.suppress(OSError):
                os.chmod(path, 0o600)
            logger.warning(
                "%s: %s was readable by other users; it is 0600 again",
                alias,
                path,
                extra=log_extra(alias, "token_file", "mode tightened"),
            )
        try:
            login = _decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return self._unusable(alias, path, str(exc))
        if login.format != FORMAT:
            return self._unusable(alias, path, f"format {login.format}, expected {FORMAT}")
        return login

    def _unusable(self, alias: str, path: str, why: str) -> Unusable:
        logger.warning(
            "%s: ignoring the saved login in %s (%s); a new login will be needed",
            alias,
            path,
            why,
            extra=log_extra(alias, "token_file", why),
        )
        return Unusable(path, why)
