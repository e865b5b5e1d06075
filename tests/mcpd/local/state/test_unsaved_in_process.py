"""Whether the last write of a state file worked (``SaveWatch``): a failure kept with
since when and what is at stake, the first failure's time kept while it goes on, and
one line in the journal when a write works again."""

from __future__ import annotations

import logging
from datetime import datetime

import pytest

from mcpd.local.state.unsaved import SaveWatch
from mcpd.status_document import Unsaved


def test_a_watch_starts_with_nothing_unsaved() -> None:
    assert SaveWatch("pins", "approvals are in memory only").unsaved is None


def test_a_failed_write_is_kept_with_what_is_at_stake() -> None:
    watch = SaveWatch("pins", "approvals are in memory only")
    watch.failed("/var/lib/mcpd/pins.json", "No space left on device")
    unsaved = watch.unsaved
    assert unsaved is not None
    assert (unsaved.what, unsaved.path, unsaved.problem, unsaved.meaning) == (
        "pins",
        "/var/lib/mcpd/pins.json",
        "No space left on device",
        "approvals are in memory only",
    )
    assert datetime.fromisoformat(unsaved.since).tzinfo is not None


def test_while_writes_keep_failing_the_first_time_is_kept_and_the_latest_problem() -> None:
    watch = SaveWatch("pins", "m")
    # Failing since long ago: the next failure keeps that time.
    watch.unsaved = Unsaved("pins", "/a", "2000-01-01T00:00:00+00:00", "first", "m")
    watch.failed("/b", "second")
    assert watch.unsaved == Unsaved("pins", "/b", "2000-01-01T00:00:00+00:00", "second", "m")


def test_a_write_that_works_again_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    watch = SaveWatch("pins", "m")
    with caplog.at_level(logging.WARNING, "mcpd.state"):
        watch.saved()
        assert caplog.messages == []
        watch.unsaved = Unsaved("pins", "/p", "2000-01-01T00:00:00+00:00", "full", "m")
        watch.saved()
        watch.saved()
    assert caplog.messages == [
        "the pins can be saved to /p again (it could not be since 2000-01-01T00:00:00+00:00)"
    ]
    assert watch.unsaved is None
