"""Who may use the page: a one-time code, good once and briefly, opens a session; a
session ends when it expires, when it is ended, or when the endpoint's token is rotated
(even if rotated back), and an unreadable token lets nobody in; at most so many codes
and sessions are kept, the oldest pushed out, and those opened from an agent's side
push out only their own kind (a few per agent), never one that may decide (through a
running daemon too, an agent flooding codes and sessions, and one that asked for them
before it connected, held as its own once it has). Run on trio's virtual clock, but for
the running daemon."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import trio
from trio.testing import MockClock

from mcpd.agents.page.opener import Opener
from mcpd.agents.page.passes import (
    CODE_TTL,
    MAX_CODES,
    MAX_SESSIONS,
    PER_AGENT,
    SESSION_TTL,
    PageSession,
    Passes,
    cookie_name,
    csrf_matches,
    read_cookies,
    users_session,
)
from mcpd.policy.deciders.kin import Decider, Process
from tests.support.clients import self_approval
from tests.support.clients.agent import make_config, running
from tests.support.page.http_session import code_url, csrf_of, http, session
from tests.support.system.procs import scripted

LIMIT = 90


class Token:
    def __init__(self) -> None:
        self.value: str | None = "token-1"

    def __call__(self) -> str:
        if self.value is None:
            raise OSError("the token file cannot be read")
        return self.value


ME = 1000  # the uid of the user trading a code, in these tests


def opened(passes: Passes, asker: Opener | None = None, trader: Opener | None = None) -> str:
    sid = passes.redeem(passes.issue(asker), ME, trader)
    assert sid is not None
    return sid


async def test_a_code_opens_a_session_once() -> None:
    passes = Passes(Token())
    code = passes.issue()
    sid = passes.redeem(code, ME)
    assert sid is not None and sid != code
    session = passes.session(sid)
    assert session is not None and session.csrf
    assert passes.redeem(code, ME) is None


async def test_a_code_is_good_until_its_time_is_up(autojump_clock: MockClock) -> None:
    passes = Passes(Token())
    code = passes.issue()
    await trio.sleep(CODE_TTL - 1)
    assert passes.redeem(code, ME) is not None
    late = passes.issue()
    await trio.sleep(CODE_TTL)
    assert passes.redeem(late, ME) is None


async def test_a_session_keeps_who_asked_for_its_code_and_who_traded_it() -> None:
    passes = Passes(Token())
    asker = Decider(lineage=(Process(4242, 7), Process(1)), session=4242)
    trader = Decider(lineage=(Process(5151, 9), Process(1)), session=5151)
    found = ("agent", 5151)
    session = passes.session(opened(passes, Opener((asker,)), Opener((trader,), found)))
    assert session is not None
    assert session.opener == Opener((asker, trader), found)


async def test_a_session_lasts_its_time_and_no_longer(autojump_clock: MockClock) -> None:
    passes = Passes(Token())
    sid = opened(passes)
    await trio.sleep(SESSION_TTL - 1)
    assert passes.session(sid) is not None
    await trio.sleep(1)
    assert passes.session(sid) is None


async def test_rotating_the_token_ends_every_session_for_good() -> None:
    token = Token()
    passes = Passes(token)
    sid = opened(passes)
    token.value = "token-2"
    assert passes.session(sid) is None
    token.value = "token-1"  # rotated back: the session is gone all the same
    assert passes.session(sid) is None
    assert passes.session(opened(passes)) is not None


async def test_an_unreadable_token_lets_nobody_in() -> None:
    token = Token()
    passes = Passes(token)
    sid = opened(passes)
    token.value = None
    assert passes.session(sid) is None
    assert passes.redeem(passes.issue(), ME) is None


async def test_an_ended_session_is_gone() -> None:
    passes = Passes(Token())
    sid, other = opened(passes), opened(passes)
    passes.end(sid)
    passes.end("never-was")
    assert passes.session(sid) is None
    assert passes.session(other) is not None


async def test_a_session_is_not_found_by_guessing() -> None:
    passes = Passes(Token())
    opened(passes)
    for guess in (None, "", "x", "a" * 43):
        assert passes.session(guess) is None


async def test_the_oldest_session_is_pushed_out_past_the_limit() -> None:
    passes = Passes(Token())
    sids = [opened(passes) for _ in range(MAX_SESSIONS + 1)]
    assert passes.session(sids[0]) is None
    assert all(passes.session(s) is not None for s in sids[1:])


AGENT = Opener((), ("agent", 20))  # asked for, or traded, from an agent's side
OTHER_AGENT = Opener((), ("agent", 21))


async def test_what_an_agents_side_opens_never_pushes_out_what_may_decide() -> None:
    passes = Passes(Token())
    persons = [opened(passes) for _ in range(MAX_SESSIONS)]
    code = passes.issue()
    theirs = [opened(passes, AGENT) for _ in range(MAX_SESSIONS + 1)]
    theirs += [opened(passes, trader=OTHER_AGENT) for _ in range(MAX_SESSIONS + 1)]
    for _ in range(MAX_CODES + 1):
        passes.issue(AGENT)
    assert all(passes.session(s) is not None for s in persons)
    assert passes.good(code)
    # Each agent keeps its last few.
    assert [passes.session(s) is not None for s in theirs].count(True) == 2 * PER_AGENT
    assert passes.session(theirs[-1]) is not None
    # A person's new one pushes out the oldest of theirs.
    opened(passes)
    assert passes.session(persons[0]) is None and passes.session(persons[1]) is not None


async def test_an_agents_side_keeps_a_bound_of_its_own_and_a_few_per_agent() -> None:
    passes = Passes(Token())
    agents = [Opener((), ("agent", pid)) for pid in range(100, 100 + MAX_SESSIONS + 1)]
    sids = [opened(passes, a) for a in agents]
    assert passes.session(sids[0]) is None
    assert all(passes.session(s) is not None for s in sids[1:])
    codes = [passes.issue(a) for a in agents[: MAX_CODES + 1]]
    assert not passes.good(codes[0]) and all(passes.good(c) for c in codes[1:])


# -- the CSRF token and the cookie --


def test_the_csrf_token_must_be_presented_exactly() -> None:
    session = PageSession("csrf-token", 0.0, b"", 1000)
    assert csrf_matches(session, "csrf-token")
    for wrong in (None, "", "csrf-toke", "csrf-token ", "CSRF-TOKEN", "csrf-tokén"):
        assert not csrf_matches(session, wrong)


def test_each_port_has_its_own_cookie() -> None:
    assert cookie_name("127.0.0.1:8765") == "mcpd_page_8765"
    assert cookie_name("[::1]:9000") == "mcpd_page_9000"
    assert cookie_name("localhost") == "mcpd_page"
    assert cookie_name("[::1]") == "mcpd_page"
    assert cookie_name(None) == "mcpd_page"


def test_every_cookie_of_the_name_is_read() -> None:
    header = "xmcpd_page_1=no; mcpd_page_10=no;  mcpd_page_1=yes=really ; other"
    assert read_cookies(header, "mcpd_page_1") == ["yes=really"]
    assert read_cookies(header, "mcpd_page_2") == []
    assert read_cookies(None, "mcpd_page_1") == []
    assert read_cookies("mcpd_page_1", "mcpd_page_1") == []  # no value at all
    planted = "mcpd_page_1=planted; a=b; mcpd_page_1=real"
    assert read_cookies(planted, "mcpd_page_1") == ["planted", "real"]


# -- whose a session is --


async def test_a_session_is_its_traders_and_no_other_users() -> None:
    passes = Passes(Token())
    sid = passes.redeem(passes.issue(), 1000)
    assert sid is not None
    session = passes.session(sid)
    assert session is not None and session.uid == 1000
    live = passes.live([sid])
    assert users_session(live, 1000) == (sid, session)
    assert users_session(live, 1001) is None
    assert users_session(live, 0) is None  # root's connection neither


async def test_a_planted_or_another_users_cookie_neither_locks_out_nor_is_taken() -> None:
    passes = Passes(Token())
    mine = opened(passes)
    theirs = passes.redeem(passes.issue(), 1001)
    assert theirs is not None
    for sids in (["planted", mine], [theirs, mine], [mine, theirs], ["a", theirs, mine, "b"]):
        found = users_session(passes.live(sids), ME)
        assert found is not None and found[0] == mine, sids
    assert users_session(passes.live(["planted", theirs]), ME) is None
    assert passes.live(["forged", "A" * 43]) == []


async def test_the_wait_for_a_code_ends_when_it_is_traded_or_its_time_is_up(
    autojump_clock: MockClock,
) -> None:
    passes = Passes(Token())
    code, ended = passes.issue(), []
    async with trio.open_nursery() as nursery:

        async def wait(code: str) -> None:
            await passes.until_spent(code)
            ended.append((code, trio.current_time()))

        nursery.start_soon(wait, code)
        await trio.sleep(5)
        assert ended == []
        start = trio.current_time()
        assert passes.redeem(code, ME) is not None
    assert ended == [(code, start)]
    unused = passes.issue()
    issued = trio.current_time()
    await passes.until_spent(unused)
    assert trio.current_time() == issued + CODE_TTL
    await passes.until_spent("never-issued")  # at once
    assert trio.current_time() == issued + CODE_TTL


# -- an agent's codes and sessions, through a running daemon --


async def test_an_agents_codes_and_sessions_leave_the_persons_be(tmp_path: Path) -> None:
    """An agent of the daemon's own user asks for codes and trades them, as many as it
    likes: the person's session stays open, and their address not traded yet stays
    good; the agent's own last sessions (for looking) still open the page."""
    command, args = scripted()
    cfg = make_config(
        tmp_path,
        {"files": {"command": command, "args": list(args)}},
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
    )
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, sock = daemon.agent_server.endpoint.port, daemon.socket_path
            cookie, csrf = await session(port, sock)
            fresh = urlsplit(await code_url(sock))
            async with self_approval.agent("socket", sock, apart=True) as agent:
                _, traded = await agent.runs("codes", str(MAX_SESSIONS + 1), "trade")
                _, kept = await agent.runs("codes", str(MAX_CODES + 1), "keep")
            status, *theirs = traded.split("\n")
            assert status == "200" and kept == "0"
            page = await http(port, "GET", "/", {"Cookie": cookie})
            assert page.status == 200 and csrf_of(page.body) == csrf
            assert b'id="look-only"' not in page.body
            own = await http(port, "GET", "/", {"Cookie": theirs[-1]})
            assert own.status == 200 and b'id="look-only"' in own.body
            opened = await http(port, "GET", f"/?{fresh.query}")
            assert opened.status == 200 and "set-cookie" in opened.headers


