"""What a logout, or a login that replaced another, did with the tokens it gave up, in
the words ``mcpd auth`` prints: which the server revoked, which it does not revoke (they
end when they expire), why revoking stopped short and which tokens stay valid."""

from __future__ import annotations

from protocol.shown.server_urls import ascii_hosts
from protocol.shown.visible import visible

from ...login_answers import LoggedOut, TokensReplaced

_FORGOT = (
    "the client mcpd registered with its authorization server is forgotten, "
    "and the next login registers a new one"
)


_TOKEN_NAMES = {"refresh_token": "refresh token", "access_token": "access token"}


def _tokens(hints: list[str]) -> str:
    return " and the ".join(_TOKEN_NAMES.get(h, visible(h)) for h in hints)


def logout_said(out: LoggedOut) -> str:
    """What a logout did, in a sentence: the tokens revoked, those of a kind the server
    does not revoke (they end when they expire), why revoking stopped short, and
    whether the client mcpd registered was forgotten."""
    said = _revocation_said(out) if out.had_tokens else "was not logged in"
    return said + ("; " + _FORGOT if out.forgot_client else "")


def replaced_said(out: TokensReplaced) -> str:
    """What became of the tokens of the login a new one replaced, in a sentence."""
    return _revocation_said(out, "replaced the earlier login")


def _revocation_said(out: LoggedOut | TokensReplaced, done: str = "logged out") -> str:
    revoked, kept = out.revoked, out.not_revocable
    if out.problem:
        problem = ascii_hosts(visible(out.problem))
        if revoked:
            said = (
                f"{done}; the server revoked the {_tokens(revoked)}, but revoking the "
                f"rest failed: {problem}"
            )
        else:
            said = f"{done}; revoking the tokens failed: {problem}"
        return said + _still_valid(out.unrevoked)
    if kept:
        what = f"the server revoked the {_tokens(revoked)}" if revoked else "nothing was revoked"
        ends = "which ends when it expires" if len(kept) == 1 else "which end when they expire"
        return f"{done}; {what} (the server does not revoke the {_tokens(kept)}, {ends})"
    if revoked:
        return f"{done}; the server revoked the tokens"
    return f"{done} (the server offers no revocation)"


def _still_valid(hints: list[str]) -> str:
    """The tokens a logout could not revoke, which the authorization server still honours."""
    if not hints:
        return ""
    if len(hints) == 1:
        return f"; the {_tokens(hints)} stays valid at the authorization server until it expires"
    return f"; the {_tokens(hints)} stay valid at the authorization server until they expire"
