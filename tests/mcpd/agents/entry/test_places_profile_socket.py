"""However many connections an agent of the daemon's own user opens on a profile's
socket, in a running daemon, the operator's commands still get in on the daemon's own
socket: the places kept for its user and root are kept there."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from mcpd.agents.entry.places import OWNER_RESERVE
from tests.support.cli.on_socket import mcpd
from tests.support.clients.agent import connect
from tests.support.daemons.policy import LIMIT, policy_daemon

NARROW = {"servers": ["gh"], "tools": {"allow": ["read_repo"]}}


async def test_a_profile_socket_cannot_take_the_places_kept_for_the_operator(
    tmp_path: Path,
) -> None:
    most = 4
    narrow_sock = tmp_path / "narrow.sock"
    narrow = {**NARROW, "socket": str(narrow_sock)}
    keys = {"max_connections": most}
    with trio.fail_after(LIMIT):
        async with policy_daemon(tmp_path, daemon_keys=keys, narrow=narrow) as setup:
            held: list[trio.SocketStream] = []
            refused: list[bytes] = []
            try:
                # An agent of the daemon's own user opens all it can on the profile's
                # socket, each kept open with a ping.
                for _ in range(most + OWNER_RESERVE + 2):
                    stream = await trio.open_unix_socket(str(narrow_sock))
                    await stream.send_all(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
                    answer = await stream.receive_some(4096)
                    if b'"result"' in answer:
                        held.append(stream)
                    else:
                        refused.append(answer)
                        await stream.aclose()
                # The operator's commands still get in on the daemon's own socket.
                status = json.loads(await mcpd(Path(setup.daemon.socket_path), "status", "--json"))
                assert [s["alias"] for s in status["servers"]] == ["gh"]
                async with connect(setup.daemon.socket_path) as operator:
                    assert (await operator.result("mcpd/approvals/list"))["approvals"] == []
                # The profile's socket held everyone's places, and no more.
                assert len(held) == most
                assert b"are on mcpd's own socket, not a profile's" in refused[0]
            finally:
                for stream in held:
                    await stream.aclose()
