"""The approvals registry on trio's MockClock: a held call waits for a decision, the
first decision wins, the timeout refuses, a cancelled wait leaves nothing pending,
rules that changed end at once the waits they now decide, an id names one call for the
daemon's life, an approval can be remembered for the connection, and no agent can fill
the list or decide its own call. And what the agent's user is asked, in both eras."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from mcpd.config.tables.policy import PolicyRule
from mcpd.policy.agent import AgentInfo, exe_of
from mcpd.policy.deciders.kin import (
    AgentKin,
    Decider,
    Process,
    decider_of,
    kin_of,
    session_of,
    unknown_kin,
)
from mcpd.policy.decision import refusals
from mcpd.policy.decision.gate import CallGate
from mcpd.policy.decision.rules import CallFacts, Decision
from mcpd.policy.redaction.masking import KnownSecrets
from mcpd.policy.shown.showing import shown_arguments
from mcpd.policy.waiting import asking
from mcpd.policy.waiting.approvals import (
    PER_AGENT,
    PER_AGENT_BYTES,
    TIMEOUT,
    ApprovalError,
    ApprovalRequest,
    Approvals,
    Verdict,
)
from tests.support.cli.apart import APART

# Starts a child in its own session, says the child's pid, and waits for stdin to close.
SESSION_LEADER = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
sys.stdin.read()
child.kill()
child.wait()
"""
AGENT = AgentInfo(uid=1000, pid=4242, exe="claude", profile="default", connection="c1")


def request(
    agent: AgentInfo = AGENT, tool: str = "mcp__github__delete_repo", kin: AgentKin | None = None
) -> ApprovalRequest:
    """A call of ``agent``, whose kin is its process alone unless ``kin`` says more."""
    if kin is None:
        kin = AgentKin(agents=() if agent.pid is None else (Process(agent.pid),))
    return ApprovalRequest(
        agent=agent,
        kin=kin,
        tool=tool,
        server="github",
        original="delete_repo",
        arguments='{"repo":"x"}',
        rule=1,
        reason="deleting needs a person",
    )


NONE = shown_arguments(None)


async def nothing_known() -> AgentKin:
    return AgentKin()


async def started(approvals: Approvals, count: int) -> None:
    """Until ``count`` calls wait."""
    while len(approvals.list()) < count:
        await approvals.wait_change(approvals.version)


async def test_the_operator_decides_a_waiting_call(autojump_clock: trio.testing.MockClock) -> None:
    approvals = Approvals()
    verdicts: list[Verdict] = []

    async def call() -> None:
        verdicts.append(await approvals.ask(request(), 120))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await started(approvals, 1)
        [view] = approvals.list()
        assert (view.tool, view.server, view.asked, view.agent.pid) == (
            "mcp__github__delete_repo",
            "github",
            "operator",
            4242,
        )
        decided = approvals.decide(view.id, False, "uid 0 (root)", "not today")
        assert decided.id == view.id
    assert verdicts == [Verdict("denied", "uid 0 (root)", "not today")]
    assert approvals.list() == []
    with pytest.raises(ApprovalError, match="no call waits"):
        approvals.decide(view.id, True, "uid 0 (root)")


async def test_nobody_deciding_in_time_refuses(autojump_clock: trio.testing.MockClock) -> None:
    approvals = Approvals()
    start = trio.current_time()
    verdict = await approvals.ask(request(), 120)
    assert trio.current_time() - start == pytest.approx(120)
    assert (verdict.outcome, verdict.by) == ("unanswered", TIMEOUT)
    assert approvals.list() == []
    facts = CallFacts(name="mcp__github__x", server="github", original="x", profile="default")
    text = refusals.not_approved(facts, Decision(action="ask", rule=1), verdict).content[0].text
    assert "Nobody approved the call to 'mcp__github__x' within 120 s" in text


async def test_a_cancelled_wait_leaves_nothing_pending(
    autojump_clock: trio.testing.MockClock,
) -> None:
    approvals = Approvals()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(approvals.ask, request(), 120)
        await started(approvals, 1)
        before = approvals.version
        nursery.cancel_scope.cancel()  # the agent cancelled its call, or went away
    assert approvals.list() == []
    assert approvals.version > before  # a --watch sees it go


