from __future__ import annotations

from transports.write_batch import BATCH, batch


def test_a_flush_held_in_a_batch_runs_once_as_the_outermost_block_ends() -> None:
    ran: list[str] = []
    with batch():
        assert BATCH.flushes == []
        with batch():
            assert BATCH.flushes is not None
            BATCH.flushes.append(lambda: ran.append("a"))
        assert ran == []  # an inner block's end writes nothing
        BATCH.flushes.append(lambda: ran.append("b"))
    assert ran == ["a", "b"]
    assert BATCH.flushes is None


def test_outside_a_batch_nothing_is_held() -> None:
    assert batch() is BATCH
    assert BATCH.flushes is None


def test_a_block_left_by_an_error_still_flushes_what_it_held() -> None:
    ran: list[str] = []
    try:
        with batch():
            assert BATCH.flushes is not None
            BATCH.flushes.append(lambda: ran.append("written"))
            raise ValueError("handling the chunk failed")
    except ValueError:
        pass
    assert ran == ["written"] and BATCH.flushes is None
