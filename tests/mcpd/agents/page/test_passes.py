"""Who may use the page: a one-time code, good once and briefly, opens a session; a
session ends when it expires, when it is ended, or when the endpoint's token is rotated
(even if rotated back), and an unreadable token lets nobody in; at most so many codes
and sessions are kept, the oldest pushed out. Run on trio's virtual clock."""

from __future__ import annotations

import trio
from trio.testing import MockClock

from mcpd.agents.page.passes import (
    CODE_TTL,
    MAX_SESSIONS,
    SESSION_TTL,
    PageSession,
    Passes,
    cookie_name,
    csrf_matches,
    read_cookie,
)
from mcpd.policy.agent import Decider


class Token:
    def __init__(self) -> None:
        self.value: str | None = "token-1"

    def __call__(self) -> str:
        if self.value is None:
            raise OSError("the token file cannot be read")
        return self.value


def opened(passes: Passes, decider: Decider | None = None) -> str:
    sid = passes.redeem(passes.issue(decider))
    assert sid is not None
    return sid


async def test_a_code_opens_a_session_once() -> None:
    passes = Passes(Token())
    code = passes.issue()
    sid = passes.redeem(code)
    assert sid is not None and sid != code
    session = passes.session(sid)
    assert session is not None and session.csrf
    assert passes.redeem(code) is None


async def test_a_code_is_good_until_its_time_is_up(autojump_clock: MockClock) -> None:
    passes = Passes(Token())
    code = passes.issue()
    await trio.sleep(CODE_TTL - 1)
    assert passes.redeem(code) is not None
    late = passes.issue()
    await trio.sleep(CODE_TTL)
    assert passes.redeem(late) is None


async def test_a_session_is_for_whoever_asked_for_its_code() -> None:
    passes = Passes(Token())
    who = Decider(lineage=(4242, 1), session=4242)
    session = passes.session(opened(passes, who))
    assert session is not None and session.decider == who


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
    assert passes.redeem(passes.issue()) is None


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


# -- the CSRF token and the cookie --


def test_the_csrf_token_must_be_presented_exactly() -> None:
    session = PageSession("csrf-token", 0.0, b"")
    assert csrf_matches(session, "csrf-token")
    for wrong in (None, "", "csrf-toke", "csrf-token ", "CSRF-TOKEN", "csrf-tokén"):
        assert not csrf_matches(session, wrong)


def test_each_port_has_its_own_cookie() -> None:
    assert cookie_name("127.0.0.1:8765") == "mcpd_page_8765"
    assert cookie_name("[::1]:9000") == "mcpd_page_9000"
    assert cookie_name("localhost") == "mcpd_page"
    assert cookie_name("[::1]") == "mcpd_page"
    assert cookie_name(None) == "mcpd_page"


def test_the_cookie_is_read_by_its_exact_name() -> None:
    header = "xmcpd_page_1=no; mcpd_page_10=no;  mcpd_page_1=yes=really ; other"
    assert read_cookie(header, "mcpd_page_1") == "yes=really"
    assert read_cookie(header, "mcpd_page_2") is None
    assert read_cookie(None, "mcpd_page_1") is None
    assert read_cookie("mcpd_page_1", "mcpd_page_1") is None  # no value at all
