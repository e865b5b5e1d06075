"""The secrets held while mcpd runs: the endpoint's token is guarded once handed out,
a new one as soon as it is, and the guard is asked to look again only then."""

from __future__ import annotations

from pathlib import Path

from mcpd.local.state.endpoint_token import TokenFile, new_token, write_token
from mcpd.registry.tables.catalog import Catalog
from mcpd.runtime_secrets import RuntimeSecrets
from mcpd.servers.supervisor import Supervisor
from tests.support.clients.agent import make_config


def test_the_endpoints_token_is_held_once_handed_out_and_a_new_one_as_it_is(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "token")
    first = new_token()
    write_token(path, first)
    refreshed: list[str] = []
    config = make_config(tmp_path, {})
    supervisor = Supervisor(config, Catalog(config.naming))  # no server runs: no OAuth
    secrets = RuntimeSecrets(TokenFile(path), supervisor, lambda: refreshed.append("again"))
    assert secrets.held_now() == []  # not handed out: nothing to guard yet
    assert secrets.http_token() == first
    assert [h.value for h in secrets.held_now()] == [first]
    assert secrets.http_token() == first and refreshed == ["again"]  # the same token
    second = new_token()
    write_token(path, second)
    assert secrets.http_token() == second
    assert [h.value for h in secrets.held_now()] == [second] and len(refreshed) == 2
