"""A ``Router`` over a catalog of a few tools and no server behind it, for the tests of
the call path on the agent side: each call it starts at a server is kept for the test
to answer (``Servers.started``), what it tells a server of a call given up is counted
(``Servers.cancelled``), and each audit record it makes is kept (``Audit.records``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from msgspec import Raw

from mcpd.agents.agent import Agent, AgentCall
from mcpd.agents.agent_server import new_session
from mcpd.agents.askback.askers import AgentRequests, DirectAsker
from mcpd.agents.askback.driver import AskBackDriver
from mcpd.agents.calls.callpolicy import CallPolicy
from mcpd.agents.calls.callrecords import CallRecords
from mcpd.agents.calls.toolcall import Router
from mcpd.agents.entry.identity import AgentIdentity
from mcpd.agents.profiles import Profile
from mcpd.agents.tasks.table import Tasks
from mcpd.audit.record import CallRecord
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import DaemonConfig, NamingConfig, ProfileConfig
from mcpd.config.tables.policy import PolicyRule
from mcpd.policy.deciders.kin import AgentKin
from mcpd.policy.decision.gate import CallGate
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.policy.waiting.approvals import Approvals
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.all_servers import AllServers
from mcpd.servers.calling.calls import Call, Outcome
from mcpd.servers.shared import AgentKey
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp

# Each server's tools, by its own names for them.
TOOLS: dict[str, list[str]] = {"notes": ["search", "add"], "git": ["status"]}


def tool(name: str, description: str = "does it") -> mcp.Tool:
    sent = {"name": name, "description": description, "inputSchema": {"type": "object"}}
    return msgspec.json.decode(msgspec.json.encode(sent), type=mcp.Tool)


class Audit:
    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def record(self, record: CallRecord, arguments: Raw | None) -> None:
        self.records.append(record)

    def unrouted(self, record: CallRecord, arguments: Raw | None) -> None:
        """A request refused before any server or rule: the log may count it with
        others past its agent's budget; here it is kept as any other."""
        self.records.append(record)

    def outcomes(self) -> list[tuple[str | None, str]]:
        return [(r.name, r.outcome) for r in self.records]


class Servers:
    """What the router uses of ``AllServers`` (``start``, ``down_for``, ``written``), and
    the scheduler each call it starts tells when its agent gives it up."""

    def __init__(self) -> None:
        self.started: list[Call] = []
        self.cancelled: list[Call] = []

    def start(self, call: Call) -> None:
        call.scheduler = self  # type: ignore[assignment]
        self.started.append(call)

    def down_for(
        self,
        name: str,
        only: Callable[[str], bool] | None = None,
        template: str | None = None,
        *,
        own_user: bool = False,
    ) -> str | None:
        return None  # every server here is up

    def answer(self, outcome: Outcome, index: int = -1) -> Call:
        """The server's answer to a call it was given (the last by default)."""
        call = self.started[index]
        call.caller.finish(outcome)
        return call

    def cancel(self, call: Call) -> None:
        self.cancelled.append(call)

    def written(self, alias: str, value: object, what: str) -> Raw:
        """``value`` as an agent gets it: no secret of mcpd's is held here to mask."""
        return Raw(msgspec.json.encode(value))

    def extend(self, call: Call, seconds: float) -> None:
        pass

    def received(self, call: Call, raw: Raw | None, error: BaseException | None) -> None:
        raise AssertionError("no transport answers here")


class World:
    """The tools of ``TOOLS`` in a catalog, a profile of them, and a router whose
    policy has ``rules``; ``held`` names tools of the notes server held for review."""

    def __init__(
        self,
        *rules: dict[str, Any],
        held: tuple[str, ...] = (),
        discovery: str = "all",
        splice: bool = True,
    ) -> None:
        self.catalog = Catalog(NamingConfig())
        config = parse_config({"servers": {alias: {"command": "x"} for alias in TOOLS}}, env={})
        base = AllServers(Supervisor(config, self.catalog), self.catalog)
        for alias, names in TOOLS.items():
            self.catalog.update(alias, [tool(n) for n in names])
        if held:
            self.catalog.gate.settle("notes")
            changed = [tool(n, "now does more" if n in held else "does it") for n in TOOLS["notes"]]
            self.catalog.update("notes", changed)
        view = base.view_of("default")
        view.configure(ProfileConfig(discovery=discovery), NamingConfig(), 128)  # type: ignore[arg-type]
        self.profile = Profile(view)
        self.audit = Audit()
        self.servers = Servers()
        gate = CallGate(Approvals(), KnownSecrets(), clock=lambda: 0.0)
        gate.configure([msgspec.convert(r, PolicyRule) for r in rules])
        driver = AskBackDriver()
        self.router = Router(
            self.servers,  # type: ignore[arg-type]
            driver,
            Tasks(self.servers, lambda: 100_000, DaemonConfig),  # type: ignore[arg-type]
            CallPolicy(gate, driver.parks),
            CallRecords(self.audit, wall=lambda: 100.0),  # type: ignore[arg-type]
            budget=100_000,
            splice=splice,
            settings=DaemonConfig,
        )

    def local(self, alias: str, original: str) -> str:
        """The name agents call the server's tool by."""
        [entry] = [
            e
            for e in self.profile.view.registry.entries()
            if (e.alias, e.original) == (alias, original)
        ]
        return entry.local


class StandInAgent(Agent):
    """An agent as the router knows one: each outcome its calls come to is kept
    (``finished``), and so is each call that waits for a person (``in_tasks``) and
    each message sent to it. ``legacy``: it began with initialize, else each of its
    requests carries its own ``_meta`` envelope."""

    def __init__(self, profile: Profile, legacy: bool = True) -> None:
        self.session = new_session()
        if legacy:
            self.session.legacy_version = "2025-11-25"
        self.contexts = {}
        self.profile = profile
        self.owner = self.listen_owner = AgentKey()
        self.asks = AgentRequests()
        self.refusing_asker = DirectAsker(self.owner, None, self.asks, self.offer)
        self.progress = lambda params: None
        self.identity = AgentIdentity(None)
        self.fixed_profile = None
        self.sent: list[bytes] = []
        self.finished: list[tuple[AgentCall, Outcome]] = []
        self.in_tasks: list[tuple[AgentCall, Callable[[], Awaitable[bytes]]]] = []

    def finish(self, call: AgentCall, outcome: Outcome) -> None:
        self.finished.append((call, outcome))

    def in_task(self, call: AgentCall, answer: Callable[[], Awaitable[bytes]]) -> None:
        self.in_tasks.append((call, answer))

    def offer(self, data: bytes, rid: rpc.Id | None = None) -> bool:
        self.sent.append(data)
        return True

    def news_sender(self) -> Callable[[bytes], None]:
        return self.send_nowait

    async def kin(self) -> AgentKin:
        return AgentKin()  # no process of its own

    async def send(self, data: bytes, rid: rpc.Id | None = None) -> None:
        self.offer(data, rid)

    async def drain(self) -> None:
        pass

    def stopping(self) -> None:
        pass


def agent_call(out: Call, **parts: Any) -> AgentCall:
    """``out`` as the agent side keeps it, for a step of that side that reads neither
    its agent nor where its outcome goes: ``parts`` are what it says of itself."""
    return AgentCall(out, None, to=None, **parts)  # type: ignore[arg-type]
