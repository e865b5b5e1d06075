"""What the page reads of the daemon: ``mcpd status`` as the daemon builds it, a
profile's view without what only the daemon's own user and root read; each server's
history by its alias; what ``sources`` give, asked for the reader's scope and the
page's filter, or None where this mcpd records nothing; and which profiles besides the
default one list each server."""

from __future__ import annotations

from typing import cast

from msgspec import UNSET

from mcpd.agents.daemon_seam import DaemonForAgents
from mcpd.agents.page.model import profile_use, read_page
from mcpd.agents.page.sources import (
    CallFilter,
    CallRow,
    HeldChange,
    PendingApproval,
    Sources,
    Waiting,
)
from mcpd.registry.profiles.views import ProfileView
from mcpd.server_row import BreakerCounts, SandboxStatus
from mcpd.servers.status.history import ServerHistory
from mcpd.servers.status.row import others_row
from mcpd.status_document import StatusDocument
from tests.support.parts.status_rows import daemon, document, profile, server_row

NOW = 1_800_000_000.0

# As the daemon's whole status has it: more than the page draws.
OWNER_STATUS = document(
    daemon(
        version="1.2.3",
        pid=4242,
        socket="/run/user/1000/mcpd/mcpd.sock",
        config="/home/u/.config/mcpd/config.toml",
        uptime_s=93.5,
        connections=2,
        tools=7,
        prompts=1,
        summary="2 servers: 1 ready, 1 failed",
        state_file="/home/u/.local/state/mcpd/state.json",
        warnings=["7 tools is close to the limit"],
        http="http://127.0.0.1:8765/mcp",
    ),
    [
        server_row(
            "files",
            state="ready",
            era="2025-06-18",
            protocol_version="2025-06-18",
            tools=5,
            since="2027-01-15T08:00:00+00:00",
            restarts=1,
            breaker=BreakerCounts(state="closed", consecutive_failures=0, failures=3, opened=1),
            calls=10,
            errors=1,
            p50_ms=2.5,
            p95_ms=9.0,
            p99_ms=12.0,
            stderr=["started"],
            pid=777,
            sandbox=SandboxStatus(
                level="default",
                unprotected=None,
                home="/home/u/.local/state/mcpd/homes/files",
                read=[],
                write=[],
                network=True,
                host_loopback=[],
                limits={},
            ),
        ),
        server_row("mail", transport="http", state="failed", last_error="refused", pid=None),
    ],
    [
        profile("default", tools=7, servers=["files", "mail"], agents=1),
        profile("work", mode="search", tools=2, servers=["files"]),
    ],
)

# As a profile's reader gets it: no pid, no paths, and its profile named.
PROFILE_STATUS = document(
    daemon(version="1.2.3", profile="work", summary="1 server"),
    [others_row(server_row("files"))],
    [profile("work")],
)


class Daemon:
    """What ``read_page`` asks of the daemon, and who it asked for."""

    def __init__(self, status: StatusDocument, history: list[ServerHistory]) -> None:
        self._status = status
        self._history = history
        self.asked: list[ProfileView | None] = []

    def status(self, scope: ProfileView | None = None, *, own_user: bool = False) -> StatusDocument:
        self.asked.append(scope)
        return self._status

    def history(self, scope: ProfileView | None = None) -> list[ServerHistory]:
        self.asked.append(scope)
        return self._history


def control(status: StatusDocument, history: list[ServerHistory] | None = None) -> DaemonForAgents:
    return cast(DaemonForAgents, Daemon(status, history or []))


def test_the_whole_status_is_read_into_rows() -> None:
    history = [ServerHistory("files", [], []), ServerHistory("mail", [], [])]
    data = read_page(control(OWNER_STATUS, history), None, NOW, csrf="c")
    d = data.status.daemon
    assert (d.version, d.pid, d.connections, d.tools, d.profile) == ("1.2.3", 4242, 2, 7, UNSET)
    assert d.warnings == ["7 tools is close to the limit"]
    files, mail = data.status.servers
    assert (files.alias, files.state, files.pid, files.restarts) == ("files", "ready", 777, 1)
    assert files.breaker == BreakerCounts(
        state="closed", consecutive_failures=0, failures=3, opened=1
    )
    assert (files.p50_ms, files.p95_ms, files.stderr) == (2.5, 9.0, ["started"])
    assert isinstance(files.sandbox, SandboxStatus) and files.sandbox.level == "default"
    assert (mail.last_error, mail.tools, mail.pid, mail.sandbox) == ("refused", 0, None, UNSET)
    assert [p.name for p in data.status.profiles] == ["default", "work"]
    assert set(data.history) == {"files", "mail"}
    assert (data.now, data.csrf, data.logins_from_page) == (NOW, "c", False)


def test_a_profiles_view_has_no_pid_and_names_its_profile() -> None:
    data = read_page(control(PROFILE_STATUS), None, NOW)
    d = data.status.daemon
    assert (d.profile, d.pid, d.uptime_s, d.connections) == ("work", UNSET, 0.0, 0)
    # Of its servers, what the daemon's own user and root alone read is left out.
    (row,) = data.status.servers
    assert (row.alias, row.stderr, row.pid) == ("files", UNSET, UNSET)
    assert data.status.profiles == [profile("work")]
    assert data.history == {}


def test_without_sources_the_page_knows_nothing_of_approvals_held_or_calls() -> None:
    data = read_page(control(PROFILE_STATUS), None, NOW)
    assert (data.approvals, data.held, data.calls) == (None, None, None)


def test_each_source_is_asked_for_the_readers_scope_and_the_filter() -> None:
    asked: list[object] = []
    scope = cast(ProfileView, object())  # the reader's view, passed through untouched
    approval = PendingApproval("a1", "mail", "send", "pid 8", NOW, "{}")
    change = HeldChange("files", "tool", "read", "changed", "-a\n+b")
    call = CallRow(NOW, "files", "read", "pid 8", "ok", 1.0)

    def approvals(s: ProfileView | None) -> Waiting[PendingApproval]:
        asked.append(("approvals", s))
        return Waiting([approval])

    def held(s: ProfileView | None) -> Waiting[HeldChange]:
        asked.append(("held", s))
        return Waiting([change])

    def calls(s: ProfileView | None, f: CallFilter) -> list[CallRow]:
        asked.append(("calls", s, f))
        return [call]

    chosen = CallFilter("files", "ok")
    daemon = Daemon(PROFILE_STATUS, [])
    data = read_page(
        cast(DaemonForAgents, daemon),
        scope,
        NOW,
        sources=Sources(approvals=approvals, held=held, calls=calls),
        call_filter=chosen,
    )
    assert (data.approvals, data.held) == (Waiting([approval]), Waiting([change]))
    assert data.calls == [call]
    assert data.call_filter == chosen
    assert asked == [("approvals", scope), ("held", scope), ("calls", scope, chosen)]
    assert daemon.asked == [scope, scope]  # status and history for the same reader


def test_a_source_may_say_the_reader_sees_none_of_its_kind() -> None:
    data = read_page(
        control(PROFILE_STATUS), None, NOW, sources=Sources(approvals=lambda s: None, held=None)
    )
    assert data.approvals is None and data.held is None


def test_profile_use_names_the_profiles_besides_the_default_one() -> None:
    profiles = [
        profile("default", servers=["files", "mail"]),
        profile("work", servers=["files"]),
        profile("home", servers=["files", "mail"]),
    ]
    used = profile_use(profiles)
    assert used("files") == ["work", "home"]
    assert used("mail") == ["home"]
    assert used("nowhere") == []
    assert profile_use([])("files") == []
