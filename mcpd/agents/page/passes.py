"""Who may use the page in a browser: one-time codes, and the sessions they open.

A browser cannot send mcpd's bearer token. ``mcpd dashboard`` (the daemon's own user
or root, on its socket) gets a code, good once and for ``CODE_TTL``; the page trades
it for a session, whose id goes into an HttpOnly, SameSite=Strict cookie, and whose
CSRF token into the page, for its actions to send back. A session is the local user's
whose connection traded the code, and is taken only on a connection of that user
(``users_session``), one that no process of mcpd's servers holds (``whose``): browsers
send a cookie of 127.0.0.1 to every port there, another user's server and a server of
mcpd's own too, and a cookie may be planted by anyone who serves a page there. A
session lasts ``SESSION_TTL``, and ends sooner when the endpoint's token is rotated
(``mcpd token --rotate`` locks every browser out as it does every client) or mcpd
restarts. A code keeps who asked for it, and a session who asked for its code and who
traded it (``opener``): what the page may decide rests on them, and so does what a new
one pushes out. Those opened from an agent's side, which decide nothing, are kept to
a bound of their own, and to a few per agent: however many an agent asks for, it
never ends a person's session nor spends a person's code. Whose side each is on is
judged anew against the agents connected as a new one comes (``judge``), so what a
process opened before it connected as an agent is its agent's once it has; until then
nothing tells that process from a person, and what it opens counts with theirs.

Codes and session ids are kept by their digests, so that looking one up compares no
secret byte by byte, and a copy of the daemon's memory holds none of them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

import msgspec
import trio

from ...policy.deciders.kin import AgentKin
from ...policy.deciders.kinship import Kinship
from .opener import Opener, judged

T = TypeVar("T")

CODE_TTL: Final = 60.0
SESSION_TTL: Final = 12 * 3600.0
# At most this many of each at once that may decide, and as many again opened from an
# agent's side (which decide nothing): a new one pushes out the oldest of its own
# kind, so that an agent asking for codes without end never ends a person's session
# nor spends a person's code.
MAX_CODES: Final = 16
MAX_SESSIONS: Final = 64
# Of those opened from an agent's side, at most this many of each per agent they are
# kin to: one agent pushes out its own before another's.
PER_AGENT: Final = 4


class PageSession(msgspec.Struct, frozen=True):
    csrf: str
    expires: float
    token: bytes  # a digest of the endpoint token it was opened under
    uid: int  # the local user whose connection traded its code: the only one it admits
    # Who asked for its code (``mcpd dashboard``) and who traded it: who decides what
    # is decided on the page, and so may not be an agent's kin (``opener``).
    opener: Opener = Opener()


class _Code(msgspec.Struct, frozen=True):
    expires: float
    asker: Opener
    # Set once it can no longer open a session before it expires (traded, pushed out).
    spent: trio.Event = msgspec.field(default_factory=trio.Event)


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class Passes:
    def __init__(self, token: Callable[[], str]) -> None:
        """``token``: the endpoint's bearer token now (it may be rotated)."""
        self._token = token
        self._codes: dict[bytes, _Code] = {}
        self._sessions: dict[bytes, PageSession] = {}

    def issue(self, asker: Opener | None = None, agents: Sequence[AgentKin] = ()) -> str:
        """A new one-time code, for ``asker`` (who asked for it); ``agents``: who is kin
        to each agent connected now."""
        now = trio.current_time()
        kinship = Kinship(agents)
        asker = judged(asker or Opener(), kinship)
        self._codes = {d: c for d, c in self._codes.items() if c.expires > now}
        self._judge(kinship)
        for key in _pushed_out(self._codes, lambda c: c.asker, asker, MAX_CODES):
            self._codes.pop(key).spent.set()
        code = secrets.token_urlsafe(24)
        self._codes[_digest(code)] = _Code(now + CODE_TTL, asker)
        return code

    async def until_spent(self, code: str) -> None:
        """Return once ``code`` can open no session: it was traded, pushed out, or
        expired (at once for one that is not a good code now)."""
        found = self._codes.get(_digest(code))
        if found is None:
            return
        with trio.move_on_at(found.expires):
            await found.spent.wait()

    def good(self, code: str) -> bool:
        """Whether ``code`` would open a session now (it is not spent by asking)."""
        found = self._codes.get(_digest(code))
        return found is not None and found.expires > trio.current_time()

    def redeem(
        self, code: str, uid: int, trader: Opener | None = None, agents: Sequence[AgentKin] = ()
    ) -> str | None:
        """The id of a new session for a good code (which is then spent), or None.

        ``uid``: the local user trading it, the only one its session admits;
        ``trader``: who trades it, as found; ``agents``: who is kin to each agent
        connected now.
        """
        now = trio.current_time()
        key = _digest(code)
        found = self._codes.pop(key, None)
        if found is None:
            return None
        found.spent.set()
        if found.expires <= now:
            return None
        kinship = Kinship(agents)
        opener = judged(found.asker.joined(trader or Opener()), kinship)
        token = self._current_token()
        if token is None:
            return None
        self._sessions = {d: s for d, s in self._sessions.items() if s.expires > now}
        self._judge(kinship)
        for key in _pushed_out(self._sessions, lambda s: s.opener, opener, MAX_SESSIONS):
            del self._sessions[key]
        sid = secrets.token_urlsafe(32)
        self._sessions[_digest(sid)] = PageSession(
            secrets.token_urlsafe(24), now + SESSION_TTL, token, uid, opener
        )
        return sid

    def judge(self, agents: Sequence[AgentKin]) -> None:
        """Each code and session kept, as the agents connected now (``agents``) find
        its opener: one kin to one of them is that agent's from now on, pushed out with
        its kind, and its page decides nothing (``opener.judged``)."""
        self._judge(Kinship(agents))

    def _judge(self, agents: Kinship) -> None:
        if agents.empty:
            return
        for key, code in list(self._codes.items()):
            asker = judged(code.asker, agents)
            if asker is not code.asker:
                self._codes[key] = msgspec.structs.replace(code, asker=asker)
        for key, session in list(self._sessions.items()):
            opener = judged(session.opener, agents)
            if opener is not session.opener:
                self._sessions[key] = msgspec.structs.replace(session, opener=opener)

    def live(self, sids: list[str]) -> list[tuple[str, PageSession]]:
        """The live sessions among those ``sids`` name, each with its id."""
        return [(sid, s) for sid in sids if (s := self.session(sid)) is not None]

    def session(self, sid: str | None) -> PageSession | None:
        """The live session ``sid`` names, if any."""
        if not sid:
            return None
        key = _digest(sid)
        found = self._sessions.get(key)
        if found is None:
            return None
        if found.expires <= trio.current_time() or found.token != self._current_token():
            del self._sessions[key]
            return None
        return found

    def end(self, sid: str) -> None:
        self._sessions.pop(_digest(sid), None)

    def _current_token(self) -> bytes | None:
        try:
            return _digest(self._token())
        except Exception:  # an unreadable token file lets nobody in
            return None


