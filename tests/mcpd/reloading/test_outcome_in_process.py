"""Whether what runs is what the config file says (``ReloadOutcome``): a refused
reload is kept with its reason (the config error's own words where it gave them) and
when the configuration that runs was read, until a later reload is taken."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from mcpd.config.tables.model import CONFIG_ERROR
from mcpd.reloading.outcome import ReloadOutcome
from protocol.jsonrpc import messages as rpc

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")
CLOCK = r"\d\d:\d\d:\d\d"


def test_nothing_is_said_while_no_reload_was_refused() -> None:
    outcome = ReloadOutcome()
    assert outcome.refusal() is None
    assert outcome.warning() is None


def test_a_refused_reload_says_the_config_errors_own_words() -> None:
    outcome = ReloadOutcome()
    before = datetime.now(UTC).replace(microsecond=0)
    outcome.refused(
        rpc.RPCError(-32000, "reload refused", {CONFIG_ERROR: "servers.git.command: not found"})
    )
    refusal = outcome.refusal()
    assert refusal is not None
    assert refusal.reason == "servers.git.command: not found"
    assert ISO.fullmatch(refusal.at) and ISO.fullmatch(refusal.config_read)
    assert datetime.fromisoformat(refusal.at) >= before
    assert datetime.fromisoformat(refusal.config_read) <= datetime.fromisoformat(refusal.at)
    warning = outcome.warning()
    assert warning is not None
    assert re.fullmatch(
        f"the reload at {CLOCK} was refused, and the configuration read at {CLOCK} runs "
        "still: servers.git.command: not found",
        warning,
    )


def test_without_the_config_errors_words_the_message_is_the_reason() -> None:
    for data in (None, {"other": 1}, {CONFIG_ERROR: 5}, ["x"]):
        outcome = ReloadOutcome()
        outcome.refused(rpc.RPCError(-32000, "reload refused: busy", data))
        refusal = outcome.refusal()
        assert refusal is not None and refusal.reason == "reload refused: busy"


def test_a_reload_taken_clears_the_refusal_and_reads_the_file_anew() -> None:
    outcome = ReloadOutcome()
    outcome.refused(rpc.RPCError(-32000, "first"))
    first = outcome.refusal()
    assert first is not None
    outcome.taken()
    assert outcome.refusal() is None and outcome.warning() is None
    outcome.refused(rpc.RPCError(-32000, "second"))
    second = outcome.refusal()
    assert second is not None and second.reason == "second"
    assert second.config_read >= first.config_read


def test_the_latest_refusal_is_the_one_said() -> None:
    outcome = ReloadOutcome()
    outcome.refused(rpc.RPCError(-32000, "first"))
    outcome.refused(rpc.RPCError(-32000, "second"))
    refusal = outcome.refusal()
    assert refusal is not None and refusal.reason == "second"
