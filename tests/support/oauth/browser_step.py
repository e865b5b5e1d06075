"""The browser step of an OAuth login against an authorization server that approves
at once (the tests' own, the conformance suite's mock): where its authorization URL
redirects, which is what a person would paste back or a browser would follow."""

from __future__ import annotations

from urllib.parse import urljoin

from protocol.oauth import FetchPolicy, HttpRequest
from transports.http.oauth_client import OAuthHttp


async def follow_authorization(http: OAuthHttp, url: str, policy: FetchPolicy) -> str:
    response = await http.execute(HttpRequest("GET", url, (), b"", "authorization"), policy)
    location = response.header("location")
    assert 300 <= response.status < 400 and location, (
        f"the authorization endpoint answered HTTP {response.status} instead of redirecting"
    )
    return urljoin(url, location)