async def test_rules_that_changed_end_at_once_the_waits_they_now_decide(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Each waiting call is put to the changed rules: one they decide ends at once with
    their verdict and leaves the list; one still a person's keeps waiting."""
    approvals = Approvals()
    ruled = Verdict("denied", "policy[0]", "now forbidden")
    verdicts: dict[str, Verdict] = {}

    async def call(tool: str, overrule: Any) -> None:
        verdicts[tool] = await approvals.ask(request(tool=tool), 120, overrule=overrule)

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, "denied_now", lambda: ruled)
        nursery.start_soon(call, "still_asked", lambda: None)
        await started(approvals, 2)
        assert approvals.overrule() == 1
        assert [v.tool for v in approvals.list()] == ["still_asked"]
        approvals.decide(approvals.list()[0].id, True, "uid 0 (root)")
    assert trio.current_time() == start  # nobody waited out a timeout
    assert verdicts == {"denied_now": ruled, "still_asked": Verdict("approved", "uid 0 (root)")}
    assert approvals.list() == []


async def ids_of_calls_made_and_cancelled(
    approvals: Approvals, count: int, together: int = PER_AGENT
) -> list[str]:
    """The ids ``count`` calls get that are cancelled as soon as they wait, as an agent
    cycles them to get an id it wants (``together`` at a time)."""
    ids: list[str] = []
    while len(ids) < count:
        at_once = min(together, count - len(ids))
        async with trio.open_nursery() as nursery:
            for _ in range(at_once):
                nursery.start_soon(approvals.ask, request(), 120)
            await trio.testing.wait_all_tasks_blocked()
            ids += [view.id for view in approvals.list()]
            nursery.cancel_scope.cancel()
    return ids


