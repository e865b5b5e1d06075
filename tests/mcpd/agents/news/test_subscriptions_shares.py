"""What all agents together may subscribe to is shared out by user (``subscriptions``):
another user let in on a profile's socket, on as many connections as it may hold,
takes its share and no more, and mcpd's own user and root keep a reserve past all's."""

from __future__ import annotations

import os

import pytest

from mcpd.agents.entry.shares import count_shares
from mcpd.agents.news.subscriptions import Subscriptions, subscribed_bytes_in_all
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import DaemonConfig, NamingConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.registry.uris.claims import ROUTE_STEPS, Budget
from mcpd.servers.all_servers import AllServers
from mcpd.servers.shared import Whose
from mcpd.servers.supervisor import Supervisor
from protocol.jsonrpc import messages as rpc
from protocol.mcp import features

OTHER = Whose(65534 if os.getuid() != 65534 else 65533, 7, False)
THIRD = Whose(OTHER.uid - 1 if OTHER.uid is not None else 1, 8, False)
OWN = Whose(os.getuid(), 9, True)
_HELD: list[object] = []


class _Offering(AllServers):
    """One server, ``a``, not running, whose every ``a://`` URI may be subscribed to."""

    def __init__(self) -> None:
        catalog = Catalog(NamingConfig())
        catalog.resources.update(
            "a", [], [features.ResourceTemplate(uriTemplate="a://{id}", name="a")]
        )
        config = parse_config({"servers": {"a": {"command": "x"}}}, env={})
        super().__init__(Supervisor(config, catalog), catalog)

    def subscribable(self, alias: str) -> bool:
        return True


def _drop(data: bytes) -> None:
    """Where the updates of a subscription no test reads go."""


def budget() -> Budget:
    return Budget(ROUTE_STEPS)


def _fill(subs: Subscriptions, whose: Whose) -> tuple[rpc.RPCError, rpc.RPCError]:
    """``whose``'s connections, each naming long URIs in a listen until one is
    refused, then short ones one at a time until one is refused: both refusals."""
    refused = None
    for n in range(64):
        long = [f"a://{whose.uid}-{n}-{i}-".ljust(1000, "x") for i in range(100)]
        conn = object()
        _HELD.append(conn)  # an owner is told by its id: each one lives on
        try:
            if refused is None:
                subs.listen(conn, 1, long, _drop, budget(), whose=whose)
            else:
                for uri in (f"a://{whose.uid}-{n}-{i}" for i in range(900)):
                    subs.subscribe(conn, uri, _drop, True, budget(), whose=whose)
        except rpc.RPCError as exc:
            if refused is not None:
                return refused, exc
            refused = exc
    raise AssertionError("never refused")


def test_another_users_connections_take_their_share_not_everyones() -> None:
    subs = Subscriptions(_Offering())
    long, short = _fill(subs, OTHER)
    share = count_shares(DaemonConfig(), subscribed_bytes_in_all(DaemonConfig().max_line_bytes))
    assert f"uid {OTHER.uid} may hold at most {share.per_uid} bytes" in long.message
    assert f"uid {OTHER.uid} may hold at most 2500 resource subscriptions" in short.message
    for whose in (OWN, THIRD):
        subs.subscribe(object(), "a://mine", _drop, True, budget(), whose=whose)
        assert subs.listen(object(), 1, ["a://ours"], _drop, budget(), whose=whose)


def test_users_filling_all_leave_mcpds_own_user_its_reserve() -> None:
    subs = Subscriptions(_Offering())
    for uid in range(1000, 1004):  # four users at their share fill all's bound
        _fill(subs, Whose(uid, uid, False))
    _, refused_too = _fill(subs, Whose(1004, 1004, False))
    assert "all agents together may hold at most" in refused_too.message
    late = "a://late-".ljust(100, "x")
    with pytest.raises(rpc.RPCError) as refused:
        subs.subscribe(object(), late, _drop, True, budget(), whose=THIRD)
    assert "all agents together may hold at most" in refused.value.message
    subs.subscribe(object(), late, _drop, True, budget(), whose=OWN)
