"""Every server's last known tools (and prompts and resources), and what it went
through lately, kept across restarts.

After a restart, a server that is down would otherwise vanish from the tool list until
it answers again, and a model would act as if its tools never existed. So each
server's last list (as the server sent it, with its era and cache TTL) is saved in
``registry.json`` in the state directory, and read back at startup: a server still
down then shows its last known tools, marked unavailable. Saved tools are used only
for the same server (same command, arguments, environment or URL).

Beside the lists, each server's recent history (``SavedHistory``: its state changes of
the last day, its calls minute by minute over the last hour) is saved for the status
page, whatever the server's fingerprint: it is the history of the alias.

The file is replaced whole and private (``privatefile``), soon after a change, and
while changes keep coming, paced (``write_pacing``); a file that cannot be read is ignored
with a warning, since it only ever holds a cache.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Final, TypeAlias

import msgspec
import trio

from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.shown.logfields import log_extra

from ...config.loading.paths import state_directory
from ...config.tables.model import Config
from ...config.tables.servertable import ServerConfig
from ...registry.gating.limits import limited_saved
from ...registry.tables.catalog import Catalog
from .privatefile import read_private, write_atomically
from .unsaved import SaveWatch
from .write_pacing import PacedWrites

logger = logging.getLogger("mcpd.state")

FILE_NAME: Final = "registry.json"
FORMAT: Final = 1


class SavedServer(msgspec.Struct, kw_only=True):
    fingerprint: str
    tools: list[mcp.Tool]
    # Its prompts, resources and templates; None: it offers none (or never said).
    prompts: list[features.Prompt] | None = None
    resources: list[features.Resource] | None = None
    templates: list[features.ResourceTemplate] | None = None
    era: str | None = None
    protocol_version: str | None = None
    ttl_ms: int = 0
    saved_at: str = ""


class SavedChange(msgspec.Struct, frozen=True, array_like=True):
    """A server's state from ``at`` (Unix time) on, and why, if it is not up."""

    at: float
    state: str
    reason: str | None = None


class SavedMinute(msgspec.Struct, frozen=True, array_like=True):
    """The calls of the minute that began at ``at`` (Unix time, a multiple of 60)."""

    at: int
    calls: int
    errors: int
    p50_ms: float | None = None
    p95_ms: float | None = None


class SavedHistory(msgspec.Struct, kw_only=True):
    changes: list[SavedChange] = msgspec.field(default_factory=list)
    minutes: list[SavedMinute] = msgspec.field(default_factory=list)
    # When it was taken: mcpd knows nothing of the time after it until it starts again.
    until: float = 0.0


class SavedState(msgspec.Struct, kw_only=True):
    format: int = FORMAT
    servers: dict[str, SavedServer] = msgspec.field(default_factory=dict)
    history: dict[str, SavedHistory] = msgspec.field(default_factory=dict)


_decoder: Final = msgspec.json.Decoder(SavedState)
_encoder: Final = msgspec.json.Encoder()


def state_dir(config: Config, env: Mapping[str, str] | None = None) -> str:
    """``[daemon] state_dir``, else systemd's StateDirectory=, else the XDG state home
    (``/var/lib/mcpd`` for root without one)."""
    return state_directory(config.daemon.state_dir, env)


def fingerprint(cfg: ServerConfig) -> str:
    """What makes a server the same server; timeouts and curation do not."""
    what = [cfg.command, cfg.args, sorted(cfg.env.items()), cfg.cwd, cfg.url]
    return hashlib.sha256(_encoder.encode(what)).hexdigest()[:16]


def read_state(path: str) -> SavedState:
    try:
        found = read_private(path, "mcpd replaces it")
    except OSError as exc:
        logger.warning("cannot read %s (%s); starting without last known tools", path, exc)
        return SavedState()
    if found is None:
        return SavedState()
    data = found[0]
    try:
        state = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        logger.warning(
            "ignoring %s, which is not a valid state file (%s); it will be rewritten",
            path,
            exc,
            extra=log_extra(None, "state_file", str(exc)),
        )
        return SavedState()
    if state.format != FORMAT:
        logger.warning("ignoring %s: state format %d, expected %d", path, state.format, FORMAT)
        return SavedState()
    return state


# What is known of a server's live session: its era, protocol version and list ttl.
LiveEra: TypeAlias = tuple[str | None, str | None, int]