async def test_an_id_names_one_call_for_the_daemons_life(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """What an operator read as a call's id names that call or none, however many
    calls an agent makes and cancels before they type it."""
    approvals = Approvals()
    [read] = await ids_of_calls_made_and_cancelled(approvals, 1)
    later = await ids_of_calls_made_and_cancelled(approvals, 2000)
    assert len({read, *later}) == 2001
    with pytest.raises(ApprovalError, match="never given to another call"):
        approvals.decide(read, True, "uid 0 (root)")
    assert all(len(id) <= len("2001-") + 4 for id in later)  # short enough to type


async def test_no_id_is_given_twice_even_were_every_draw_the_same(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """That an id is not given again does not rest on chance."""
    monkeypatch.setattr(secrets, "token_hex", lambda size: "ab" * size)
    monkeypatch.setattr(secrets, "choice", lambda letters: letters[0])
    ids = await ids_of_calls_made_and_cancelled(Approvals(), 100, together=1)
    assert len(set(ids)) == 100


async def test_ids_read_before_a_restart_name_no_call_after_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    before = await ids_of_calls_made_and_cancelled(Approvals(), 20)
    after = await ids_of_calls_made_and_cancelled(Approvals(), 20)
    assert not set(before) & set(after)


async def test_the_agents_user_and_the_operator_race(
    autojump_clock: trio.testing.MockClock,
) -> None:
    approvals = Approvals()
    answered = trio.Event()

    async def user_approves(request: ApprovalRequest) -> Verdict | None:
        await trio.sleep(10)
        answered.set()
        return asking.verdict_of(b'{"action":"accept","content":{"decision":"approve"}}')

    verdict = await approvals.ask(request(), 120, user_approves)
    assert verdict == Verdict("approved", asking.BY_AGENT)
    assert answered.is_set()

    async def user_never_answers(request: ApprovalRequest) -> Verdict | None:
        await trio.sleep_forever()
        return None

    async with trio.open_nursery() as nursery:

        async def call() -> None:
            verdict = await approvals.ask(request(), 120, user_never_answers)
            assert verdict == Verdict("approved", "uid 1000 (alice)")

        nursery.start_soon(call)
        await started(approvals, 1)
        [view] = approvals.list()
        assert view.asked == "agent"
        approvals.decide(view.id, True, "uid 1000 (alice)")

    async def agent_cannot_answer(request: ApprovalRequest) -> Verdict | None:
        return None  # the operator still can, until the timeout

    verdict = await approvals.ask(request(), 30, agent_cannot_answer)
    assert verdict.by == TIMEOUT


async def test_one_agent_cannot_fill_the_list(autojump_clock: trio.testing.MockClock) -> None:
    approvals = Approvals()
    async with trio.open_nursery() as nursery:
        for _ in range(PER_AGENT):
            nursery.start_soon(approvals.ask, request(), 120)
        await started(approvals, PER_AGENT)
        with pytest.raises(ApprovalError, match="already wait"):
            await approvals.ask(request(), 120)
        other = AgentInfo(uid=1000, pid=5151, connection="c2")
        nursery.start_soon(approvals.ask, request(other), 120)
        await started(approvals, PER_AGENT + 1)
        nursery.cancel_scope.cancel()
    assert approvals.list() == []


async def test_many_agents_of_one_flood_give_their_places_to_another(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each under its own limit, processes of one user filled every place: another
    agent's call was refused at once. The newest call of the agent holding the most now
    gives its place up, refused as unanswered."""
    from mcpd.policy.waiting import approvals as approvals_module

    monkeypatch.setattr(approvals_module, "TOTAL", 6)
    approvals = Approvals()
    verdicts: dict[int, approvals_module.Verdict] = {}

    async def ask(n: int, agent: AgentInfo) -> None:
        verdicts[n] = await approvals.ask(request(agent), 120)

    flood = [AgentInfo(uid=1000, pid=6000 + i, connection=f"f{i}") for i in range(2)]
    async with trio.open_nursery() as nursery:
        for n in range(6):
            nursery.start_soon(ask, n, flood[n % 2])
            await started(approvals, n + 1)
        victim = AgentInfo(uid=1000, pid=7000, connection="v")
        nursery.start_soon(ask, 6, victim)
        await approvals.wait_change(approvals.version)
        await trio.testing.wait_all_tasks_blocked()
        assert verdicts[4].outcome == "unanswered"  # the newest of the first holder of most
        assert "the most of them this agent's" in (verdicts[4].reason or "")
        assert 7000 in {view.agent.pid for view in approvals.list()}
        nursery.cancel_scope.cancel()


async def test_an_agents_waiting_calls_keep_only_so_many_bytes_and_the_counts_stay_right(
    autojump_clock: trio.testing.MockClock,
) -> None:
    approvals = Approvals()
    big = PER_AGENT_BYTES * 2 // 3
    async with trio.open_nursery() as nursery:
        nursery.start_soon(approvals.ask, request(), 120, None, big)
        await started(approvals, 1)
        version = approvals.version
        with pytest.raises(ApprovalError, match=r"one agent .* may keep 32\.0 MiB") as refused:
            await approvals.ask(request(), 120, None, big)
        assert "this agent's keep 21.3 MiB, and this call 21.3 MiB" in str(refused.value)
        assert len(approvals.list()) == 1 and approvals.version == version
        nursery.start_soon(approvals.ask, request(), 120, None, PER_AGENT_BYTES - big)
        other = AgentInfo(uid=1000, pid=5151, connection="c2")
        nursery.start_soon(approvals.ask, request(other), 120, None, big)
        await started(approvals, 3)
        oldest = approvals.list()[0]
        assert oldest.agent.pid == 4242
        approvals.decide(oldest.id, False, "uid 0 (root)")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(approvals.ask, request(), 120, None, big)  # what it kept is free
        await started(approvals, 3)
        assert [view.agent.pid for view in approvals.list()].count(4242) == 2
        nursery.cancel_scope.cancel()
    assert approvals.list() == []


async def test_calls_of_many_agents_keep_only_so_many_bytes_in_all(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the bytes all waiting calls may keep, the newest call of the agent whose
    keep the most gives its place up, as for their number; when no agent keeps more
    than the new call's would, the new call is refused."""
    from mcpd.policy.waiting import approvals as approvals_module

    monkeypatch.setattr(approvals_module, "TOTAL_BYTES", 10)
    approvals = Approvals()
    verdicts: dict[str, Verdict] = {}
    a, b, c, d = (AgentInfo(uid=1000, pid=8000 + i, connection=f"x{i}") for i in range(4))

    async def ask(name: str, agent: AgentInfo, kept: int) -> None:
        verdicts[name] = await approvals.ask(request(agent), 120, None, kept)

    async with trio.open_nursery() as nursery:
        for name, agent, kept in [("a6", a, 6), ("a3", a, 3), ("b4", b, 4), ("c5", c, 5)]:
            nursery.start_soon(ask, name, agent, kept)
            await approvals.wait_change(approvals.version)
            await trio.testing.wait_all_tasks_blocked()
        assert verdicts["a3"].by == verdicts["a6"].by == approvals_module.PUSHED_OUT
        assert "the most of it this agent's" in (verdicts["a3"].reason or "")
        assert sorted(view.agent.pid for view in approvals.list()) == [8001, 8002]
        with pytest.raises(ApprovalError, match=r"may keep 0\.0 MiB of arguments and state in all"):
            await approvals.ask(request(d), 120, None, 6)
        assert sorted(view.agent.pid for view in approvals.list()) == [8001, 8002]
        nursery.cancel_scope.cancel()


async def test_an_agent_cannot_decide_its_own_call(autojump_clock: trio.testing.MockClock) -> None:
    approvals = Approvals()
    me = AgentInfo(uid=os.getuid(), pid=os.getpid(), connection="c1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(approvals.ask, request(me, kin=kin_of(os.getpid())), 120)
        await started(approvals, 1)
        [view] = approvals.list()
        with pytest.raises(ApprovalError, match="cannot decide it"):
            approvals.decide(view.id, True, "me", deciders=[decider_of(os.getpid())])
        # ... nor a process it started (its shell tool running `mcpd approvals`).
        child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                 stdin=subprocess.PIPE)  # fmt: skip
        try:
            assert os.getpid() in [p.pid for p in decider_of(child.pid).lineage]
            with pytest.raises(ApprovalError, match="cannot decide it"):
                approvals.decide(view.id, True, "me", deciders=[decider_of(child.pid)])
        finally:
            child.communicate(b"")
        assert approvals.list() != []
        approvals.decide(view.id, False, "root", deciders=[decider_of(1)])
    assert approvals.list() == []


async def test_a_process_in_the_agent_s_session_cannot_decide_its_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A host that runs ``mcpd bridge`` and a shell tool side by side: the tool does not
    descend from the bridge (the agent mcpd sees), but shares its session; a person's
    terminal is a session of its own. The sessions are made here, so that the test does
    not depend on the session it runs in (which reads as 0 in a container)."""
    approvals = Approvals()
    # The decider leads a session of its own and starts the agent's "host" in it.
    leader = subprocess.Popen(
        [sys.executable, "-c", SESSION_LEADER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    # An agent of nobody here: what starts an agent is its host, the test included.
    apart = subprocess.Popen(
        [*APART, sys.executable, "-c", "import os, sys; print(os.getpid(), flush=True); "
         "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert leader.stdout is not None and apart.stdout is not None
        beside = int(leader.stdout.readline())
        apart_pid = int(apart.stdout.readline())
        assert session_of(beside) == leader.pid
        async with trio.open_nursery() as nursery:
            for pid in (beside, apart_pid):
                agent = AgentInfo(uid=os.getuid(), pid=pid, connection=str(pid))
                nursery.start_soon(approvals.ask, request(agent, kin=kin_of(pid)), 120)
                await started(approvals, 1 + (pid == apart_pid))
            by_pid = {v.agent.pid: v.id for v in approvals.list()}
            me = decider_of(leader.pid)
            assert beside not in [p.pid for p in me.lineage]
            # The session's leader started the agent: it is the agent's host.
            with pytest.raises(ApprovalError, match="the host that started the agent"):
                approvals.decide(by_pid[beside], True, "me", deciders=[me])
            approvals.decide(by_pid[apart_pid], True, "me", deciders=[me])
            nursery.cancel_scope.cancel()
    finally:
        leader.communicate(b"")
        apart.communicate(b"")


async def test_a_session_that_cannot_be_read_leaves_the_lineage_check(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Where a session began outside mcpd's PID namespace /proc says 0 for it: nobody can
    tell two such sessions apart, so only the lineage decides."""
    approvals = Approvals()
    agent = AgentInfo(uid=os.getuid(), pid=4242, connection="c1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(approvals.ask, request(agent), 120)
        await started(approvals, 1)
        [view] = approvals.list()
        with pytest.raises(ApprovalError, match="cannot decide it"):
            approvals.decide(
                view.id, True, "me", deciders=[Decider((Process(7), Process(4242)), 0)]
            )
        approvals.decide(view.id, True, "me", deciders=[Decider((Process(7), Process(8)), 0)])
    assert approvals.list() == []


async def test_where_the_agents_process_is_unknown_its_user_decides_on_the_page(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An agent on the TCP endpoint whose process mcpd could not find: a decider of its
    user on the socket may be that agent's child, and is refused, saying where a call
    can be decided; the status page and another user can."""
    approvals = Approvals()
    why = "no process of uid 1000 that mcpd can read holds its TCP connection"
    agent = AgentInfo(connection="c7")
    async with trio.open_nursery() as nursery:
        for _ in range(2):
            nursery.start_soon(approvals.ask, request(agent, kin=unknown_kin(why, 1000)), 120)
        await started(approvals, 2)
        first, second = (view.id for view in approvals.list())
        with pytest.raises(ApprovalError) as refused:
            approvals.decide(first, True, "uid 1000", deciders=[Decider((Process(7),), uid=1000)])
        said = str(refused.value)
        assert f"could not find the process that made this call ({why})" in said
        assert "decide it on the status page (`mcpd dashboard`), or as another user" in said
        approvals.decide(first, True, "uid 0", deciders=[Decider((Process(8),), uid=0)])
        on_page = Decider((Process(7),), uid=1000, page=True)
        approvals.decide(second, False, "the status page", deciders=[on_page])
    assert approvals.list() == []


async def test_an_approval_is_remembered_for_its_connection_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = CallGate(Approvals(), KnownSecrets())
    gate.configure([PolicyRule(action="ask", remember="connection")])
    facts = CallFacts(
        name="mcp__github__merge", server="github", original="merge", profile="default"
    )
    decision = gate.decide(facts, AGENT)
    async with trio.open_nursery() as nursery:

        async def call() -> None:
            assert (await gate.ask(facts, AGENT, nothing_known, decision, NONE)).by == "operator"
            # Looked at again, as the call path does once the wait is over: it stands.
            assert gate.stands(facts, AGENT, decision) is None

        nursery.start_soon(call)
        await started(gate.approvals, 1)
        gate.approvals.decide(gate.approvals.list()[0].id, True, "operator")
    start = trio.current_time()
    assert (await gate.ask(facts, AGENT, nothing_known, decision, NONE)).by == "remembered"
    assert trio.current_time() == start  # nobody was asked
    other = msgspec.structs.replace(AGENT, connection="c2")
    assert (await gate.ask(facts, other, nothing_known, decision, NONE)).by == TIMEOUT
    gate.approvals.remembered.forget("c1")
    assert (await gate.ask(facts, AGENT, nothing_known, decision, NONE)).by == TIMEOUT


async def test_a_full_list_refuses_with_a_reason(autojump_clock: trio.testing.MockClock) -> None:
    gate = CallGate(Approvals(), KnownSecrets())
    facts = CallFacts(name="t", server="github", original="t", profile="default")
    decision = Decision(action="ask", rule=0)
    async with trio.open_nursery() as nursery:
        for _ in range(PER_AGENT):
            nursery.start_soon(gate.ask, facts, AGENT, nothing_known, decision, NONE)
        await started(gate.approvals, PER_AGENT)
        verdict = await gate.ask(facts, AGENT, nothing_known, decision, NONE)
        nursery.cancel_scope.cancel()
    assert verdict.outcome == "unanswered" and "already wait" in (verdict.reason or "")
    text = refusals.not_approved(facts, decision, verdict).content[0].text
    assert "could not wait for one" in text


def test_the_exe_is_read_from_proc() -> None:
    assert exe_of(os.getpid()) == os.path.basename(os.readlink("/proc/self/exe"))
    assert exe_of(2**22 + 12345) is None


# -- what the agent's user is asked --


def test_a_legacy_agent_is_asked_with_a_form() -> None:
    params = asking.elicitation_params(request(), "2025-11-25")
    assert params["mode"] == "form"
    assert "delete_repo on the server 'github'" in params["message"]
    assert '{"repo":"x"}' in params["message"]
    assert "deleting needs a person" in params["message"]
    schema = params["requestedSchema"]
    assert schema["properties"]["decision"]["enum"] == ["approve", "deny"]
    assert schema["required"] == ["decision"]
    # Before modes existed, the params had none.
    assert "mode" not in asking.elicitation_params(request(), "2025-06-18")


@pytest.mark.parametrize(
    ("answer", "outcome", "reason"),
    [
        ({"action": "accept", "content": {"decision": "approve"}}, "approved", None),
        ({"action": "accept", "content": {"decision": "deny", "reason": " no "}}, "denied", "no"),
        ({"action": "accept", "content": {"decision": "deny"}}, "denied", "denied"),
        ({"action": "accept", "content": {}}, "denied", "denied"),
        ({"action": "accept", "content": {"decision": "APPROVE"}}, "denied", "denied"),
        ({"action": "decline"}, "denied", "declined"),
        ({"action": "cancel"}, "denied", "dismissed without a decision"),
        ({"content": {"decision": "approve"}}, "denied", "the agent's answer could not be read"),
        (b"not json", "denied", "the agent's answer could not be read"),
    ],
)
def test_only_an_explicit_approval_approves(answer: object, outcome: str, reason: str) -> None:
    verdict = asking.verdict_of(answer)
    assert verdict is not None
    assert (verdict.outcome, verdict.reason, verdict.by) == (outcome, reason, asking.BY_AGENT)


def test_a_program_named_to_forge_log_lines_is_shown_on_one(tmp_path: Path) -> None:
    program = tmp_path / "agent\nWARNING forged\x1b[2J"
    shutil.copy(shutil.which("cat") or "/bin/cat", program)
    child = subprocess.Popen([str(program)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        name = exe_of(child.pid)
    finally:
        child.communicate(b"")
    assert name == "agent?WARNING forged?[2J"