async def test_what_an_agent_opened_before_it_connected_is_its_own_once_it_has(
    tmp_path: Path,
) -> None:
    """A process asks for codes, trading some, while no agent: nothing tells it from a
    person then, and together with the person's it fills both bounds. Once it connects,
    what it opened is its own: the person's next address and session push out neither
    the person's session nor their address not traded yet, and its early sessions say
    they decide nothing."""
    command, args = scripted()
    cfg = make_config(
        tmp_path,
        {"files": {"command": command, "args": list(args)}},
        http_listen="127.0.0.1:0",
        state_dir=str(tmp_path / "state"),
    )
    with trio.fail_after(LIMIT):
        async with running(cfg) as daemon:
            assert daemon.agent_server.endpoint is not None
            port, sock = daemon.agent_server.endpoint.port, daemon.socket_path
            cookie, csrf = await session(port, sock)
            fresh = urlsplit(await code_url(sock))
            async with self_approval.agent("unconnected", sock, apart=True) as agent:
                _, traded = await agent.runs("codes", str(MAX_SESSIONS - 1), "trade")
                _, kept = await agent.runs("codes", str(MAX_CODES - 1), "keep")
                assert traded.split("\n")[0] == "200" and kept == "0"
                await agent.runs("connect")
                await session(port, sock)  # the person's next address, traded
                page = await http(port, "GET", "/", {"Cookie": cookie})
                assert page.status == 200 and csrf_of(page.body) == csrf
                opened = await http(port, "GET", f"/?{fresh.query}")
                assert opened.status == 200 and "set-cookie" in opened.headers
                early = await http(port, "GET", "/", {"Cookie": traded.split("\n")[-1]})
                assert early.status == 200 and b'id="look-only"' in early.body
