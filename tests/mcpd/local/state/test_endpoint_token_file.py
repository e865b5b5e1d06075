"""The HTTP endpoint's token file: created private and re-read when replaced; and what
the endpoint's checks answer. Who may own it: ``test_owners_files``."""

from __future__ import annotations

import stat
from pathlib import Path

import h11
import msgspec
import pytest

from mcpd.agents.http.tcp import guard, own_origins
from mcpd.agents.http.wire import Reject
from mcpd.local.state.endpoint_token import TokenError, TokenFile, read_token, write_token
from tests.support.system.private_files import request


def test_created_private_read_back_and_rotated(tmp_path: Path) -> None:
    path = tmp_path / "state" / "token"
    first = read_token(str(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) == 43
    assert read_token(str(path)) == first
    watched = TokenFile(str(path))
    assert watched.current() == first
    second = write_token(str(path))
    assert second != first and watched.current() == second
    assert list(path.parent.iterdir()) == [path]  # no temporary file left
    with pytest.raises(TokenError, match="mcpd token"):
        read_token(str(tmp_path / "none"), create=False)


def refusal(check: object, req: h11.Request) -> tuple[int, str]:
    with pytest.raises(Reject) as info:
        check(req)  # type: ignore[operator]
    body = msgspec.json.decode(info.value.body)
    return info.value.status, body["error"]["message"]


def test_the_endpoints_checks() -> None:
    own = frozenset({"127.0.0.1", "[::1]", "localhost"})
    check = guard(lambda: "t0k", own_origins(own, 8765, ["https://app.example"]))
    check(request(Authorization="Bearer t0k"))
    check(request(Authorization="bearer t0k", Origin="http://localhost:8765"))
    check(request(Authorization="Bearer t0k", Origin="https://app.example"))
    assert refusal(check, request())[0] == 401
    assert refusal(check, request(Authorization="Basic t0k"))[0] == 401
    assert refusal(check, request(Authorization="Bearer t0"))[0] == 401
    status, message = refusal(check, request(Authorization="Bearer t0k", Origin="null"))
    assert status == 403 and "'null'" in message
    assert refusal(check, request(Origin="http://127.0.0.1:9999"))[0] == 403  # Origin first

    def broken() -> str:
        raise TokenError("cannot read the token in /x: permission denied")

    status, message = refusal(guard(broken, frozenset()), request(Authorization="Bearer x"))
    assert status == 503 and "permission denied" in message
