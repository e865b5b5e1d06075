"""No token, secret, code, verifier or key shows up in a repr, a str or an error
message, whatever mcpd logs or shows."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from protocol.oauth import (
    AuthorizationFlow,
    ClientConfig,
    FetchPolicy,
    FlowConfig,
    HttpResponse,
    OAuthError,
    OpenBrowser,
    Secret,
    SendRequest,
    TokenSet,
    load_signing_key,
)
from tests.support.oauth.fake import FakeWorld, counter_random

MARK = "SeCrEt"
KEY = '{"kty":"EC","crv":"P-256","d":"' + "AQ" + '"}'


def _world() -> FakeWorld:
    world = FakeWorld()
    world.metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    world.registration = {"client_id": "c", "client_secret": f"{MARK}-client-secret"}
    world.token = {
        "access_token": f"{MARK}-access",
        "token_type": "Bearer",
        "refresh_token": f"{MARK}-refresh",
        "expires_in": 60,
    }
    return world


def _shown(objects: list[Any]) -> str:
    return "\n".join(f"{o!r}\n{o!s}" for o in objects)


def test_nothing_secret_in_what_a_whole_flow_produces() -> None:
    world = _world()
    seen: list[Any] = []
    flow = AuthorizationFlow(
        FlowConfig(
            "https://mcp.example.com/mcp",
            client=ClientConfig(signing_key=load_signing_key(KEY)),
            redirect_uri="http://127.0.0.1:1/cb",
        ),
        policy=FetchPolicy(),
        now=0.0,
        random=counter_random(),
    )
    for _ in range(20):
        action = flow.next_action()
        seen.append(action)
        if isinstance(action, SendRequest):
            seen.append(action.request)
            response = world.handle(action.request)
            seen.append(response)
            flow.receive_response(response, 0.0)
        elif isinstance(action, OpenBrowser):
            seen.append(flow.pending)
            redirect = world.authorize(action.url).replace("code-1", f"{MARK}-code")
            flow.receive_redirect(redirect, 0.0)
        else:
            seen.extend([action.result, action.result.tokens, action.result.registration])
            break
    seen.append(flow.discovery)
    text = _shown(seen)
    assert MARK not in text
    # the secrets were there to leak: they went on the wire
    assert any(MARK.encode() in r.body for r in world.requests)
    token_request = world.requests[-1]
    assert token_request.header("authorization") is not None
    assert "Basic" not in repr(token_request) and "authorization" in repr(token_request).lower()


def test_wrapped_values() -> None:
    secret = Secret(f"{MARK}-1")
    assert MARK not in repr(secret) + str(secret) + f"{secret}" + repr([secret])
    assert MARK not in repr(load_signing_key(KEY))
    tokens = TokenSet(Secret(f"{MARK}-a"), refresh_token=Secret(f"{MARK}-r"))
    assert MARK not in repr(tokens) + str(msgspec.structs.asdict(tokens))
    config = ClientConfig(client_id="c", client_secret=Secret(f"{MARK}-s"))
    assert MARK not in repr(config)
    # serializing without the store's hook fails instead of writing secrets anywhere
    with pytest.raises(TypeError):
        msgspec.json.encode(tokens)


def _failure(world: FakeWorld, redirect_edit: Any = None) -> OAuthError:
    flow = AuthorizationFlow(
        FlowConfig("https://mcp.example.com/mcp", redirect_uri="http://127.0.0.1:1/cb"),
        policy=FetchPolicy(),
        now=0.0,
    )
    try:
        for _ in range(20):
            action = flow.next_action()
            if isinstance(action, SendRequest):
                flow.receive_response(world.handle(action.request), 0.0)
            elif isinstance(action, OpenBrowser):
                redirect = world.authorize(action.url).replace("code-1", f"{MARK}-code")
                flow.receive_redirect(redirect_edit(redirect) if redirect_edit else redirect, 0.0)
    except OAuthError as exc:
        return exc
    raise AssertionError("no failure")


@pytest.mark.parametrize(
    "case",
    ["token-body", "token-status", "bad-redirect", "wrong-iss", "registration"],
)
def test_error_messages_do_not_carry_secrets(case: str) -> None:
    world = _world()
    edit = None
    if case == "token-body":
        world.token = {
            "access_token": f"{MARK}-a",
            "token_type": "MAC",
            "refresh_token": f"{MARK}-r",
        }
    elif case == "token-status":
        world.token = {"access_token": f"{MARK}-a", "refresh_token": f"{MARK}-r"}
        world.token_status = 500
    elif case == "bad-redirect":
        edit = lambda url: url.replace("127.0.0.1:1/cb", "127.0.0.1:2/cb")  # noqa: E731
    elif case == "wrong-iss":
        world.iss_mode = "wrong"
    elif case == "registration":
        world.extra[("POST", "https://auth.example.com/register")] = lambda r: HttpResponse(
            400, (("content-type", "text/plain"),), f"{MARK} in a page".encode()
        )
    error = _failure(world, edit)
    assert MARK not in str(error) and MARK not in repr(error)
    assert MARK not in json.dumps([str(a) for a in error.args])


def test_a_token_response_that_is_not_json_is_not_quoted() -> None:
    world = _world()
    world.extra[("POST", "https://auth.example.com/token")] = lambda r: HttpResponse(
        200, (("content-type", "text/plain"),), f"access_token={MARK}".encode()
    )
    error = _failure(world)
    assert "not JSON" in str(error) and MARK not in str(error)
