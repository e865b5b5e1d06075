"""A lazy server's state: when its tools are shown available whatever its parts' own
state says, and what its parts make of that."""

from __future__ import annotations

from mcpd.config.loading.load import parse_config
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.life.lazy_state import LazyState
from mcpd.servers.life.server_parts import ServerParts


def test_its_tools_are_listed_available_while_idle_stopping_or_started_on_demand() -> None:
    lazy = LazyState(idle_stop=60.0)
    assert lazy.listed_available("idle")
    # Not yet known: its first start is a discovery, not a start on demand.
    assert not lazy.listed_available("starting")
    lazy.known = True
    assert lazy.listed_available("starting")
    lazy.retrying = True  # after a start that failed, it is down until it is up
    assert not lazy.listed_available("starting")
    assert not lazy.listed_available("waiting")
    lazy.stopping = True
    assert lazy.listed_available("connected")


def parts(**server: object) -> ServerParts:
    config = parse_config({"servers": {"s": {"command": "srv", **server}}}, env={})
    return ServerParts("s", config.servers["s"], config, Catalog(config.naming), lambda a: None)


async def test_a_lazy_server_being_stopped_is_idle_and_its_calls_wait_for_it() -> None:
    p = parts(start="lazy", idle_stop=30)
    assert p.lazy is not None and p.scheduler.demand is p.lazy.demand
    p.downtime.set_phase("connected")
    assert not p.waits_for_start()
    p.lazy.stopping = True
    assert p.state == "idle" and p.available and p.waits_for_start()


async def test_a_lazy_server_that_cannot_start_is_run_as_any_other() -> None:
    p = parts(start="lazy", env={"TOKEN": "${NOT_SET}"})
    assert p.cfg.unresolved is not None and p.lazy is None
    assert parts().lazy is None
