from __future__ import annotations

import pytest

from protocol.oauth import BearerChallenge, ResourceMetadata, ScopeState, StepUpLimit
from protocol.oauth.metadata import AuthorizationServer, ServerMetadata
from protocol.oauth.scopes import adjust_offline_access, initial_scopes, scope_param

PRM = ResourceMetadata("https://m/mcp", ("https://a",), scopes_supported=("mcp:basic", "mcp:read"))


def _server(scopes: tuple[str, ...] | None) -> AuthorizationServer:
    return AuthorizationServer("https://a", ServerMetadata("https://a", scopes_supported=scopes))


def test_initial_scope_priority() -> None:
    assert initial_scopes(BearerChallenge(scope=("files:read",)), PRM) == ("files:read",)
    assert initial_scopes(BearerChallenge(), PRM) == ("mcp:basic", "mcp:read")
    assert initial_scopes(None, PRM) == ("mcp:basic", "mcp:read")
    assert initial_scopes(None, ResourceMetadata("https://m/mcp", ("https://a",))) is None
    assert initial_scopes(None, None) is None


def test_a_403s_scope_is_added_to_the_metadatas() -> None:
    lacking = BearerChallenge(scope=("mcp:admin",), error="insufficient_scope")
    assert initial_scopes(lacking, PRM) == ("mcp:basic", "mcp:read", "mcp:admin")
    assert initial_scopes(lacking, None) == ("mcp:admin",)


def test_offline_access_rules() -> None:
    both = _server(("mcp:basic", "offline_access"))
    assert adjust_offline_access(("mcp:basic",), both) == ("mcp:basic", "offline_access")
    assert adjust_offline_access(("mcp:basic",), both, want_refresh=False) == ("mcp:basic",)
    assert adjust_offline_access(None, both) is None  # scope stays omitted
    assert adjust_offline_access(("mcp:basic", "offline_access"), _server(("mcp:basic",))) == (
        "mcp:basic",
    )
    assert adjust_offline_access(("offline_access",), _server(("mcp:basic",))) is None
    # a server that lists no scopes at all: what the resource asked for stays
    assert adjust_offline_access(("a", "offline_access"), _server(None)) == ("a", "offline_access")


def test_scope_param() -> None:
    assert scope_param(None) is None
    assert scope_param(()) is None
    assert scope_param(("a", "b")) == "a b"


def test_step_up_unions_and_stops_after_the_limit() -> None:
    state = ScopeState().authorized(("mcp:basic",))
    challenge = BearerChallenge(scope=("mcp:write",), error="insufficient_scope")
    state, scopes = state.step_up(challenge)
    assert scopes == ("mcp:basic", "mcp:write")
    state = state.authorized(scopes)
    state, scopes = state.step_up(challenge)
    assert scopes == ("mcp:basic", "mcp:write") and state.step_ups == 2
    with pytest.raises(StepUpLimit, match="after 2 new authorization"):
        state.step_up(challenge)
    # a request that goes through again restarts the count
    state = state.succeeded()
    assert state.step_ups == 0
    state.step_up(challenge)


def test_step_up_limit_is_configurable() -> None:
    with pytest.raises(StepUpLimit):
        ScopeState().step_up(BearerChallenge(scope=("x",)), limit=0)
