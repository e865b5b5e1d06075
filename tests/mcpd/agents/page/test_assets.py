"""The page's own style and script, and the headers that let the browser run nothing
else: the Content-Security-Policy admits exactly the inlined script and style by their
digests (no inline handler, no other source, no frame, no form to another origin), and
the page can be neither framed, sniffed, cached nor told where it was opened from."""

from __future__ import annotations

import base64
import hashlib
import re

from mcpd.agents.page.assets import CSP, ICON, SCRIPT, SECURITY_HEADERS, STREAM_HEADERS, STYLE


def digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def directives() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in CSP.split(";"):
        name, *values = part.split()
        assert name not in out, name
        out[name] = values
    return out


def test_the_policy_admits_the_pages_own_script_and_style_only() -> None:
    d = directives()
    assert d["default-src"] == ["'none'"]
    assert d["script-src"] == [digest(SCRIPT)]
    assert d["style-src"] == [digest(STYLE)]
    assert d["connect-src"] == ["'self'"] and d["form-action"] == ["'self'"]
    assert d["frame-ancestors"] == ["'none'"] and d["base-uri"] == ["'none'"]
    assert d["img-src"] == ["data:"]  # the icon, drawn inline
    assert ICON.startswith("data:image/svg+xml,")
    assert "unsafe" not in CSP and "*" not in CSP and "http" not in CSP


def test_the_script_writes_words_of_its_own_as_text() -> None:
    """What the script writes itself (a reply's message or error, a login's link) goes
    in as text; only the regions the daemon drew and escaped are set as HTML."""
    assert re.findall(r"\.innerHTML\s*=\s*(\w+)", SCRIPT) == ["html"]
    assert "eval(" not in SCRIPT and "document.write" not in SCRIPT
    assert "out.textContent = body.message" in SCRIPT


def test_every_answer_carries_the_security_headers() -> None:
    headers = dict(SECURITY_HEADERS)
    assert len(headers) == len(SECURITY_HEADERS)
    assert headers[b"content-security-policy"] == CSP.encode()
    assert headers[b"x-frame-options"] == b"DENY"
    assert headers[b"x-content-type-options"] == b"nosniff"
    assert headers[b"referrer-policy"] == b"no-referrer"
    assert headers[b"cache-control"] == b"no-store"
    # The live stream keeps all of them but the cache's, which it says itself.
    assert dict(STREAM_HEADERS) == {k: v for k, v in headers.items() if k != b"cache-control"}