def _pushed_out(
    kept: dict[bytes, T], opener_of: Callable[[T], Opener], new: Opener, most: int
) -> list[bytes]:
    """Which of ``kept`` (oldest first) a new one that ``new`` opens pushes out: the
    oldest of those that may decide, for one that may; for one opened from an agent's
    side, the oldest of that agent's own once it has ``PER_AGENT``, else the oldest of
    all those opened from an agent's side."""
    ties = [(key, opener_of(value).found) for key, value in kept.items()]
    if new.found is None:
        alike = [key for key, tie in ties if tie is None]
    else:
        own = [key for key, tie in ties if tie == new.found]
        if len(own) >= PER_AGENT:
            return own[: len(own) - PER_AGENT + 1]
        alike = [key for key, tie in ties if tie is not None]
    return alike[: max(0, len(alike) - most + 1)]


def users_session(live: list[tuple[str, PageSession]], uid: int) -> tuple[str, PageSession] | None:
    """The first of the ``live`` sessions that the local user ``uid`` opened, with its
    id. Any other, another user's or one planted, is passed over."""
    return next(((sid, s) for sid, s in live if s.uid == uid), None)


def csrf_matches(session: PageSession, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), session.csrf.encode())


def cookie_name(host: str | None) -> str:
    """The cookie's name on ``host``: browsers send a host's cookies to each of its
    ports, so each endpoint's name has its port (two daemons keep one each)."""
    port = (host or "").rpartition(":")[2]
    return f"mcpd_page_{port}" if port.isdigit() else "mcpd_page"


def read_cookies(header: str | None, name: str) -> list[str]:
    """The values of every cookie called ``name``: a browser sends each it holds, a
    planted one of another path or domain first as often as not."""
    found = []
    for part in (header or "").split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            found.append(value)
    return found
