from __future__ import annotations

from mcpd.servers.circuit.cooldown import Cooldown


def test_each_opening_waits_longer_up_to_the_cap() -> None:
    cooldown = Cooldown(5.0, 2.0, 30.0)
    assert [cooldown.take() for _ in range(6)] == [5.0, 10.0, 20.0, 30.0, 30.0, 30.0]


def test_an_outage_over_starts_the_next_from_the_base() -> None:
    cooldown = Cooldown(5.0, 2.0, 30.0)
    cooldown.take()
    cooldown.take()
    cooldown.restart()
    assert cooldown.take() == 5.0


def test_a_huge_factor_stays_at_the_cap_without_overflowing() -> None:
    cooldown = Cooldown(1.0, 1e300, 60.0)
    waits = [cooldown.take() for _ in range(200)]
    assert waits[0] == 1.0 and set(waits[1:]) == {60.0}


def test_new_settings_keep_how_far_it_had_grown() -> None:
    cooldown = Cooldown(5.0, 2.0, 300.0)
    cooldown.take()  # the next would wait 10: twice the base
    retuned = cooldown.retuned(30.0, 3.0, 50.0)
    assert retuned.take() == 50.0  # twice the new base is 60: within the new cap
    assert Cooldown(5.0, 2.0, 300.0).retuned(30.0, 3.0, 500.0).take() == 30.0
    grown = Cooldown(5.0, 2.0, 300.0)
    grown.take()
    assert grown.retuned(30.0, 3.0, 500.0).take() == 60.0
