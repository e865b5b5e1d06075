"""What an agent is told of an ``input_required`` it cannot answer.

An agent that did not declare what a server's requests need (most agents declare
nothing) gets an error in mcpd's words instead: which server asked, and for what. What
it asked for is the server's own text, each request's key and method and message,
which the model reads inside mcpd's sentence. So each is quoted as mcpd quotes a
server's words (``visible.quote``: one line between quotes, every hidden or control
character escaped, cut with mcpd's note), a few requests are named and the rest only
counted, and the names together stay within the result budget: a server can neither
write a line that reads as mcpd's nor make the error any length. The result's
``_meta`` (``mcpd/inputRequired``) names the same few requests, for a host's code,
keys made visible and cut likewise.
"""

from __future__ import annotations

from typing import Final

from protocol.mcp import features
from protocol.shown.visible import METHOD_SHOWN, cut, quote, visible

META_KEY: Final = "mcpd/inputRequired"
# Requests named at most: enough to say what the server wanted, however many it sent.
NAMED: Final = 5


def unanswered_text(alias: str, requests: object, budget: int) -> str:
    """mcpd's sentence for an ``input_required`` with ``requests`` that the agent cannot
    answer; what it names of them stays within ``budget`` characters."""
    asks = requests if isinstance(requests, dict) else {}
    named: list[str] = []
    room = budget
    for key, request in asks.items():
        if len(named) == NAMED:
            break
        part = _named(key, request)
        if len(part) > room:
            break
        named.append(part)
        room -= len(part) + 2
    rest = len(asks) - len(named)
    if not asks:
        what = "more input before it can finish."
    elif not named:
        what = f"input before it can finish ({_requests(rest)})."
    else:
        more = f"; and {rest:,} more" if rest else ""
        what = "input before it can finish: " + "; ".join(named) + more + "."
    return (
        f"The tool server {alias!r} asked for {what} This client did not declare the "
        "capabilities to provide it (for an elicitation, its mode), so the call did not "
        "complete."
    )


def asked(requests: object) -> dict[str, dict[str, str]]:
    """The few requests ``unanswered_text`` may name, as ``_meta`` tells a host's code
    of them: each key made visible and cut, with its method."""
    asks = requests if isinstance(requests, dict) else {}
    out: dict[str, dict[str, str]] = {}
    for key, request in asks.items():
        if len(out) == NAMED:
            break
        method = request.get("method") if isinstance(request, dict) else None
        shown = {"method": cut(visible(method), METHOD_SHOWN)} if isinstance(method, str) else {}
        out[cut(visible(key), METHOD_SHOWN)] = shown
    return out


def _named(key: str, request: object) -> str:
    """One request as the sentence names it: its key, its method and its message."""
    method = request.get("method") if isinstance(request, dict) else None
    params = request.get("params") if isinstance(request, dict) else None
    message = params.get("message") if isinstance(params, dict) else None
    # A method mcpd knows is a word of its own; any other is the server's.
    if not isinstance(method, str):
        what = "no method"
    elif features.needs(method) is not None:
        what = method
    else:
        what = quote(method, METHOD_SHOWN)
    if isinstance(message, str) and message:
        what += ": " + quote(message)
    return f"{quote(key, METHOD_SHOWN)} ({what})"


def _requests(count: int) -> str:
    return f"{count:,} request" + ("s" if count != 1 else "")
