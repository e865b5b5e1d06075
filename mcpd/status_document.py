"""The status document: what ``mcpd status --json``, the agent method ``mcpd/status``
and the status page's ``/status`` say of the daemon, typed as it is built
(``status_report``) and read in-process (the page).

A field unset is a key the JSON leaves out: the daemon's paths, pid and totals, which
only the whole document has, and the profile an agent of one profile reads it as. The
fields are in the order the JSON shows them."""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from .local.state.unsaved import Unsaved
from .policy.waiting.approvals import PendingView
from .reloading.outcome import RefusedReload
from .servers.shared import ServerRow


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


class StatusDocument(msgspec.Struct, kw_only=True):
    daemon: DaemonStatus
    servers: list[ServerRow]
    profiles: list[ProfileStatus]
    # The calls waiting for a person's approval, and the audit log's state.
    approvals: list[PendingView] | UnsetType = UNSET
    audit: AuditStatus | UnsetType = UNSET
