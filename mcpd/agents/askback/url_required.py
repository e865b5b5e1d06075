"""A legacy server's -32042 (URL elicitation required) as each agent can take it.

A legacy (2025-11-25) server may answer a call with -32042: the user must open a link
(to sign in, to pay) before the call can go on, and the error's data names each link.
mcpd declares URL elicitation to legacy servers for all its agents, but only some can
take such an error:

- a legacy agent that declared URL elicitation gets it as its server sent it (marked
  with the server, as the server's errors are): its era's own way of asking;
- a 2026-07-28 agent that declared it, where the code is retired, gets the same ask in
  its era's way: an ``input_required`` whose requests are URL elicitations, cleaned
  and marked with the server as any server's elicitation is; its retry is the call's
  next round, which the legacy server gets as the same call again (it is never sent
  ``inputResponses``);
- any other agent gets mcpd's own error (a call's error result; a ``prompts/get``'s or
  ``resources/read``'s -32021, naming the capability), which names the server and says
  that it wants the user to open a link. The link itself is left out: it is a server's text,
  meant for a person to see whole and choose to open, and this agent has told mcpd it
  shows its user no such links, so it would only reach a model. mcpd's journal has it,
  quoted whole, for the person who runs mcpd.

A link named again (the same id and URL) is asked and logged once, and only the first
few distinct links of an error are: the journal says how many more were left out.
"""

from __future__ import annotations

import logging
from typing import Final

import msgspec
from msgspec import UNSET, Raw, UnsetType

from protocol.jsonrpc import messages as rpc
from protocol.mcp import core as mcp
from protocol.mcp import features
from protocol.shown.logfields import log_extra
from protocol.shown.visible import quote

from ...registry.text.relayed import cleaned, marked_params
from ..agent import AgentCall

logger = logging.getLogger("mcpd.askback")

URL_ELICITATION_REQUIRED: Final = -32042
_ELICIT: Final = "elicitation/create"
_URL_MODE: Final = {"mode": "url"}
# How much of a link the journal shows: more than any sign-in or payment link needs.
LINK_SHOWN: Final = 8192
# How many links of one error are asked or logged: a person opens a few, not more.
MAX_LINKS: Final = 8


class _Link(msgspec.Struct):
    url: str
    message: str = ""
    elicitationId: str | UnsetType = UNSET
    mode: str = "url"


class _Asked(msgspec.Struct):
    elicitations: list[_Link]


def for_call(call: AgentCall, exc: rpc.RPCError) -> rpc.RPCError | Raw | mcp.CallToolResult:
    """``exc`` (the error ``call``'s server answered with, made fit and marked) as
    ``call``'s agent gets it: itself, unless it is a -32042 that agent cannot take."""
    got = _taken(call.out.alias, exc, call.modern, call.out.ctx.capabilities, "this call")
    if isinstance(got, _Untaken):
        return mcp.CallToolResult(content=[mcp.TextContent(got.words)], isError=True)
    return got


def for_request(
    alias: str, exc: rpc.RPCError, modern: bool, capabilities: rpc.JsonObject | None
) -> rpc.RPCError | Raw:
    """``for_call`` for a ``prompts/get`` or ``resources/read`` of an agent (``modern``,
    that declared ``capabilities``): what it cannot take is mcpd's error, -32021 where it
    did not declare URL elicitation."""
    got = _taken(alias, exc, modern, capabilities, "this request")
    if not isinstance(got, _Untaken):
        return got
    if got.declared:
        return rpc.RPCError(rpc.INTERNAL_ERROR, got.words)
    return rpc.RPCError(rpc.MISSING_REQUIRED_CLIENT_CAPABILITY, got.words, _NEEDED)


class _Untaken(msgspec.Struct, frozen=True):
    """mcpd's words for an ask to open a link an agent cannot be handed."""

    words: str
    declared: bool  # the agent declared URL elicitation, but no link could be read


_NEEDED: Final[rpc.JsonObject] = {"requiredCapabilities": {"elicitation": {"url": {}}}}


def _taken(
    alias: str,
    exc: rpc.RPCError,
    modern: bool,
    capabilities: rpc.JsonObject | None,
    what: str,
) -> rpc.RPCError | Raw | _Untaken:
    if exc.code != URL_ELICITATION_REQUIRED:
        return exc
    declared = features.declares(capabilities, _ELICIT, _URL_MODE)
    if declared and not modern:
        return exc
    links, left_out = _bounded(_links(exc.data))
    for link in links:
        # Whole (to a bound no honest link comes near): the person who runs mcpd is
        # sent here for it, and a cut link cannot be opened.
        logger.info(
            "%s: asks the user of an agent to open %s (a URL elicitation)",
            alias,
            quote(link.url, LINK_SHOWN),
            extra=log_extra(alias, "url_elicitation"),
        )
    if left_out:
        logger.warning(
            "%s: named %d more links to open (URL elicitations) in the same error; "
            "left out, as no person opens that many at once",
            alias,
            left_out,
            extra=log_extra(alias, "url_elicitation"),
        )
    if declared and links:
        return _input_required(alias, links)
    words = (
        f"The server {alias!r} needs the user to open a link it gave and finish a step "
        f"there (a URL elicitation, such as a sign-in) before {what} can go on. "
    )
    if declared:  # it asked in a way mcpd could not read
        words += "It named no link mcpd could read, so none can be shown."
    else:
        words += (
            "This agent did not declare that it can show its user such links, so mcpd "
            "does not pass the link on: a server's link is for a person to see whole and "
            "choose to open, not for a model. The person who runs mcpd finds it in "
            f"mcpd's journal; once the step is done, send {what} again."
        )
    return _Untaken(words, declared)


def _links(data: object) -> list[_Link]:
    """The URL elicitations a -32042's ``data`` names (none when it names none
    readably)."""
    try:
        if isinstance(data, Raw):
            asked = msgspec.json.decode(data, type=_Asked)
        else:
            asked = msgspec.convert(data, _Asked)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return []
    return [link for link in asked.elicitations if link.mode == "url"]


def _bounded(links: list[_Link]) -> tuple[list[_Link], int]:
    """``links`` with each named again (the same id and URL) once, cut to
    ``MAX_LINKS``, and how many distinct ones the cut left out."""
    seen: set[tuple[str | None, str]] = set()
    distinct: list[_Link] = []
    for link in links:
        key = (link.elicitationId if isinstance(link.elicitationId, str) else None, link.url)
        if key not in seen:
            seen.add(key)
            distinct.append(link)
    return distinct[:MAX_LINKS], max(len(distinct) - MAX_LINKS, 0)


def _input_required(alias: str, links: list[_Link]) -> Raw:
    """The 2026-07-28 ask for ``links``: URL elicitations an agent answers, then calls
    again."""
    requests: dict[str, object] = {}
    for n, link in enumerate(links, 1):
        params: dict[str, object] = {"mode": "url", "message": link.message, "url": link.url}
        if isinstance(link.elicitationId, str):
            params["elicitationId"] = link.elicitationId
        params, _ = cleaned(_ELICIT, params)
        requests[f"mcpd_url_{n}"] = {
            "method": _ELICIT,
            "params": marked_params(alias, _ELICIT, params),
        }
    result = {"resultType": mcp.INPUT_REQUIRED, "inputRequests": requests}
    return Raw(msgspec.json.encode(result))
