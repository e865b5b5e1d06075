"""The profiles' own Unix sockets: bound, served and closed as the config says.

Each ``[profiles.NAME] socket`` is bound like the daemon's (its mode set before anyone
can connect, a live socket never stolen) and serves that profile only; who may connect
is its own ``socket_mode``, ``allow_uids`` and ``allow_groups`` (the socket's group is
the first of those mcpd may give it: ``checks.socket_access``). A reload binds the
sockets of new profiles, closes those of removed ones and rebinds a changed one (its
place, its mode or its group). Only
the listener goes with the place it listened on: the connections it accepted are the
profile's, kept while the profile is (moved, its mode changed, or its socket dropped)
and ended when a reload removes it, each once what it has in flight is answered
(``Leave``), so no agent is left waiting for a reply that never comes; the HTTP
sessions opened on it end with them.

A reload's new places are bound (``claim``) before it starts any server, for the same
reason as at start-up (``mcpd.starting.listening``): a server started first could bind them
itself, and agents of that profile would talk to it. A socket that takes the place of
one of ours (the same path with another mode, or a path another profile gave up) is
made ready beside it and renamed over it once the reload is applied, so the path is
never free for anyone to bind.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

import msgspec
import trio

from protocol.shown.logfields import log_extra

from ...config.checks.socket_access import access_warnings, socket_group
from ...config.tables.model import ConfigError
from ...config.tables.profiles import ProfileConfig, socket_where
from ...starting.cannot_start import DaemonError
from .peers import resolve_groups
from .unix_socket import SocketFile, Staged, UnixBound, bind_unix, stage_unix

logger = logging.getLogger("mcpd.agents")

# Where a profile's socket is, its mode and the group given to it.
_Place = tuple[str, int, int | None]
SocketHandler = Callable[[trio.SocketStream, str, "Leave"], Awaitable[None]]
# What ends the HTTP sessions opened on a profile's socket until now, saying how many.
SessionsOn = Callable[[str], Callable[[], int]]


class Leave:
    """A connection on a profile's socket, as the socket side holds it, to end it when
    a reload removes the profile: at once, unless its handler says it ``winds_down``
    itself once ``asked`` (an agent's connection answers what it has in flight first,
    within ``grace`` seconds, which are over at ``deadline``)."""

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.asked = trio.Event()
        self.done = trio.Event()
        self.reason = ""
        self.grace = 0.0
        self.deadline = 0.0
        self.winds_down = False

    def ask(self, reason: str, grace: float) -> None:
        self.reason, self.grace = reason, grace
        self.deadline = trio.current_time() + grace
        self.asked.set()
        if not self.winds_down:
            self.scope.cancel()


class _Bound(msgspec.Struct):
    path: str
    mode: int
    group: int | None  # given to its file (None: its user's own)
    scope: trio.CancelScope  # its listener's
    file: SocketFile
    allow_uids: frozenset[int]
    allow_gids: frozenset[int]


class ProfileSockets:
    def __init__(self, handle: SocketHandler, sessions_on: SessionsOn) -> None:
        self._handle = handle
        self._sessions_on = sessions_on
        self._bound: dict[str, _Bound] = {}
        self._nursery: trio.Nursery | None = None
        self._claimed: dict[str, UnixBound | Staged] = {}  # for the reload under way
        # The connections accepted on each profile's socket, wherever it listened then.
        self._accepted: dict[str, set[Leave]] = {}
        self.errors: dict[str, str] = {}  # profile -> why its socket is not listening

    async def run(
        self,
        profiles: Mapping[str, ProfileConfig],
        bound: Mapping[str, UnixBound] | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve the sockets of ``profiles`` (every profile; those with a socket have
        one) until cancelled: those ``bound`` already (which are this one's to close
        from now on), and the others bound here (a failure stops the daemon: it was
        asked to listen there)."""
        ready = dict(bound or {})
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self.apply(profiles, strict=True, ready=ready)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self.release()
            for served in self._bound.values():
                _close(served)
            self._bound = {}
            for left in ready.values():  # bound for a profile it was not given
                left.close()

    def allowed(self, name: str) -> tuple[frozenset[int], frozenset[int]]:
        bound = self._bound.get(name)
        return (bound.allow_uids, bound.allow_gids) if bound else (frozenset(), frozenset())

    def paths(self) -> dict[str, str]:
        return {name: b.path for name, b in self._bound.items()}

    async def claim(self, profiles: Mapping[str, ProfileConfig]) -> None:
        """Before a reload starts any server: bind the socket of each profile in
        ``profiles`` whose place or mode differs from what it listens on now, so that no
        server the reload starts can take its path first. A path one of ours listens on
        now is only made ready beside it, to take its place once the reload is applied
        (``apply``), which serves what was claimed. A socket that cannot be bound makes
        the config one that cannot be served: ``ConfigError`` naming
        ``profiles.NAME.socket``, and none of them is kept."""
        self.release()
        claimed: dict[str, UnixBound | Staged] = {}
        try:
            ours = self._ours()
            for name, (path, mode, group) in self._to_bind(profiles).items():
                try:
                    claimed[name] = await _bind(path, mode, group, ours)
                except DaemonError as exc:
                    raise ConfigError(f"profiles.{name}.socket", str(exc)) from None
        except BaseException:
            for left in claimed.values():
                left.close()
            raise
        self._claimed = claimed

    def release(self) -> None:
        """Close what ``claim`` bound and no ``apply`` took (a reload given up)."""
        claimed, self._claimed = self._claimed, {}
        for left in claimed.values():
            left.close()

    async def apply(
        self,
        profiles: Mapping[str, ProfileConfig],
        *,
        grace: float = 0.0,
        strict: bool = False,
        ready: dict[str, UnixBound] | None = None,
    ) -> None:
        """Bind, close or rebind the sockets to match ``profiles`` (every profile of
        the config); a socket in ``ready`` (all taken from it) or claimed is used as it
        is where its place matches, and closed where it does not. A socket rebound
        where one of ours listens takes its place before that one is closed: the path
        never answers to nobody, nor is free for another to bind meanwhile. The
        connections of a profile not in ``profiles`` end, each given ``grace`` seconds
        to answer what it has in flight."""
        assert self._nursery is not None
        for name in [n for n in self._accepted if n not in profiles]:
            self._nursery.start_soon(self._end, name, self._accepted.pop(name), grace)
        wanted = {n: p for n, p in profiles.items() if p.socket is not None}
        prepared: dict[str, UnixBound | Staged] = {**(ready or {}), **self._claimed}
        self._claimed = {}
        if ready:
            ready.clear()
        to_bind = self._to_bind(wanted)
        ours = self._ours()
        stale = [self._bound.pop(n) for n in list(self._bound) if n not in wanted or n in to_bind]
        self.errors = {}
        try:
            for name, cfg in wanted.items():
                if name not in to_bind:
                    bound = self._bound[name]
                    uids = frozenset(cfg.allow_uids)
                    gids = frozenset(resolve_groups(cfg.allow_groups))
                    if (uids, gids) != (bound.allow_uids, bound.allow_gids):
                        _warn_access(name, cfg, bound.path, bound.mode)
                    bound.allow_uids, bound.allow_gids = uids, gids
                    continue
                try:
                    where, ready_one = to_bind[name], prepared.pop(name, None)
                    await self._open(name, cfg, where, ready_one, ours)
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
        finally:
            # A socket file another took the place of is left to it (``SocketFile``).
            for old in stale:
                _close(old)
            for left in prepared.values():  # for a place this config does not have
                left.close()

    def _to_bind(self, profiles: Mapping[str, ProfileConfig]) -> dict[str, _Place]:
        """The place, mode and group of each profile with a socket other than the one it
        has."""
        out = {}
        for name, cfg in profiles.items():
            if cfg.socket is None:
                continue
            where = (*socket_where(cfg), socket_group(cfg.allow_groups))
            bound = self._bound.get(name)
            if bound is None or (bound.path, bound.mode, bound.group) != where:
                out[name] = where
        return out

    def _ours(self) -> dict[str, SocketFile]:
        """The socket file of each path one of ours listens on."""
        return {b.path: b.file for b in self._bound.values()}

    async def _open(
        self,
        name: str,
        cfg: ProfileConfig,
        where: _Place,
        prepared: UnixBound | Staged | None,
        ours: Mapping[str, SocketFile],
    ) -> None:
        assert self._nursery is not None
        path, mode, group = where
        # What was made ready was bound for this same config: its group is this one's.
        if prepared is not None and (prepared.path, prepared.mode) != (path, mode):
            prepared.close()  # bound for another place than this config's
            prepared = None
        if prepared is None:
            prepared = await _bind(path, mode, group, ours)
        ready = prepared.publish() if isinstance(prepared, Staged) else prepared
        listener = ready.listener()
        scope = trio.CancelScope()
        self._bound[name] = _Bound(
            path,
            mode,
            group,
            scope,
            ready.file,
            frozenset(cfg.allow_uids),
            frozenset(resolve_groups(cfg.allow_groups)),
        )

        async def handler(stream: trio.SocketStream) -> None:
            leave = Leave()
            accepted = self._accepted.setdefault(name, set())
            accepted.add(leave)
            try:
                with leave.scope:
                    await self._handle(stream, name, leave)
            finally:
                accepted.discard(leave)
                leave.done.set()

        async def serve(
            task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
        ) -> None:
            # The connections run outside the listener's scope: closing it (the socket
            # moved, or its mode changed) ends no one's connection.
            with scope:
                await trio.serve_listeners(
                    handler, [listener], handler_nursery=self._nursery, task_status=task_status
                )

        await self._nursery.start(serve)
        logger.info("profile %s: listening on %s", name, path, extra=log_extra(None))
        _warn_access(name, cfg, path, mode)

    async def _end(self, name: str, accepted: set[Leave], grace: float) -> None:
        """End the connections of the profile ``name`` a reload removed, then the HTTP
        sessions opened on its socket (which outlive a connection, and would be found
        again were the profile added back), and say how many there were."""
        leaving = list(accepted)
        end_sessions = self._sessions_on(name)
        reason = f"the profile {name!r} was removed by a reload"
        for leave in leaving:
            leave.ask(reason, grace)
        for leave in leaving:
            await leave.done.wait()
        # Only now: a request in flight in a session is given its grace first.
        ended = end_sessions()
        if leaving or ended:
            logger.info(
                "profile %s: %d connection(s) on its socket closed, %d HTTP session(s) "
                "opened on it ended: %s",
                name,
                len(leaving),
                ended,
                reason,
                extra=log_extra(None, "reload", reason),
            )


async def _bind(
    path: str, mode: int, group: int | None, ours: Mapping[str, SocketFile]
) -> UnixBound | Staged:
    """Bound at ``path``, or made ready beside it where one of ``ours`` listens."""
    try:
        if path in ours:
            own = -1 if group is None else group  # as chown(2) reads it: the user's own
            return await trio.to_thread.run_sync(stage_unix, path, mode, ours[path], own)
        return await trio.to_thread.run_sync(bind_unix, path, mode, group)
    except OSError as exc:  # what the system refused, said as every socket's refusal
        raise DaemonError(f"cannot listen on {path!r}: {exc.strerror or exc}") from None


def _warn_access(name: str, cfg: ProfileConfig, path: str, mode: int) -> None:
    """Whom of those the profile allows its socket's mode, group or directories keep out."""
    key = f"profiles.{name}"
    for warning in access_warnings(key, path, mode, cfg.allow_uids, cfg.allow_groups):
        logger.warning("%s", warning, extra=log_extra(None, "config"))


def _close(bound: _Bound) -> None:
    """Stop listening there; the connections it accepted are not its to end."""
    bound.scope.cancel()
    bound.file.remove()
