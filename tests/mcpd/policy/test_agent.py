"""Who an agent is: the key rate limits and approvals tell agents apart by, how people
are shown it, and the name /proc gives a process whose program chose one to confuse
the reading (control characters, a great length, a deleted file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcpd.policy.agent import AgentInfo, exe_of, user_name
from tests.support.system.procs import cat_named, reading_stdin

GONE = 2**22 + 12345  # above any pid the kernel hands out


# -- the key and the label --


def test_an_agent_is_told_apart_by_its_process_else_its_user_else_the_endpoint() -> None:
    assert AgentInfo(pid=7, connection="c1").key == AgentInfo(pid=7, connection="c2").key
    assert AgentInfo(pid=7).key != AgentInfo(pid=8).key
    # A process whose pid the kernel does not give (another PID namespace): its user.
    assert AgentInfo(uid=1000, connection="c1").key == AgentInfo(uid=1000, connection="c2").key
    assert AgentInfo(uid=1000).key != AgentInfo(uid=1001).key
    # Over TCP mcpd sees neither; a new connection is no new agent.
    assert AgentInfo(connection="c1").key == AgentInfo(connection="c2").key
    # No user can pass for a process.
    assert AgentInfo(uid=7).key != AgentInfo(pid=7).key
    assert AgentInfo(pid=0).key == "pid:0"


def test_the_label_names_the_process_its_user_and_its_profile() -> None:
    label = AgentInfo(uid=0, pid=4242, exe="claude", profile="ci", connection="c1").label()
    assert label == "pid 4242 (claude), uid 0 (root), profile ci"
    assert AgentInfo(pid=4242).label() == "pid 4242, profile default"
    assert AgentInfo(connection="http-7").label() == "connection http-7, profile default"
    assert AgentInfo().label() == "connection ?, profile default"


def test_a_uid_with_no_user_is_labelled_so() -> None:
    assert user_name(2**31 - 7) == "no user name"
    assert AgentInfo(uid=2**31 - 7).label() == f"uid {2**31 - 7} (no user name), profile default"


# -- what /proc says --


def test_a_long_program_name_is_cut_and_a_deleted_one_is_still_named(tmp_path: Path) -> None:
    long = cat_named(tmp_path, "a" * 200)
    with reading_stdin(long) as child:
        assert exe_of(child.pid) == "a" * 64
    doomed = cat_named(tmp_path, "doomed-agent")
    with reading_stdin(doomed) as child:
        doomed.unlink()
        assert exe_of(child.pid) == "doomed-agent"


def test_a_process_that_is_gone_has_no_name() -> None:
    assert exe_of(GONE) is None


# A process that calls itself mcpd, by its command line and by the name it gives itself.
_NAMED_MCPD = (
    "import ctypes, sys; ctypes.CDLL(None).prctl(15, b'mcpd', 0, 0, 0); "
    "print(open('/proc/self/comm').read().strip(), flush=True); sys.stdin.read()"
)


def test_an_agent_that_calls_itself_mcpd_is_named_by_its_interpreter_as_the_guide_shows() -> None:
    child = subprocess.Popen(
        ["mcpd", "-c", _NAMED_MCPD],
        executable=sys.executable,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "mcpd"
        interpreter = os.path.basename(os.path.realpath(sys.executable))
        assert exe_of(child.pid) == interpreter
    finally:
        child.kill()
        child.wait()
    # The guide's approvals and audit examples show a bridge (a Python script) so.
    guide = (Path(__file__).parents[3] / "docs" / "guide.md").read_text()
    assert "(mcpd)" not in guide
    assert "pid 4242 (python3.11), uid 1000, claude-code" in guide
