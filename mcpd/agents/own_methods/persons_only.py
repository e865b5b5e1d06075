"""What only a person may do on the socket, refused to an agent's side: approving what
servers' definitions say (``mcpd approve``, ``mcpd pins import``) and deciding calls
that wait for a person (``mcpd approvals``).

Whoever asks is held to ``policy.deciders.kin``'s rule against every agent connected now, or
gone while a process of it lives on (one whose process mcpd cannot find is passed
over): a process that is such an agent, descends from one (for ``mcpd bridge``, from
its host) or shares a session with one is refused, whoever's definition or call it
is. An agent's shell tool may otherwise decide another agent's calls, or a call of a
client it started apart in a session of its own, and a rule that leaves a call to the
operator would rest on the agents after all.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.jsonrpc import messages as rpc

from ...policy.deciders.kin import AgentKin, Decider, alive
from ...policy.deciders.kin_refusals import too_deep
from ...policy.deciders.kinship import Found, Kinship
from ...policy.deciders.named import program_of, program_run_as


def refuse_an_agents_side(
    decider: Decider, agents: Iterable[AgentKin], what: str, because: str
) -> None:
    """Raises ``rpc.RPCError`` when ``decider`` is, descends from or sits beside one of
    ``agents`` (or a host whose bridge is one): ``what`` it asked is refused, saying
    ``because`` and where a person runs it instead."""
    found = Kinship(agents).found(decider)
    if found is None:
        return
    if found.tie == "crowd":
        raise rpc.RPCError(
            -32000,
            f"{what} is refused: {found.kin.crowd}; until then, run it from a terminal no "
            "agent started, or as another user who may",
        )
    if found.tie == "deep":
        raise rpc.RPCError(
            -32000,
            f"{what} is refused: {too_deep()}, and {because}; run it from a terminal of "
            "your own, one no agent started",
        )
    raise rpc.RPCError(-32000, _refusal(what, because, found, decider.uid))


def _refusal(what: str, because: str, found: Found, uid: int | None) -> str:
    connected = "that had connected" if found.kin.gone else "connected"
    agent = _agent(found.kin, uid)
    if found.tie == "agent":
        who = f"is an agent {connected} to mcpd ({agent}), or was started by one"
    elif found.tie == "host":
        host = f"pid {found.pid}"
        name = None if found.pid is None else program_of(found.pid)
        who = (
            f"descends from {host}{f' ({name})' if name else ''}, which ran an agent "
            f"{connected} to mcpd ({agent})"
        )
    elif found.pid is not None:
        who = (
            f"descends from a process in the session of an agent {connected} to mcpd "
            f"({agent}; the session pid {found.pid} began: the agent, or what started it)"
        )
    else:
        who = (
            f"is in the session of an agent {connected} to mcpd ({agent}; the terminal it "
            "runs in, or a tool its host started)"
        )
    return (
        f"{what} is refused: this process {who}, and {because}; it must come from a "
        "terminal that never ran an agent of mcpd's: open a new terminal window (not "
        "one started from this shell) or log in anew (ssh, a console), and run it there"
    )


def _agent(kin: AgentKin, uid: int | None) -> str:
    """The agent as a person knows it: its pid (or that it ended: a gone agent is kept
    for what it left running), the program the kernel names (``_program``), and the
    command of mcpd's its command line read as, with a word on why that counts as an
    agent. ``uid``: the user asking."""
    words = [f"pid {kin.agents[0].pid}"] if kin.agents else []
    program = _program(kin, uid)
    if program is not None:
        words.append(program)
    if kin.command is not None:
        words.append(f"whose command line read `{kin.command}`")
    if not kin.agents:
        words.append("since ended")
    shown = ", ".join(words)
    if kin.command is not None and kin.command.startswith("mcpd "):
        shown += f": {_why_an_agent(kin.command)}"
    return shown


def _why_an_agent(command: str) -> str:
    """Why ``command`` (of mcpd's) counts as an agent: a listing for a program, or a
    call."""
    if command.endswith((" --json", " --format")):
        return (
            "a listing for a program (`--json`, `--format`) is an agent of mcpd's, as each "
            "`mcpd call`, `mcpd read` and `mcpd prompt` is"
        )
    return "each `mcpd call`, `mcpd read` and `mcpd prompt` is an agent of mcpd's"


def _program(kin: AgentKin, uid: int | None) -> str | None:
    """The program the agent's process runs now, where it still lives and runs as the
    user asking, and the one it ran when it connected where that differs (it exec'd
    another since); else only the one it ran when it connected, which is all that is
    certain of it."""
    seen = kin.program
    process = kin.agents[0] if kin.agents else None
    now = None if process is None else program_run_as(process.pid, uid)
    # Read before the check: a pid passed on to another process meanwhile names it not.
    if process is None or not alive(process):
        now = None
    if now is None:
        return None if seen is None else f"{seen} when it connected"
    if seen is None or seen == now:
        return now
    return f"now {now}, {seen} when it connected"
