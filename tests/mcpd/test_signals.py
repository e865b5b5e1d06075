"""What a signal asks of the daemon, heard by ``Signals`` alone: the reloads SIGHUP
asks for and the stop SIGTERM asks for."""

from __future__ import annotations

import os
import signal

import pytest
import trio
import trio.testing

from mcpd.signals import Signals


async def test_sighups_wait_for_the_start_and_those_during_a_reload_are_one_more_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started, release = trio.Event(), trio.Event()
    reloads: list[int] = []
    stops: list[int] = []

    async def reload() -> None:
        reloads.append(len(reloads))
        if len(reloads) == 1:
            await release.wait()
        else:
            raise RuntimeError("unforeseen")

    signals = Signals(reload, lambda: stops.append(1))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(signals.hear)
            nursery.start_soon(signals.reloads, started)
            await trio.testing.wait_all_tasks_blocked()
            os.kill(os.getpid(), signal.SIGHUP)
            await trio.testing.wait_all_tasks_blocked()
            assert reloads == []  # the start is not done yet
            started.set()
            await trio.testing.wait_all_tasks_blocked()
            assert reloads == [0]
            os.kill(os.getpid(), signal.SIGHUP)
            os.kill(os.getpid(), signal.SIGHUP)
            await trio.testing.wait_all_tasks_blocked()
            release.set()
            await trio.testing.wait_all_tasks_blocked()
            assert reloads == [0, 1]
            assert "reload failed (RuntimeError)" in caplog.text  # and no more than that
            os.kill(os.getpid(), signal.SIGTERM)
            await trio.testing.wait_all_tasks_blocked()
            assert stops == [1] and reloads == [0, 1]
            nursery.cancel_scope.cancel()
