"""The tasks remembered at once are shared out by user (``table``): another user, on
as many connections as it may hold, forgets its own tasks past its share, never those
of an agent of mcpd's own user or of a third user, however many that agent holds."""

from __future__ import annotations

import os

import pytest
from msgspec import Raw

from mcpd.agents.entry.shares import count_shares
from mcpd.agents.tasks.table import MAX_TASK_BYTES, Tasks
from mcpd.config.loading.load import parse_config
from mcpd.config.tables.model import DaemonConfig, NamingConfig
from mcpd.registry.tables.catalog import Catalog
from mcpd.servers.all_servers import AllServers
from mcpd.servers.shared import AgentKey, Whose
from mcpd.servers.supervisor import Supervisor

OTHER = 65534 if os.getuid() != 65534 else 65533
PAD = "p" * 480  # ids of about 485 bytes: the bytes' bound is passed before the count's


def _table() -> Tasks:
    catalog = Catalog(NamingConfig())
    config = parse_config({"servers": {"tk": {"command": "x"}}}, env={})
    return Tasks(AllServers(Supervisor(config, catalog), catalog), lambda: 8000, DaemonConfig)


def _make(table: Tasks, owner: AgentKey, whose: Whose, n: int) -> str:
    task_id = f"{id(owner)}-{n}-{PAD}"
    table.record(
        "tk", owner, Raw(b'{"resultType":"task","taskId":"%s"}' % task_id.encode()), whose=whose
    )
    return f"tk:{task_id}"


@pytest.mark.parametrize(
    "honest", [Whose(os.getuid(), 42, True), Whose(OTHER - 1, 43, False)], ids=["own", "third"]
)
def test_another_users_connections_forget_their_own_tasks_not_the_honest_agents(
    honest: Whose,
) -> None:
    table = _table()
    agent = AgentKey()
    first = _make(table, agent, honest, 0)
    for n in range(1, 40):
        _make(table, agent, honest, n)
    flood = Whose(OTHER, 7, False)
    connections = [AgentKey() for _ in range(63)]
    for n in range(34):
        for conn in connections:
            _make(table, conn, flood, n)
    assert table.owned(first, agent) == "tk"
    # The flood kept its share of the bytes (a quarter of all's by default), no more.
    share = count_shares(DaemonConfig(), MAX_TASK_BYTES).per_uid
    kept = len(table) - 40
    assert share - 4 * len(first) < kept * (len(first) - 3) <= share
