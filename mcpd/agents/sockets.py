"""The profiles' own Unix sockets: bound, served and closed as the config says.

Each ``[profiles.NAME] socket`` is bound like the daemon's (its mode set before anyone
can connect, a live socket never stolen) and serves that profile only; who may connect
is its own ``socket_mode``, ``allow_uids`` and ``allow_groups``. A reload binds the
sockets of new profiles, closes those of removed ones and rebinds a changed one; the
others keep their connections.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

import msgspec
import trio

from protocol.logfields import log_extra

from ..config.profiles import ProfileConfig, socket_where
from ..errors import DaemonError
from .peers import resolve_groups
from .unix_socket import SocketFile, UnixBound, open_unix_listener

logger = logging.getLogger("mcpd.api")

Handler = Callable[[trio.SocketStream, str | None], Awaitable[None]]


class _Bound(msgspec.Struct):
    path: str
    mode: int
    scope: trio.CancelScope
    file: SocketFile
    allow_uids: frozenset[int]
    allow_gids: frozenset[int]


class ProfileSockets:
    def __init__(self, handle: Handler) -> None:
        self._handle = handle
        self._bound: dict[str, _Bound] = {}
        self._nursery: trio.Nursery | None = None
        self.errors: dict[str, str] = {}  # profile -> why its socket is not listening

    async def run(
        self,
        profiles: Mapping[str, ProfileConfig],
        bound: Mapping[str, UnixBound] | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve the sockets in ``profiles`` until cancelled: those ``bound`` already
        (which are this one's to close from now on), and the others bound here (a
        failure stops the daemon: it was asked to listen there)."""
        ready = dict(bound or {})
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self.apply(profiles, strict=True, ready=ready)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            for name in list(self._bound):
                self._close(name)
            for left in ready.values():  # bound for a profile it was not given
                left.close()

    def allowed(self, name: str) -> tuple[frozenset[int], frozenset[int]]:
        bound = self._bound.get(name)
        return (bound.allow_uids, bound.allow_gids) if bound else (frozenset(), frozenset())

    def paths(self) -> dict[str, str]:
        return {name: b.path for name, b in self._bound.items()}

    async def apply(
        self,
        profiles: Mapping[str, ProfileConfig],
        *,
        strict: bool = False,
        ready: dict[str, UnixBound] | None = None,
    ) -> None:
        """Bind, close or rebind the sockets to match ``profiles``; a socket in
        ``ready`` (taken from it) is used as it is where its place matches."""
        wanted = {n: p for n, p in profiles.items() if p.socket is not None}
        for name in list(self._bound):
            cfg = wanted.get(name)
            bound = self._bound[name]
            if cfg is None or socket_where(cfg) != (bound.path, bound.mode):
                self._close(name)
        self.errors = {}
        for name, cfg in wanted.items():
            if name in self._bound:
                bound = self._bound[name]
                bound.allow_uids = frozenset(cfg.allow_uids)
                bound.allow_gids = frozenset(resolve_groups(cfg.allow_groups))
                continue
            try:
                await self._open(name, cfg, (ready or {}).pop(name, None))
            except DaemonError as exc:
                if strict:
                    raise type(exc)(f"profiles.{name}.socket: {exc}") from None
                self.errors[name] = str(exc)
                logger.error(
                    "profile %s: not listening on its socket: %s",
                    name,
                    exc,
                    extra=log_extra(None, "reload", str(exc)),
                )

    async def _open(self, name: str, cfg: ProfileConfig, ready: UnixBound | None) -> None:
        assert self._nursery is not None
        path, mode = socket_where(cfg)
        if ready is not None and (ready.path, ready.mode) != (path, mode):
            ready.close()  # bound for another place than this config's
            ready = None
        if ready is None:
            listener, file = await open_unix_listener(path, mode)
        else:
            listener, file = ready.listener(), ready.file
        scope = trio.CancelScope()
        self._bound[name] = _Bound(
            path,
            mode,
            scope,
            file,
            frozenset(cfg.allow_uids),
            frozenset(resolve_groups(cfg.allow_groups)),
        )

        async def serve(
            task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
        ) -> None:
            async def handler(stream: trio.SocketStream) -> None:
                await self._handle(stream, name)

            with scope:
                await trio.serve_listeners(handler, [listener], task_status=task_status)

        await self._nursery.start(serve)
        logger.info("profile %s: listening on %s", name, path, extra=log_extra(None))

    def _close(self, name: str) -> None:
        bound = self._bound.pop(name)
        bound.scope.cancel()
        bound.file.remove()
