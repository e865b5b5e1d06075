"""The status document: what ``mcpd status --json``, the agent method ``mcpd/status``
and the status page's ``/status`` say of the daemon, typed as it is built
(``status_report``), read in-process (the page) and decoded by ``mcpd status``: it
holds only msgspec values, the servers' rows (``server_row``) and who an agent is
(``policy.agent``), so the command line reads it without loading the daemon.

A field unset is a key the JSON leaves out: the daemon's paths, pid and totals, which
only the whole document has, and the profile an agent of one profile reads it as. The
fields are in the order the JSON shows them."""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from .policy.agent import AgentInfo
from .server_row import ServerRow


class Unsaved(msgspec.Struct, frozen=True):
    """A state file that could not be written: since when (ISO time) and why."""

    what: str
    path: str
    since: str
    problem: str
    meaning: str  # what is kept in memory only until a write works


class RefusedReload(msgspec.Struct, frozen=True):
    """``reload_refused`` in ``mcpd status --json``: times in ISO 8601, UTC."""

    at: str  # when the reload was refused
    reason: str  # what the config error said
    config_read: str  # when the configuration that runs was read


class DaemonStatus(msgspec.Struct, kw_only=True):
    version: str
    pid: int | UnsetType = UNSET
    profile: str | UnsetType = UNSET  # the reader's, when it reads one profile's view
    socket: str | UnsetType = UNSET
    config: str | UnsetType | None = UNSET
    uptime_s: float
    connections: int
    tools: int
    prompts: int
    resources: int
    max_tools: int
    summary: str
    state_file: str | UnsetType = UNSET
    # The state files mcpd cannot write now, and what that means.
    unsaved: list[Unsaved] | UnsetType = UNSET
    # A reload refused leaves another configuration running than the file's.
    reload_refused: RefusedReload | UnsetType | None = UNSET
    warnings: list[str]
    # Over every server: items held until approved, definition changes, findings.
    held: int | UnsetType = UNSET
    definition_changes: int | UnsetType = UNSET
    findings: int | UnsetType = UNSET
    http: str | UnsetType | None = UNSET  # the HTTP endpoint's URL


class NamingShown(msgspec.Struct, kw_only=True):
    template: str
    max_length: int


class ProfileStatus(msgspec.Struct, kw_only=True):
    """A profile: what it exposes and to how many agents."""

    name: str
    discovery: str
    mode: str
    tools: int
    listed: int
    servers: list[str]
    pinned: list[str]
    naming: NamingShown
    max_tools: int
    socket: str | None
    agents: int
    warning: str | UnsetType = UNSET  # more tools than its limit
    socket_error: str | UnsetType = UNSET  # why its own socket is not there


class AuditStatus(msgspec.Struct, kw_only=True):
    file: str | None
    journal: bool
    written: int
    dropped: int
    write_errors: int


class PendingView(msgspec.Struct, frozen=True, kw_only=True):
    """A pending approval as ``mcpd approvals`` and ``mcpd status`` show it."""

    id: str
    agent: AgentInfo
    tool: str
    server: str
    original: str
    arguments: str  # at a glance
    rule: int | None
    reason: str | None
    asked: str  # "agent" (its user was asked too) or "operator"
    since: str
    deadline: str
    shortened: bool = False  # a value is shortened in ``arguments``: the whole is apart
    keys_left_out: int = 0  # keys ``arguments`` had no room for: not to approve from


class StatusDocument(msgspec.Struct, kw_only=True):
    daemon: DaemonStatus
    servers: list[ServerRow]
    profiles: list[ProfileStatus]
    # The calls waiting for a person's approval, and the audit log's state.
    approvals: list[PendingView] | UnsetType = UNSET
    audit: AuditStatus | UnsetType = UNSET
