"""The conformance suite's authorization scenarios (client side) with mcpd as the client.

Every ``auth/`` scenario ``conformance list`` names, in each protocol version it
lists for it (the extension scenarios in the suite's default, 2025-11-25), is run
against the daemon by ``conformance_driver.py`` (see ``tests.support.oauth.conformance``: logins
go through ``mcpd auth login`` with a scripted browser). Each check the harness
reports is compared, by id, with what is expected of mcpd; then what the scripted
user saw: how many logins it took, whether the tool call went through, and, for the
scenarios where refusing is right, the refusal's words.

The runs are independent processes, so they run side by side (``PARALLEL`` at a
time) once for the whole module; each test then looks at its own run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support.hosts.peers import node_env, node_tool
from tests.support.hosts.third_party import DRIVER, MODERN, Run, unexpected

pytestmark = pytest.mark.interop

PARALLEL = 4
RUN_TIMEOUT = 120
EXTENSION = "extension"
V0326, V0618, V1125 = "2025-03-26", "2025-06-18", "2025-11-25"

# Not done, and why (they are listed by `conformance list` too):
NOT_DONE = {
    "auth/dpop": "DPoP (RFC 9449) needs a proof JWT on the token request and on every MCP "
    "request, and the DPoP scheme instead of Bearer: a change to every HTTP message mcpd "
    "sends, not to the OAuth core; mcpd refuses DPoP-bound tokens with a clear message",
    "auth/dpop-nonce": "the same, plus the server-supplied nonce retries (use_dpop_nonce)",
    "auth/enterprise-managed-authorization": "needs an enterprise identity provider: an "
    "RFC 8693 token exchange for an ID-JAG, then an RFC 7523 JWT-bearer grant; mcpd has "
    "no configuration for an IdP relationship",
    "auth/wif-jwt-bearer": "workload identity federation needs a source of platform "
    "workload tokens (Kubernetes projected tokens, cloud metadata), which is "
    "deployment-specific; mcpd has none",
}

# What an authorization code login is checked for, and the parts some scenarios add.
FLOW = {
    "authorization-server-metadata",
    "authorization-request",
    "pkce-code-challenge-sent",
    "pkce-s256-method-used",
    "token-request",
    "pkce-code-verifier-sent",
    "pkce-verifier-matches-challenge",
    "valid-bearer-token",
}
PRM = {"prm-pathbased-requested"}
DCR = {"client-registration"}
# Only at 2026-07-28: registration must say application_type.
DCR_MODERN = {"sep-837-application-type-present"}
RESOURCE = {
    "resource-parameter-in-authorization",
    "resource-parameter-in-token",
    "resource-parameter-valid-uri",
    "resource-parameter-consistency",
    "resource-parameter-matches-prm",
}
REFUSED_AT_REDIRECT = {
    "authorization-server-metadata",
    "authorization-request",
    "pkce-code-challenge-sent",
    "pkce-s256-method-used",
    *PRM,
    *DCR,
}
CLIENT_CREDENTIALS = {"authorization-server-metadata", "token-request", "valid-bearer-token"}

# scenario -> (versions, the checks expected SUCCESS, whether registration is by DCR)
SCENARIOS: dict[str, tuple[tuple[str, ...], set[str], bool]] = {
    "auth/metadata-default": ((V1125, MODERN), FLOW | PRM | DCR | RESOURCE, True),
    "auth/metadata-var1": ((V1125, MODERN), FLOW | PRM | DCR | RESOURCE, True),
    "auth/metadata-var2": ((V1125, MODERN), FLOW | PRM | DCR | RESOURCE, True),
    "auth/metadata-var3": ((V1125, MODERN), FLOW | PRM | DCR | RESOURCE, True),
    "auth/basic-cimd": ((V1125, MODERN), FLOW | PRM | {"cimd-client-id-used"}, False),
    "auth/scope-from-www-authenticate": (
        (V1125, MODERN),
        FLOW | PRM | DCR | {"scope-from-www-authenticate"},
        True,
    ),
    "auth/scope-from-scopes-supported": (
        (V1125, MODERN),
        FLOW | PRM | DCR | {"scope-from-scopes-supported"},
        True,
    ),
    "auth/scope-omitted-when-undefined": (
        (V1125, MODERN),
        FLOW | PRM | DCR | {"scope-omitted-when-undefined"},
        True,
    ),
    "auth/scope-step-up": (
        (V1125, MODERN),
        FLOW | PRM | DCR | {"scope-step-up-initial", "scope-step-up-escalation"},
        True,
    ),
    "auth/scope-retry-limit": (
        (V1125, MODERN),
        (FLOW - {"valid-bearer-token"}) | PRM | DCR | {"scope-retry-limit"},
        True,
    ),
    "auth/token-endpoint-auth-basic": (
        (V0618, V1125, MODERN),
        FLOW | PRM | DCR | RESOURCE | {"token-endpoint-auth-method"},
        True,
    ),
    "auth/token-endpoint-auth-post": (
        (V0618, V1125, MODERN),
        FLOW | PRM | DCR | RESOURCE | {"token-endpoint-auth-method"},
        True,
    ),
    "auth/token-endpoint-auth-none": (
        (V0618, V1125, MODERN),
        FLOW | PRM | DCR | RESOURCE | {"token-endpoint-auth-method"},
        True,
    ),
    "auth/pre-registration": ((V1125, MODERN), FLOW | PRM | {"pre-registration-auth"}, False),
    "auth/2025-03-26-oauth-metadata-backcompat": ((V0326,), FLOW | DCR, True),
    "auth/2025-03-26-oauth-endpoint-fallback": (
        (V0326,),
        {"authorization-request", "token-request", "valid-bearer-token", *DCR},
        True,
    ),
    "auth/resource-mismatch": ((MODERN,), PRM | {"resource-mismatch-rejected"}, False),
    "auth/offline-access-scope": (
        (MODERN,),
        FLOW | PRM | {"sep-2207-offline-access-requested"},
        False,
    ),
    "auth/offline-access-not-supported": (
        (MODERN,),
        FLOW | PRM | DCR | {"sep-2207-offline-access-not-requested"},
        True,
    ),
    "auth/authorization-server-migration": (
        (MODERN,),
        FLOW
        | PRM
        | DCR
        | {
            "sep-2352-reregister-on-as-change",
            "sep-2352-no-reuse-on-as-change",
            "sep-2352-no-cross-as-credential-reuse",
        },
        True,
    ),
    "auth/iss-supported": (
        (MODERN,),
        FLOW | PRM | DCR | {"sep-2468-client-compare-iss-supported"},
        True,
    ),
    "auth/iss-not-advertised": (
        (MODERN,),
        FLOW | PRM | DCR | {"sep-2468-client-proceed-no-iss"},
        True,
    ),
    "auth/iss-supported-missing": (
        (MODERN,),
        REFUSED_AT_REDIRECT | {"sep-2468-client-reject-missing-iss"},
        True,
    ),
    "auth/iss-wrong-issuer": (
        (MODERN,),
        REFUSED_AT_REDIRECT | {"sep-2468-client-compare-iss-supported"},
        True,
    ),
    "auth/iss-unexpected": (
        (MODERN,),
        REFUSED_AT_REDIRECT | {"sep-2468-client-compare-iss-unadvertised"},
        True,
    ),
    "auth/iss-normalized": (
        (MODERN,),
        REFUSED_AT_REDIRECT | {"sep-2468-client-no-normalization"},
        True,
    ),
    "auth/metadata-issuer-mismatch": (
        (MODERN,),
        PRM | {"authorization-server-metadata", "sep-2468-client-validate-metadata-issuer"},
        False,
    ),
    "auth/client-credentials-basic": (
        (EXTENSION,),
        CLIENT_CREDENTIALS | PRM | {"client-credentials-basic-auth"},
        False,
    ),
    "auth/client-credentials-jwt": (
        (EXTENSION,),
        CLIENT_CREDENTIALS | PRM | {"client-credentials-jwt-verified"},
        False,
    ),
}


def expected_checks(scenario: str, version: str) -> dict[str, str]:
    _, checks, dcr = SCENARIOS[scenario]
    if dcr and version == MODERN:
        checks = checks | DCR_MODERN
    if scenario == "auth/scope-step-up" and version == MODERN:
        checks = checks | {"sep-2350-scope-union-on-reauth"}  # keep earlier scopes
    return dict.fromkeys(checks, "SUCCESS")


# What the scripted user ends with: (logins, whether the call went through, refusal words).
REFUSALS = {
    "auth/resource-mismatch": 'is for the resource "https://evil.example.com/mcp"',
    "auth/metadata-issuer-mismatch": 'declares the issuer "https://attacker.example.com"',
    "auth/iss-supported-missing": "the authorization response has no iss",
    "auth/iss-wrong-issuer": 'comes from issuer "https://evil.example.com"',
    "auth/iss-unexpected": 'comes from issuer "https://evil.example.com"',
    "auth/iss-normalized": "the response is discarded (RFC 9207)",
}
LOGINS = {
    "auth/scope-step-up": 2,  # the 403 for mcp:write asks for a second login
    "auth/authorization-server-migration": 2,  # a new authorization server: log in there
    "auth/scope-retry-limit": 3,  # then mcpd stops asking
    "auth/client-credentials-basic": 0,
    "auth/client-credentials-jwt": 0,
}

RUNS = [(s, v) for s, (versions, _, _) in SCENARIOS.items() for v in versions]


def run_one(scenario: str, version: str, out_dir: Path) -> Run:
    argv = [node_tool("conformance"), "client", "--command", f"{sys.executable} {DRIVER}"]
    argv += ["--scenario", scenario, "-o", str(out_dir)]
    if version != EXTENSION:
        argv += ["--spec-version", version]
    proc = subprocess.run(
        argv,
        env={**os.environ, **node_env()},
        capture_output=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    return Run(proc.returncode, out_dir, (proc.stdout + proc.stderr).decode("utf-8", "replace"))


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every selected run of this module, side by side, once."""
    node_tool("conformance")  # skips when the peers are not installed
    wanted = sorted(
        {
            (item.callspec.params["scenario"], item.callspec.params["version"])
            for item in request.session.items
            if item.module is request.module and hasattr(item, "callspec")
        }
    )
    base = tmp_path_factory.mktemp("conformance-auth")

    def one(run: tuple[str, str]) -> tuple[tuple[str, str], Run | BaseException]:
        out = base / f"{run[0].replace('/', '_')}@{run[1]}"
        try:
            return run, run_one(*run, out)
        except BaseException as exc:  # reported by the test of that run
            return run, exc

    with ThreadPoolExecutor(PARALLEL) as pool:
        return dict(pool.map(one, wanted))


