"""The daemon's heap is frozen once it has started, and a reload frees what it dropped."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mcpd.config.loading.load import load
from mcpd.daemon import Daemon
from mcpd.local import heap
from tests.support.system.procs import scripted


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the test run collects as before


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_frozen_cycles_wait_for_the_next_settle_with_collect(unfrozen: None) -> None:
    gc.collect()
    alive = _cycle()
    heap.settle()  # frozen while still referenced by itself only: garbage already
    gc.collect()
    assert alive() is not None, "a frozen object was collected"
    heap.settle(collect=True)
    assert alive() is None, "the garbage a reload left behind was never freed"
    assert gc.get_freeze_count() > 0, "what is alive after the collection is not frozen"


def _config(path: Path, aliases: list[str]) -> None:
    command, args = scripted()
    text = f'[daemon]\nsocket = "{path.parent / "mcpd.sock"}"\n'
    for alias in aliases:
        text += f'\n[servers.{alias}]\ncommand = "{command}"\nargs = {list(args)!r}\n'
    path.write_text(text.replace("'", '"'))


async def test_the_daemon_settles_after_start_and_after_each_reload(
    tmp_path: Path, unfrozen: None
) -> None:
    path = tmp_path / "mcpd.toml"
    _config(path, ["one"])
    settled: list[bool] = []
    daemon = Daemon(load(path), config_path=str(path), on_settled=settled.append)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(daemon.run)
            assert settled == [False]
            _config(path, ["one", "two"])
            await daemon.reload()
            assert settled == [False, True]
            assert "two" in daemon.supervisor.servers
            daemon.stop()


def test_serve_freezes_what_it_imported_before_the_servers_start(
    monkeypatch: pytest.MonkeyPatch, unfrozen: None
) -> None:
    from mcpd.starting import serve as serve_module

    gc.unfreeze()
    frozen_at_start: list[int] = []
    monkeypatch.setattr(
        serve_module.trio, "run", lambda *args: frozen_at_start.append(gc.get_freeze_count())
    )
    assert serve_module.serve(None, None, demo=True) == 0
    assert frozen_at_start and frozen_at_start[0] > 1000, "start-up collections walk the modules"
