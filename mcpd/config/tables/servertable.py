"""``[servers.NAME]``: one server's table, with its ``auth``, ``tools``, ``prompts``
and ``limits`` tables. The sandbox level and the limits are also ``[daemon]``'s, as
what a server gets that does not set its own.

These structs only describe; the checks are in ``checks.servers``.
"""

from __future__ import annotations

from typing import Final, Literal
from urllib.parse import urlsplit

import msgspec

from transports.stdio.sandbox.plan import Level


class LimitsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """``limits``: what one server's processes may use (0: no limit). Memory is bytes or
    a size such as ``"2G"``; ``cpu`` is seconds of CPU time per process."""

    memory: int | str | None = None
    processes: int | None = None
    open_files: int | None = None
    cpu: int | None = None


# What a limit is when neither [daemon.limits] nor a server's own [servers.X.limits] sets
# it: far above what ordinary servers use, low enough that a runaway one is
# stopped before the machine is.
DEFAULT_LIMITS: Final = LimitsConfig(memory="4G", processes=1024)


class ToolsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Which of a server's tools agents see, and under what name. Keys and patterns
    are the server's own tool names."""

    allow: list[str] = msgspec.field(default_factory=list)  # globs; empty: every tool
    deny: list[str] = msgspec.field(default_factory=list)  # globs, applied after allow
    rename: dict[str, str] = msgspec.field(default_factory=dict)
    description: dict[str, str] = msgspec.field(default_factory=dict)


# How mcpd as an OAuth client proves itself at the token endpoint.
ClientAuthMethod = Literal["client_secret_basic", "client_secret_post", "none", "private_key_jwt"]


class AuthConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """``[servers.X.auth]``: how mcpd gets an access token for an HTTP server (OAuth 2.1).

    ``type = "oauth"`` is a person's login (``mcpd auth login ALIAS``), what an HTTP server
    without this table gets when it answers 401; ``"client_credentials"`` is a machine
    identity that needs no login. Secrets come through ``${file:...}``.
    """

    type: Literal["oauth", "client_credentials"] = "oauth"
    client_id: str | None = None
    client_secret: str | None = None
    # The authorization server the pre-registered client belongs to, if known.
    issuer: str | None = None
    # An https URL serving mcpd's Client ID Metadata Document (the URL is the client id).
    client_metadata_url: str | None = None
    scopes: list[str] | None = None
    # The loopback port `mcpd auth login` listens on (0: any free one).
    redirect_port: int = 0
    # PEM (PKCS#8, SEC1, PKCS#1) or JWK text, for private_key_jwt.
    private_key: str | None = None
    token_endpoint_auth_method: ClientAuthMethod | None = None

    def __repr__(self) -> str:
        # The config is printed in errors and debugging sessions; its secrets must not be.
        shown = {
            k: ("***" if k in ("client_secret", "private_key") else v)
            for k, v in msgspec.structs.asdict(self).items()
            if v is not None
        }
        return "AuthConfig(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


class ServerConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    command: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    # What it inherits of mcpd's environment besides the default set: names and
    # "PREFIX_*" patterns, or true for everything (``transports.stdio.process.childenv``).
    inherit_env: bool | list[str] = False
    # None: [daemon] sandbox. Paths it may read and write, and whether it has a network.
    sandbox: Level | None = None
    read: list[str] = msgspec.field(default_factory=list)
    write: list[str] = msgspec.field(default_factory=list)
    network: bool = True
    # With network = false: the host's loopback ports it may still reach (5432 or
    # "127.0.0.1:5432"), each relayed by mcpd to that port alone.
    host_loopback: list[int | str] = msgspec.field(default_factory=list)
    limits: LimitsConfig = msgspec.field(default_factory=LimitsConfig)
    url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    connect_timeout: float = 10.0
    ca_file: str | None = None
    tls_verify: bool = True
    call_timeout: float | None = None
    trusted: bool = False
    era: Literal["auto", "modern", "legacy"] = "auto"
    max_concurrency: int | None = None
    enabled: bool = True
    tool_timeouts: dict[str, float] = msgspec.field(default_factory=dict)
    tools: ToolsConfig = msgspec.field(default_factory=ToolsConfig)
    prompts: ToolsConfig = msgspec.field(default_factory=ToolsConfig)
    # Which requests a legacy server may send back during a call, relayed to the agent
    # that made the call: the client capabilities mcpd declares to it at initialize.
    relay: list[Literal["elicitation", "sampling", "roots"]] = msgspec.field(
        default_factory=lambda: ["elicitation", "sampling", "roots"]
    )
    # "lazy": a stdio server runs only while it is used, stopped after idle_stop seconds.
    start: Literal["eager", "lazy"] = "eager"
    idle_stop: float = 300.0
    # OAuth for HTTP servers; None: OAuth login when the server asks for it.
    auth: AuthConfig | None = None
    # The daemon's list limits for this server alone (None: the daemon's).
    max_list_items: int | None = None
    max_list_bytes: int | None = None
    max_item_bytes: int | None = None
    max_description_bytes: int | None = None
    max_instructions_bytes: int | None = None
    # [daemon] read_budget for this server alone (None: the daemon's).
    read_budget: int | None = None
    # The daemon's pin settings for this server alone (None: the daemon's).
    on_changed_item: Literal["hold", "warn", "accept"] | None = None
    on_new_item: Literal["hold", "warn", "accept"] | None = None
    hold_new_servers: bool | None = None
    on_finding: Literal["hold", "warn"] | None = None
    # [daemon] redact_patterns for this server alone (None: the daemon's).
    redact_patterns: bool | None = None
    # Set by mcpd, not a config key: why the server cannot start here (a variable not
    # set, a secret file it cannot read), the same words a config error would use. The
    # values that could not be expanded are left as written.
    unresolved: str | None = None

    # stdio for a command; for a URL, "http" (Streamable HTTP, falling back to the old
    # HTTP+SSE transport when a server turns out to speak only that) or "sse" (the old
    # transport first). Left out, it follows from the rest: "sse" for URLs ending in /sse.
    transport: Literal["stdio", "http", "sse"] | None = None

    def __post_init__(self) -> None:
        if self.transport is None:
            if self.command is not None:
                kind = "stdio"
            elif _path_of(self.url).rstrip("/").lower().endswith("/sse"):
                kind = "sse"
            else:
                kind = "http"
            msgspec.structs.force_setattr(self, "transport", kind)

    @property
    def kind(self) -> Literal["stdio", "http", "sse"]:
        """``transport`` as it was settled (never None once the config is parsed)."""
        return self.transport or ("stdio" if self.command is not None else "http")

    def concurrency(self) -> int:
        if self.max_concurrency is not None:
            return self.max_concurrency
        return 4 if self.kind == "stdio" else 16


def _path_of(url: str | None) -> str:
    try:
        return urlsplit(url).path if url else ""
    except ValueError:  # a URL it cannot read: checks.servers names the key
        return ""