def test_every_auth_scenario_of_the_suite_is_run_or_said_why_not() -> None:
    listed = subprocess.run(
        [node_tool("conformance"), "list"],
        env={**os.environ, **node_env()},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    versions = {}
    for line in listed.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "-" and parts[1].startswith("auth/"):
            versions[parts[1]] = tuple(parts[2].strip("[]").split(","))
    assert versions.keys() == SCENARIOS.keys() | NOT_DONE.keys()
    # In every version the suite lists for each scenario.
    assert {s: SCENARIOS[s][0] for s in SCENARIOS} == {s: versions[s] for s in SCENARIOS}


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("scenario", "version"), RUNS, ids=[f"{s}@{v}" for s, v in RUNS])
def test_auth_scenario(scenario: str, version: str, runs: dict[Any, Any]) -> None:
    run = runs[(scenario, version)]
    if isinstance(run, BaseException):
        raise run
    assert unexpected(run.checks, expected_checks(scenario, version)) == {}, run.log
    assert run.returncode == 0, run.log
    summary = run.summary
    logins = summary["logins"]
    assert len(logins) == LOGINS.get(scenario, 1), summary
    server = summary["server"]
    refusal = REFUSALS.get(scenario)
    if refusal is not None:
        # Refusing is right: the login fails with the reason, and no token is used.
        assert summary["ok"] is False and summary["calls"] == []
        assert logins[-1]["exit"] == 1 and refusal in logins[-1]["said"][0], logins
        assert server["state"] == "needs_login"
        return
    if scenario == "auth/scope-retry-limit":
        # What the last login told the person, as it ended: the status row read after it
        # may already hold a later reconnection's error.
        assert summary["ok"] is False
        assert (
            "still refuses for insufficient scope after 2 new authorization(s)"
            in logins[-1]["said"][0]
        ), run.log
        return
    assert summary["ok"] is True, summary
    # The version flag shapes the authorization side; below 2026-07-28 the MCP server
    # itself is the TS SDK's, which answers the handshake with the newest it has.
    wire = MODERN if version == MODERN else V1125
    era = "modern" if wire == MODERN else "legacy"
    assert (server["state"], server["era"], server["protocol_version"]) == ("ready", era, wire)
    assert summary["calls"][-1] == {"tool": "test-tool", "isError": False, "text": "test"}
