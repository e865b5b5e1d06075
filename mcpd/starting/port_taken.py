"""What mcpd says, and does, when the HTTP endpoint's port is taken as it starts.

Hosts set up with ``mcpd connect --http`` send the endpoint's bearer token with every
request, to whatever listens on the port; HTTP gives them no way to tell who that is.
So while mcpd is down, another local user who listens there first is sent the token
by every host that tries to reach mcpd. mcpd cannot tell whether any did, so it takes
the token as known: it replaces it before it exits, as it replaces a token file that
others could read (``endpoint_token.renew_exposed``), and says so. The hosts then need
the new token; until they have it, they are refused, which they notice, where a token
left in another user's hands would be used unnoticed. The port held by mcpd's own user
or root (another mcpd, a program of theirs) is only named. Where sockets of several
users may be the one a host reaches, mcpd cannot tell which a host reached, so another
user's among them counts.
"""

from __future__ import annotations

from protocol.linux.proctcp import IP

from ..local.ownership.owners import trusted_owners, user_name
from ..local.ownership.portholder import port_holder, port_holders, process_name
from ..local.state.endpoint_token import TokenError, stored_token, write_token


def taken_by(ip: IP, port: int, token_file: str | None) -> str:
    """Who listens on ``port`` at ``ip``, in words to add to the error; for another
    user, the token in ``token_file`` replaced, and said so ("": nobody is named)."""
    held = port_holders(ip, port)
    if not held:
        return ""
    trusted = trusted_owners()
    holder = port_holder(next((each for each in held if each.uid not in trusted), held[0]))
    seen = [f"process {pid} ({process_name(pid) or 'gone since'})" for pid in holder.pids]
    who = f"uid {holder.uid} ({user_name(holder.uid)})"
    where = ", ".join(seen) or "a process mcpd cannot see"
    if holder.uid in trusted:
        return f"; {who} listens on it: {where}"
    return f"; another user, {who}, listens on it ({where}). {_token_replaced(token_file)}"


def _token_replaced(token_file: str | None) -> str:
    sent = (
        "Hosts set up with `mcpd connect --http` send the endpoint's token with every "
        "request, and any that tried to reach mcpd sent it there"
    )
    if token_file is None:
        return f"{sent}: `mcpd token --rotate` ends it"
    try:
        if not stored_token(token_file):
            return "No endpoint token had been made yet, so no host had one to send there"
        write_token(token_file)
    except TokenError as exc:
        return f"{sent}; it could not be replaced ({exc}): `mcpd token --rotate` ends it"
    return (
        f"{sent}, so mcpd replaced it in {token_file}, as `mcpd token --rotate` does: give "
        "the hosts the new one (`mcpd connect --http` again)"
    )
