"""The configuration's model: the whole config, its ``[daemon]`` and ``[naming]``
tables, what each server's settings come to once the daemon's fill in what it leaves
out, and the error that names a bad key. A server's own table is ``servertable``;
loading, expansion and validation are in ``load``."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Final, Literal, NamedTuple

import msgspec

from protocol.shown.stand_ins import masked
from transports.stdio.sandbox.plan import Level

from ..credentials.secrets import HeldSecret
from .policy import PolicyRule
from .profiles import ProfileConfig
from .servertable import LimitsConfig, ServerConfig

EX_CONFIG: Final = 78
# The key of a JSON-RPC error's data when the daemon rejected a config (a reload's).
CONFIG_ERROR: Final = "mcpd/configError"
ALIAS_RE: Final = re.compile(r"^[A-Za-z0-9_-]+\Z")  # not $: it matches before a final \n
_NOT_IN_ALIAS: Final = re.compile(r"[^A-Za-z0-9_-]+")
# The longest time any duration key may give: a year. Nothing mcpd waits for takes
# longer, and a longer delay would put a retry past the dates a clock can show.
MAX_SECONDS: Final = 365 * 24 * 3600.0
# Far above any config or host file; what is larger is not one, and is not read.
MAX_CONFIG_BYTES: Final = 64 * 1024 * 1024


def alias_for(name: str) -> str:
    """The alias a server's ``name`` becomes where it holds what an alias may not: each
    run of such characters an underscore (``notes.x``: ``notes_x``)."""
    return _NOT_IN_ALIAS.sub("_", name.strip()).strip("_") or "server"


def key_as_written(key: str) -> str:
    """A table's key as TOML writes it in a dotted path: quoted unless it is bare, so
    ``notes.x`` does not read as ``x`` under ``notes``."""
    return key if ALIAS_RE.match(key) else json.dumps(key, ensure_ascii=False)


class ConfigError(Exception):
    """A bad config; ``path`` is the key path (``servers.notes.command``), ``file`` the
    file it was read from, where known. A value being masked (``protocol.shown.stand_ins``)
    that its message holds as it is, is masked."""

    def __init__(
        self, path: str, message: str, file: str = "", more: Sequence[ConfigError] = ()
    ) -> None:
        message = masked(message)
        said = f"{path}: {message}" if path else message
        # One line an error, each saying its file: the first is what ``path`` and
        # ``message`` are; ``more`` are the others the same reading found.
        lines = [f"{file}: {said}" if file else said, *(str(e) for e in more)]
        super().__init__("\n".join(lines))
        self.path = path
        self.message = message
        self.file = file
        self.more = tuple(more)

    def in_file(self, file: str) -> ConfigError:
        """The same error, saying the file it is in (the config may come from
        ``--config``, ``$MCPD_CONFIG`` or the default path)."""
        more = [e.in_file(file) for e in self.more]
        return type(self)(self.path, self.message, file, more)

    def with_more(self, more: Sequence[ConfigError]) -> ConfigError:
        """The same error, with the others found with it."""
        return type(self)(self.path, self.message, self.file, more)


def duration_problem(seconds: float, *, off: bool = False) -> str | None:
    """Why ``seconds`` cannot be a duration key's value, or None when it can. ``off``:
    the key takes 0 as "never"."""
    if (off and seconds == 0) or 0 < seconds <= MAX_SECONDS:  # nan and inf fail both
        return None
    return f"must be {'0 (off) or ' if off else ''}positive, at most {MAX_SECONDS:.0f} (a year)"


class DaemonConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    socket: str | None = None
    socket_mode: str = "0600"
    call_timeout: float = 60.0
    result_budget_chars: int = 8000
    page_size: int = 0
    startup_deadline: float = 10.0
    probe_timeout: float = 5.0
    list_timeout: float = 30.0
    # Progress notifications extend a call's time limit, but never past this.
    max_call_time: float = 600.0
    # How often an idle HTTP server is asked whether it is still there (0: never).
    health_interval: float = 30.0
    max_pages: int = 1000
    max_line_bytes: int = 16 * 1024 * 1024
    max_connections: int = 256
    # What one user other than mcpd's own and root may hold of max_connections (None:
    # a quarter of it), so that no one user can take the sockets from the others.
    max_connections_per_uid: int | None = None
    max_inflight_per_connection: int = 128
    allow_uids: list[int] = msgspec.field(default_factory=list)
    allow_groups: list[str] = msgspec.field(default_factory=list)
    state_dir: str | None = None
    # Hosts commonly accept about this many tools in one list; more is logged as a warning.
    max_tools: int = 128
    # Supervision and circuit breaking, the same for every server.
    backoff_base: float = 0.5
    backoff_cap: float = 60.0
    max_restarts: int = 5
    crash_window: float = 60.0
    stable_after: float = 30.0
    failure_threshold: int = 5
    cooldown_base: float = 5.0
    cooldown_cap: float = 300.0
    queue_timeout: float = 30.0
    queue_size: int = 256
    # The HTTP endpoint for hosts that take a URL ("127.0.0.1:8765"); loopback only
    # unless http_allow_remote; http_origins are browser origins allowed besides it.
    http_listen: str | None = None
    http_allow_remote: bool = False
    http_origins: list[str] = msgspec.field(default_factory=list)
    # How long a connection to the endpoint has to send its request's headers (the
    # token is checked there).
    http_header_timeout: float = 5.0
    # How long a new connection to an agent socket may go without sending a request
    # (or anything) before it is closed.
    first_message_timeout: float = 30.0
    # How long an agent has to answer a server's request (elicitation, sampling, roots).
    ask_timeout: float = 120.0
    # What one server's lists may hold (each list kind on its own), far above what real
    # servers list: past them items are dropped and texts cut, and ``mcpd status`` and
    # the journal say what and why. Each can be set per server too.
    max_list_items: int = 2000
    max_list_bytes: int = 64 * 1024 * 1024
    max_item_bytes: int = 256 * 1024
    max_description_bytes: int = 64 * 1024
    max_instructions_bytes: int = 64 * 1024
    # What mcpd reads a second of what one server sends that answers no request (a
    # line, or a piece of a message, each: ``protocol.pacing.read_budget``), after a burst of a few
    # seconds' worth; past it the server's streams are read more slowly. Per server too.
    read_budget: int = 5000
    # What mcpd does when a server's tool, prompt or resource template differs from the
    # definition pinned when it was approved ("hold": listed but not usable until
    # `mcpd approve`), when an approved server lists one it did not have, whether a
    # server new to mcpd is held whole until approved, and whether an item the finding
    # rules flag is held. Each can be set per server too.
    on_changed_item: Literal["hold", "warn", "accept"] = "hold"
    on_new_item: Literal["hold", "warn", "accept"] = "warn"
    hold_new_servers: bool = False
    on_finding: Literal["hold", "warn"] = "warn"
    # The sandbox every stdio server gets unless its own `sandbox` says otherwise, and
    # the limits it gets unless its own `limits` say otherwise (``sandboxing.per_server``).
    sandbox: Level = "default"
    limits: LimitsConfig = msgspec.field(default_factory=LimitsConfig)
    # Whether well-known credential formats (private key blocks, cloud and API keys)
    # in what servers send are masked too, besides the secrets mcpd holds. Per server too.
    redact_patterns: bool = False
    # The audit log: a record of every call in the state directory (``calls.jsonl``,
    # rotated at audit_max_bytes, audit_files old ones kept), and one journal entry
    # a call. Arguments are kept only with audit_arguments, mcpd's secrets masked.
    audit: bool = True
    audit_journal: bool = True
    audit_arguments: bool = False
    audit_max_bytes: int = 16 * 1024 * 1024
    audit_files: int = 4


class NamingConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    template: str = "mcp__{alias}__{tool}"
    max_length: int = 64


# The keys of the list limits, in [daemon] and in each [servers.NAME].
MAX_AUDIT_FILES: Final = 1000

LIST_LIMIT_KEYS: Final = (
    "max_list_items",
    "max_list_bytes",
    "max_item_bytes",
    "max_description_bytes",
    "max_instructions_bytes",
)


class Limit(NamedTuple):
    value: int
    key: str  # the key that set it, for whoever is told what it left out


class ListLimits(msgspec.Struct, frozen=True, kw_only=True):
    """One server's list limits as they apply to it (``Config.list_limits``)."""

    items: Limit
    list_bytes: Limit
    item_bytes: Limit
    description_bytes: Limit
    instructions_bytes: Limit


