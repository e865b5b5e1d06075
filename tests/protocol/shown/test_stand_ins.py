"""``masking``: while it is in force, each value it was given is written as its stand-in,
whole or overlapping another, and nowhere else or afterwards."""

from __future__ import annotations

import trio
import trio.testing

from protocol.shown.stand_ins import masked, masked_repr, masking


def test_each_value_is_written_as_its_stand_in_only_while_masking() -> None:
    with masking({"hunter2-Zq9": "${PASS}", "tok-123456": "[secret of auth.token]"}):
        assert masked("a hunter2-Zq9 and tok-123456, hunter2-Zq9") == (
            "a ${PASS} and [secret of auth.token], ${PASS}"
        )
        assert masked("nothing to mask") == "nothing to mask"
    assert masked("a hunter2-Zq9") == "a hunter2-Zq9"


def test_a_value_inside_another_is_left_in_the_longer_ones_stand_in() -> None:
    with masking({"Zq9abc": "${SHORT}", "xxZq9abcyy": "${LONG}"}):
        assert masked("<xxZq9abcyy> <Zq9abc>") == "<${LONG}> <${SHORT}>"


def test_values_that_overlap_are_each_written_once_and_no_character_of_either_is_left() -> None:
    with masking({"abcdef12": "${A}", "ef12345xyz": "${B}"}):
        assert masked("<abcdef12345xyz>") == "<${A}${B}>"
    with masking({"aaaaaa": "${A}"}):
        assert masked("<aaaaaaaa>") == "<${A}>"


def test_a_value_is_masked_before_python_escapes_any_of_it() -> None:
    with masking({"Zq9'cdefgh": "${LISTEN}"}):
        # For its '"', Python writes the string in single quotes and escapes the "'".
        assert masked_repr("\"Zq9'cdefgh") == "'\"${LISTEN}'"
        assert masked_repr(5432) == "5432"
    assert masked_repr("\"Zq9'cdefgh") == "'\"Zq9\\'cdefgh'"


async def test_a_task_running_meanwhile_does_not_see_the_values() -> None:
    entered = trio.Event()
    seen: list[str] = []

    async def meanwhile() -> None:
        await entered.wait()
        seen.append(masked("hunter2-Zq9"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(meanwhile)
        with masking({"hunter2-Zq9": "${PASS}"}):
            entered.set()
            await trio.testing.wait_all_tasks_blocked()
            seen.append(masked("hunter2-Zq9"))
    assert seen == ["hunter2-Zq9", "${PASS}"]


def test_an_empty_value_masks_nothing() -> None:
    with masking({"": "${EMPTY}", "hunter2hunter2": "${P}"}):
        assert masked("a hunter2hunter2 b") == "a ${P} b"
