"""The secrets the daemon comes to hold while it runs, for the guard to look for in what
servers send (``Oversight.watch_secrets``): the servers' OAuth tokens, and the HTTP
endpoint's token from the moment it is handed out to check a request with. The config's
own secrets come with the config; these change without a reload, so the guard asks for
them again whenever it looks."""

from __future__ import annotations

from collections.abc import Callable

from .config.credentials.secrets import HeldSecret
from .local.state.endpoint_token import TokenFile
from .servers.supervisor import Supervisor


class RuntimeSecrets:
    def __init__(
        self,
        token: TokenFile,
        supervisor: Supervisor,
        refresh: Callable[[], None],
    ) -> None:
        """``refresh``: has the guard take the secrets held now, as a new token is."""
        self._token = token
        self._supervisor = supervisor
        self._refresh = refresh
        self._handed_out = ""

    def http_token(self) -> str:
        """The endpoint's token as its file holds it now, guarded from now on."""
        token = self._token.current()
        if token != self._handed_out:
            # A new token (the file was written again): searched for from now on.
            self._handed_out = token
            self._refresh()
        return token

    def held_now(self) -> list[HeldSecret]:
        held = []
        for alias, server in self._supervisor.servers.items():
            if server.auth is not None:
                for value in server.auth.creds.to_mask():
                    held.append(HeldSecret(f"servers.{alias} (OAuth)", value))
        if self._handed_out:
            held.append(HeldSecret("the HTTP endpoint's token", self._handed_out))
        return held
