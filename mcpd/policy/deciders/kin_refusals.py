"""Why a decider kin to an agent (``policy.deciders.kin``) may not decide its call, and where
a person can, in words for them."""

from __future__ import annotations

from .kin import HOSTS, LINEAGE, AgentKin, Tie


def crowded(kin: AgentKin) -> str:
    """Why no one that may descend from a process of the crowd's user decides while
    mcpd keeps as many agents gone as it can."""
    return (
        f"{kin.crowd}; until then, decide it from a terminal no agent started, or as "
        "another user who may decide"
    )


def too_deep() -> str:
    return (
        f"this process descends from more processes than mcpd reads ({LINEAGE}), so "
        "mcpd cannot tell it from one an agent started"
    )


def not_yours(kin: AgentKin, tie: Tie, pid: int | None) -> str:
    """Why a decider kin to the agent (``tie``, through process ``pid``) may not decide
    its call, and where a person can."""
    if tie == "agent":
        return (
            f"the agent that made this call (pid {pid}), or a process it started, cannot "
            "decide it; decide it from a terminal of your own, one the agent did not start"
        )
    if tie == "host":
        return (
            f"the host that started the agent that made this call (pid {pid}; its relay, "
            "such as mcpd bridge, or a launcher), or a process it started (such as its "
            "shell tool), cannot decide it; decide it from a terminal of your own, one the "
            "host did not start"
        )
    if tie == "crowd":
        return crowded(kin)
    if tie == "deep":
        return f"{too_deep()}; decide it from a terminal of your own, one no agent started"
    if tie == "unread":
        # A departed agent whose own process ended names none: what started it lives on.
        its = "" if pid is None else f" (pid {pid})"
        return (
            f"mcpd could not read all that started the agent that made this call{its}: it "
            f"reads {HOSTS} processes above it in its session at most, so it "
            f"cannot tell a process of uid {kin.uid} (or one that descends from such a "
            "process) from one they started: decide it as another user who may decide "
            "(root from a login of its own, or mcpd's own user), or start the agent "
            "through fewer launchers"
        )
    if tie == "session" and pid is not None:
        return (
            "this process descends from one in the session of the agent that made this "
            f"call (the session pid {pid} began: the agent, or what started it), so it "
            "came from the agent's side even where that process's parent is gone; decide "
            "it from a terminal of your own, one no agent started"
        )
    if tie == "session":
        return (
            "a process in the same session as the agent that made this call (a tool its "
            "host started, the terminal it runs in) cannot decide it; decide it from "
            "another terminal"
        )
    if kin.uid is None:
        return (
            f"mcpd could not find the process that made this call ({kin.unknown}), so it "
            "cannot tell anyone here from a process the agent started: decide it on the "
            "status page (`mcpd dashboard`)"
        )
    return (
        f"mcpd could not find the process that made this call ({kin.unknown}), so it "
        f"cannot tell a process of uid {kin.uid} here from one the agent started: decide "
        "it on the status page (`mcpd dashboard`), or as another user who may decide "
        "(root, or mcpd's own user)"
    )