Handling = Literal["hold", "warn", "accept"]


class PinPolicy(NamedTuple):
    """One server's pin settings as they apply to it (``Config.pin_policy``)."""

    on_changed_item: Handling
    on_new_item: Handling
    hold_new_servers: bool
    on_finding: Literal["hold", "warn"]


DEFAULT_POLICY: Final = PinPolicy("hold", "warn", False, "warn")


def _limit(alias: str, key: str, own: int | None, daemon: int) -> Limit:
    return Limit(daemon, f"daemon.{key}") if own is None else Limit(own, f"servers.{alias}.{key}")


class Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    daemon: DaemonConfig = msgspec.field(default_factory=DaemonConfig)
    naming: NamingConfig = msgspec.field(default_factory=NamingConfig)
    servers: dict[str, ServerConfig] = msgspec.field(default_factory=dict)
    profiles: dict[str, ProfileConfig] = msgspec.field(default_factory=dict)
    policy: list[PolicyRule] = msgspec.field(default_factory=list)
    # Set by mcpd, not config keys: the file read; the environment variables each
    # server's table refers to (``${VAR}``; "" for the rest of the file) and the
    # secret files (``${file:PATH}``) the file reads; and the secrets its values hold
    # (what came from ${VAR} and ${file:...}, headers, keys), which nothing mcpd
    # shows may contain. ``state_path``: the state directory as named before mcpd
    # followed its links and kept where they led (``state_links`` checks those links).
    source: str = ""
    state_path: str = ""
    variables: dict[str, list[str]] = msgspec.field(default_factory=dict)
    secret_files: list[str] = msgspec.field(default_factory=list)
    held_secrets: tuple[HeldSecret, ...] = ()

    def withheld_from(self, alias: str) -> frozenset[str]:
        """Variables the config resolves for others (other servers, mcpd itself) and
        not for ``alias``: none of them reaches ``alias`` but by its exact name."""
        own = set(self.variables.get(alias, ()))
        return frozenset(
            name
            for other, names in self.variables.items()
            if other != alias
            for name in names
            if name not in own
        )

    def socket_path(self) -> str:
        return self.daemon.socket or default_socket_path()

    def socket_mode(self) -> int:
        return int(self.daemon.socket_mode, 8)

    def call_timeout(self, alias: str, tool: str | None = None) -> float:
        """``tool`` is the server's own name for it: a per-tool limit wins."""
        return self.call_limit(alias, tool)[0]

    def call_limit(self, alias: str, tool: str | None = None) -> tuple[float, str]:
        """``call_timeout``, and the key that set it (for a call that timed out to say
        what to raise)."""
        server = self.servers[alias]
        if tool is not None and tool in server.tool_timeouts:
            return server.tool_timeouts[tool], f"servers.{alias}.tool_timeouts"
        if server.call_timeout is not None:
            return server.call_timeout, f"servers.{alias}.call_timeout"
        return self.daemon.call_timeout, "daemon.call_timeout"

    def redacting(self) -> list[str]:
        """The servers whose text is searched for credential formats too."""
        on = self.daemon.redact_patterns
        return [
            alias
            for alias, server in self.servers.items()
            if (on if server.redact_patterns is None else server.redact_patterns)
        ]

    def list_limits(self, alias: str) -> ListLimits:
        """What the server's lists may hold: its own keys, else the daemon's."""
        s, d = self.servers.get(alias, ServerConfig()), self.daemon
        return ListLimits(
            items=_limit(alias, "max_list_items", s.max_list_items, d.max_list_items),
            list_bytes=_limit(alias, "max_list_bytes", s.max_list_bytes, d.max_list_bytes),
            item_bytes=_limit(alias, "max_item_bytes", s.max_item_bytes, d.max_item_bytes),
            description_bytes=_limit(
                alias, "max_description_bytes", s.max_description_bytes, d.max_description_bytes
            ),
            instructions_bytes=_limit(
                alias,
                "max_instructions_bytes",
                s.max_instructions_bytes,
                d.max_instructions_bytes,
            ),
        )

    def read_budget(self, alias: str) -> int:
        """What mcpd reads a second of what the server sends that answers nothing: its
        own key, else the daemon's."""
        own = self.servers.get(alias, ServerConfig()).read_budget
        return self.daemon.read_budget if own is None else own

    def pin_policy(self, alias: str) -> PinPolicy:
        """What happens to the server's changed, new and flagged items: its own
        settings, else the daemon's."""
        s, d = self.servers.get(alias, ServerConfig()), self.daemon
        return PinPolicy(
            on_changed_item=d.on_changed_item if s.on_changed_item is None else s.on_changed_item,
            on_new_item=d.on_new_item if s.on_new_item is None else s.on_new_item,
            hold_new_servers=(
                d.hold_new_servers if s.hold_new_servers is None else s.hold_new_servers
            ),
            on_finding=d.on_finding if s.on_finding is None else s.on_finding,
        )


def default_socket_path(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if os.geteuid() == 0:
        return "/run/mcpd/mcpd.sock"
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "mcpd", "mcpd.sock")
    return f"/tmp/mcpd-{os.getuid()}/mcpd.sock"


def default_config_path(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("MCPD_CONFIG"):
        return env["MCPD_CONFIG"]
    if os.geteuid() == 0:
        return "/etc/mcpd/config.toml"
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME", "/"), ".config")
    return os.path.join(base, "mcpd", "config.toml")
