"""The pins and whether they are on disk now (``PinKeeper.saving``): a flush that cannot
write says what is kept in memory only, for ``mcpd status``; one that works again
clears it and says so."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mcpd.config.tables.model import NamingConfig
from mcpd.local.pins.pinfile import PinKeeper
from mcpd.registry.gating.gate import ListGate
from mcpd.registry.tables.catalog import Catalog


def watched(path: Path) -> PinKeeper:
    cat = Catalog(NamingConfig(), ListGate())
    return PinKeeper(str(path), cat.gate.review, cat.rejudge, lambda alias: True, lambda a: False)


async def test_a_flush_that_cannot_write_is_watched_until_one_can(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "state"
    folder.write_text("a file where the state directory should be")
    pins = watched(folder / "pins.json")
    assert not await pins.flush()
    unsaved = pins.saving.unsaved
    assert unsaved is not None
    assert (unsaved.what, unsaved.path, unsaved.problem, unsaved.meaning) == (
        "pins",
        str(folder / "pins.json"),
        "see the journal",
        "approvals made since are kept in memory only",
    )
    folder.unlink()
    folder.mkdir()
    with caplog.at_level(logging.WARNING, "mcpd.state"):
        assert await pins.flush()
    assert pins.saving.unsaved is None
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"the pins can be saved to {folder / 'pins.json'} again "
        f"(it could not be since {unsaved.since})"
    ]


async def test_a_flush_that_works_leaves_nothing_unsaved(tmp_path: Path) -> None:
    pins = watched(tmp_path / "pins.json")
    assert await pins.flush()
    assert pins.saving.unsaved is None
    assert (tmp_path / "pins.json").exists()
