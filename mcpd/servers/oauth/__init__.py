"""OAuth for the HTTP servers that ask for it, as the rest of mcpd sees it.

Everything outside this package imports from here, never from a module inside:
the errors every runner, session and scheduler catches, and ``attach``, which gives
an HTTP server its authorization and its login. Importing this package loads only
the errors; the OAuth client itself (``auth``, ``state``, ``credentials``, ``moving``,
``login``, ``revoking``, and through them ``protocol.oauth`` and the OAuth transport) is
loaded by the first ``attach``, so a daemon with only stdio servers never loads it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from protocol.shown.logfields import log_extra

from .errors import AuthFailed, LoginError, LoginRequired, NoOAuthLogin, RedirectFailed

if TYPE_CHECKING:
    from ...config.tables.model import Config
    from ...config.tables.servertable import ServerConfig
    from ...login_answers import LoggedOut
    from .auth import ServerAuth
    from .login import Login

__all__ = [
    "AuthFailed",
    "Login",
    "LoginError",
    "LoginRequired",
    "NoOAuthLogin",
    "RedirectFailed",
    "ServerAuth",
    "attach",
    "forget_unconfigured",
    "unconfigured_logins",
]

logger = logging.getLogger("mcpd.auth")


def attach(alias: str, cfg: ServerConfig, config: Config) -> tuple[ServerAuth, Login]:
    """An HTTP server's authorization (the transport's hook) and the login that a
    person runs through ``mcpd auth`` when only they can help; a client secret or key
    that no issuer pins is warned of, as check-config does."""
    from ...config.checks.servers import unpinned_client
    from .auth import ServerAuth
    from .login import Login

    unpinned = unpinned_client(alias, cfg)
    if unpinned is not None:
        logger.warning("%s", unpinned, extra=log_extra(alias, "unpinned_client"))
    auth = ServerAuth.for_server(alias, cfg, config)
    return auth, Login(auth)


async def forget_unconfigured(alias: str, config: Config) -> LoggedOut | None:
    """``mcpd auth logout`` of a server the configuration no longer names: its saved
    login revoked where the file says how, and removed (None: none is saved)."""
    from ...local.state.statefile import state_dir
    from .revoking import forget_unconfigured_in as forget

    return await forget(alias, state_dir(config))


async def unconfigured_logins(config: Config) -> list[str]:
    """The servers the configuration no longer names whose saved login is still on
    disk (``forget_unconfigured`` removes one)."""
    import trio

    from ...config.tables.model import ALIAS_RE
    from ...local.state.oauth_store import OAuthStore
    from ...local.state.statefile import state_dir

    directory = OAuthStore(state_dir(config)).directory
    names = await trio.to_thread.run_sync(_json_files, directory)
    return sorted(n for n in names if ALIAS_RE.match(n) and n not in config.servers)


def _json_files(directory: str) -> list[str]:
    """The names of the ``.json`` files in ``directory``, without it (none: no folder)."""
    import os

    try:
        listed = os.listdir(directory)
    except OSError:
        return []
    return [n.removesuffix(".json") for n in listed if n.endswith(".json")]