class StateKeeper:
    """Reads the state file at startup and rewrites it whenever a server's list changes."""

    def __init__(
        self,
        path: str,
        registry: Catalog,
        config: Callable[[], Config],
        era_of: Callable[[str], LiveEra | None],
        history: Callable[[], dict[str, SavedHistory]] = dict,
    ) -> None:
        self.path = path
        self.registry = registry
        self._config = config
        self._era_of = era_of
        self._history = history
        self.saved: dict[str, SavedServer] = {}
        # The servers' histories as the file had them at start-up.
        self.history_read: dict[str, SavedHistory] = {}
        self._paced = PacedWrites()
        # A digest of what was last written, not the bytes: with 10,000 tools the file
        # is megabytes, and it would sit in memory only to be compared with.
        self._last: bytes | None = None
        self.saving = SaveWatch(
            "last known tools", "servers start with no tools known after a restart"
        )

    async def seed(self, config: Config) -> list[str]:
        """Put each configured server's saved tools in the registry, marked unavailable
        until the server answers. Returns the aliases seeded."""
        state = await trio.to_thread.run_sync(read_state, self.path)
        self.history_read = state.history
        seeded = []
        for alias, cfg in config.servers.items():
            saved = state.servers.get(alias)
            if not cfg.enabled or saved is None or saved.fingerprint != fingerprint(cfg):
                continue
            self.saved[alias] = saved
            # Saved under limits that may have been higher than they are now.
            limits = config.list_limits(alias)
            tools = limited_saved(alias, "tools", saved.tools, limits)
            self.registry.set_rules(alias, cfg.tools)
            self.registry.update(alias, tools, trusted=cfg.trusted)
            self.registry.prompts.set_rules(alias, cfg.prompts)
            if saved.prompts is not None:
                prompts = limited_saved(alias, "prompts", saved.prompts, limits)
                self.registry.prompts.update(alias, prompts)
            if saved.resources is not None:
                self.registry.resources.update(
                    alias,
                    limited_saved(alias, "resources", saved.resources, limits),
                    limited_saved(alias, "resource_templates", saved.templates or [], limits),
                )
            self.registry.set_availability(
                alias, False, f"unavailable: {alias} has not answered since mcpd started"
            )
            seeded.append(alias)
        if seeded:
            logger.info(
                "last known tools of %s from %s",
                ", ".join(seeded),
                self.path,
                extra=log_extra(None),
            )
        return seeded

    def changed(self) -> None:
        self._paced.changed()

    async def run(
        self,
        started: trio.Event | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Write after each change, and first once ``started`` is set: at start-up every
        server lists its tools, and one write after all of them costs one encoding of
        the whole registry instead of one each time the debounce ends, while the last
        servers are still answering."""
        task_status.started()
        # Written when mcpd stops, changed or not: the history says until when it ran.
        await self._paced.run(self.flush, started, final=True)

    async def flush(self) -> None:
        self._paced.begin()
        data = _encoder.encode(self.snapshot())
        digest = hashlib.blake2b(data, digest_size=16).digest()
        if digest == self._last:
            return
        try:
            await trio.to_thread.run_sync(write_atomically, self.path, data)
        except OSError as exc:
            self._paced.failed()
            if self.saving.failed(self.path, str(exc)):
                logger.warning(
                    "cannot save the last known tools to %s: %s",
                    self.path,
                    exc,
                    extra=log_extra(None, "state_file", str(exc)),
                )
            return
        self._paced.done(len(data))
        self._last = digest
        self.saving.saved()

    def snapshot(self) -> SavedState:
        servers: dict[str, SavedServer] = {}
        config = self._config()
        for alias in sorted(self.registry.aliases()):
            cfg = config.servers.get(alias)
            tools = self.registry.raw_tools(alias)
            if cfg is None or tools is None:
                continue
            before = self.saved.get(alias)
            live = self._era_of(alias)
            era: str | None
            version: str | None
            if live is not None:
                era, version, ttl = live
            elif before is not None:  # not connected now: what was known stays
                era, version, ttl = before.era, before.protocol_version, before.ttl_ms
            else:
                era, version, ttl = None, None, 0
            entry = SavedServer(
                fingerprint=fingerprint(cfg),
                tools=tools,
                era=era,
                protocol_version=version,
                ttl_ms=ttl,
            )
            entry.prompts = self.registry.prompts.raw(alias)
            listed = self.registry.resources.raw(alias)
            if listed is not None:
                entry.resources, entry.templates = listed
            if before is not None and _same(before, entry):
                entry = before
            else:
                entry.saved_at = datetime.now(UTC).isoformat(timespec="seconds")
            servers[alias] = self.saved[alias] = entry
        return SavedState(servers=servers, history=self._history())


def _same(a: SavedServer, b: SavedServer) -> bool:
    return _encoder.encode(msgspec.structs.replace(a, saved_at="")) == _encoder.encode(
        msgspec.structs.replace(b, saved_at="")
    )
