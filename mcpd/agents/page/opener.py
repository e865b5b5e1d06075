"""Who opened a page's session, and so what the page may decide.

A session is opened by two processes: the one that asked for its code (``mcpd
dashboard``, on the socket) and the one that traded the code (the browser, or
whatever holds the code: a code is a bearer secret). Each is read from /proc as it
does so (its process, those it descends from, its session), and held to the rule
that keeps an agent from deciding its own calls (``policy.deciders.kin``), as the terminal
commands are: against the agents connected at that moment, and again at each use (``judged``):
as the page is drawn, a stream opened, a code or session pushed out, and as the page
acts, with the process that sends the decision (a cookie is a bearer secret too),
against the call's agent first (approvals), then every agent connected then. A
process that asks for a code, or trades one, before it connects as an agent is no
agent yet, and nothing tells it from a person; once it is, what it opened is judged
its agent's, and stays so after it has gone. A session opened from an agent's side
may look, but decides no call, its agent's or another's, and approves no held
definition; the page says so in its own words, and where a person decides instead.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from protocol.jsonrpc import messages as rpc

from ...policy.deciders.kin import AgentKin, Decider, Tie
from ...policy.deciders.kin_refusals import not_yours
from ...policy.deciders.kinship import Kinship


def _elsewhere(commands: str) -> str:
    """Where a person decides what a page opened from an agent's side may not."""
    return (
        f"from another terminal, one no agent started or runs in: {commands} there, or "
        "`mcpd dashboard` there for a page of your own"
    )


class Opener(msgspec.Struct, frozen=True):
    """Who decides on a page, as /proc told (``deciders``): who asked for its code and
    who traded it, and as the page acts, who sends the decision; and how one of the
    first two was found kin to an agent connected as the session opened or as it was
    used since (``found``: the tie and the pid it is through), if one was."""

    deciders: tuple[Decider, ...] = ()
    found: tuple[Tie, int | None] | None = None

    def joined(self, other: Opener) -> Opener:
        return Opener(self.deciders + other.deciders, self.found or other.found)

    def on_page(self) -> tuple[Decider, ...]:
        """Its deciders as the page's: where an agent's process is unknown, a browser
        is taken for a person (``AgentKin.tie``)."""
        return tuple(msgspec.structs.replace(d, page=True) for d in self.deciders)


def judged(opener: Opener, agents: Kinship) -> Opener:
    """``opener`` as the agents connected now (``agents``) find it: one found kin to an
    agent once stays so, whoever is connected now."""
    if opener.found is not None:
        return opener
    found = next((t for d in opener.deciders if (t := agents.tie(d)) is not None), None)
    return opener if found is None else Opener(opener.deciders, found)


def _who(tie: Tie, pid: int | None) -> str:
    if tie == "agent":
        return f"is an agent connected to mcpd (pid {pid}), or that one started"
    if tie == "host":
        return (
            f"the host (pid {pid}) of an agent connected to mcpd (or its relay's launcher) started"
        )
    if tie == "crowd":
        return (
            "mcpd cannot tell from one of an agent gone it could not keep (it keeps as many "
            "as it can while their processes run)"
        )
    if tie == "deep":
        return (
            "descends from more processes than mcpd reads, so mcpd cannot tell it from "
            "one an agent started"
        )
    if pid is not None:
        return (
            "descends from a process in the session of an agent connected to mcpd, now "
            f"or before (the session pid {pid} began: the agent, or what started it)"
        )
    return (
        "is in the session of an agent connected to mcpd (the terminal it runs in, or a "
        "tool its host started)"
    )


def look_only(opener: Opener) -> str | None:
    """What the page says of a session opened from an agent's side; None: nothing."""
    if opener.found is None:
        return None
    return (
        f"This page was opened from a process that {_who(*opener.found)}: it shows what "
        "waits, but decides no call and approves no held definition. "
        f"A person decides them {_elsewhere('`mcpd approvals` and `mcpd approve`')}."
    )


def not_this_pages(kin: AgentKin, tie: Tie, pid: int | None) -> str:
    """Why the page may not decide a call of an agent its opener is kin to."""
    if tie == "agent":
        who = f"the agent that made this call (pid {pid}), or from a process it started"
    elif tie == "host":
        who = (
            f"the host that started the agent that made this call (pid {pid}; its relay, "
            "such as mcpd bridge, or a launcher), or from a process it started (such as "
            "its shell tool)"
        )
    elif tie == "session" and pid is not None:
        who = (
            "a process that descends from one in the session of the agent that made this "
            f"call (the session pid {pid} began: the agent, or what started it)"
        )
    elif tie == "session":
        who = (
            "a process in the same session as the agent that made this call (a tool its "
            "host started, the terminal it runs in)"
        )
    else:
        return not_yours(kin, tie, pid)
    return (
        f"this page was opened, or is used, from {who}, so it cannot decide it; decide it "
        + _elsewhere("`mcpd approvals`")
    )


def check_release(opener: Opener, agents: Iterable[AgentKin]) -> None:
    """Raises ``rpc.RPCError`` when who opened the session was kin to an agent as they
    opened it, or when they or who sends the request now (``opener``'s deciders) are
    kin to one connected now."""
    _refuse_an_agents_side(
        opener,
        agents,
        "an agent must not approve what its servers' definitions say: the page shows held "
        f"changes but approves none; approve them {_elsewhere('`mcpd approve`')}",
    )


def check_decision(opener: Opener, agents: Iterable[AgentKin]) -> None:
    """``check_release`` for deciding a call, whoever's it is."""
    _refuse_an_agents_side(
        opener,
        agents,
        "an agent must not decide calls that wait for a person, its own or another's: the "
        f"page shows them but decides none; decide them {_elsewhere('`mcpd approvals`')}",
    )


def _refuse_an_agents_side(opener: Opener, agents: Iterable[AgentKin], because: str) -> None:
    found = judged(opener, Kinship(agents)).found
    if found is not None:
        raise rpc.RPCError(
            -32000,
            f"this page was opened, or is used, from a process that {_who(*found)}, and {because}",
        )
