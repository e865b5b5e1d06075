"""Which waiting connection the TCP endpoint's lobby lets go when it is full: the
longest waiting one of the address holding the most places."""

from __future__ import annotations

import trio

from mcpd.agents.http.lobby import Lobby


class Waiting:
    """A lobby and who entered it, by name."""

    def __init__(self, places: int) -> None:
        self.lobby = Lobby(places)
        self.scopes: dict[str, trio.CancelScope] = {}
        self.sources: dict[str, str] = {}

    def enter(self, name: str, source: str) -> str | None:
        """``name`` from ``source`` comes in; the name of the one pushed out, if any."""
        before = {n for n, s in self.scopes.items() if s.cancel_called}
        self.scopes[name] = trio.CancelScope()
        self.sources[name] = source
        pushed_from = self.lobby.enter(self.scopes[name], source)
        pushed = {n for n, s in self.scopes.items() if s.cancel_called} - before
        assert len(pushed) == (pushed_from is not None)
        if not pushed:
            return None
        (name_out,) = pushed
        assert self.sources[name_out] == pushed_from
        return name_out

    def leave(self, name: str) -> None:
        self.lobby.leave(self.scopes[name], self.sources[name])


async def test_from_one_address_the_longest_waiting_goes_first() -> None:
    w = Waiting(3)
    assert [w.enter(n, "a") for n in ("1", "2", "3")] == [None, None, None]
    assert w.enter("4", "a") == "1"
    assert w.enter("5", "a") == "2"
    w.leave("4")  # got its headers in: a place is free again
    assert w.enter("6", "a") is None
    assert w.enter("7", "a") == "3"


async def test_a_flood_from_another_address_pushes_out_its_own() -> None:
    w = Waiting(4)
    w.enter("slow", "client")
    for i in range(3):
        w.enter(f"f{i}", "flood")
    # However many come, and however long "slow" has waited, the flood makes room
    # from its own.
    pushed = [w.enter(f"f{i}", "flood") for i in range(3, 100)]
    assert "slow" not in pushed and None not in pushed
    assert not w.scopes["slow"].cancel_called
    # A second client from its own address still gets a place, at the flood's cost.
    assert w.enter("slow2", "client") is not None
    assert not w.scopes["slow"].cancel_called
    # Once the client's address holds as many as the flood's, the longest waiting goes.
    assert w.enter("x", "third") == "slow"


async def test_between_addresses_holding_as_many_the_longest_waiting_goes() -> None:
    w = Waiting(4)
    for name, source in (("a1", "a"), ("b1", "b"), ("a2", "a"), ("b2", "b")):
        w.enter(name, source)
    assert w.enter("c1", "c") == "a1"  # a and b hold two each; a1 has waited longest
    assert w.enter("c2", "c") == "b1"  # now b holds the most
    # With the newcomer c would hold three, the most: its own longest waiting goes.
    assert w.enter("c3", "c") == "c1"
    assert w.enter("d1", "d") == "c2"  # c still holds the most


async def test_a_connection_that_left_is_not_pushed_out() -> None:
    w = Waiting(2)
    w.enter("1", "a")
    w.enter("2", "a")
    w.leave("1")
    w.leave("1")  # twice: the second is a no-op
    assert w.enter("3", "a") is None
    assert w.enter("4", "a") == "2"
