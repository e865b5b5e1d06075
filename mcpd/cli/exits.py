"""The ``mcpd`` command's exit codes, and how a command stops with one.

0 ok, 1 the tool returned isError (or the daemon could not do what it was asked),
2 usage, 3 daemon unreachable, 4 the daemon's reply could not be read, 78
(``EX_CONFIG``) config error, 130 interrupted (given by ``main``). They are here, apart
from ``main``, because every module of commands stops with them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import NoReturn, TypeVar

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.messages import Json, JsonObject
from protocol.shown.server_urls import ascii_hosts
from protocol.shown.visible import visible

from ..agents.lists.list_hints import LIST_RESOURCES, LIST_TOOLS, SEARCH_TOOLS
from ..config.loading.paths import client_socket_path
from ..config.tables.model import CONFIG_ERROR, EX_CONFIG
from .client import LONG, BadReply, Client, DaemonUnreachable

EXIT_TOOL_ERROR = 1
EXIT_FAILED = 1  # what the daemon was asked could not be done
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_BAD_REPLY = 4
T = TypeVar("T")
# The command a person types in place of the method mcpd points an agent at.
_COMMANDS = {
    LIST_TOOLS: "`mcpd tools` lists the current tools.",
    SEARCH_TOOLS: "`mcpd tools` lists the current tools.",
    LIST_RESOURCES: "`mcpd resources` lists what can be read.",
}


def fail(code: int, message: str, *, lines: bool = False) -> NoReturn:
    """Stop with ``code``, saying ``message``. It may carry a server's words (its
    JSON-RPC error, a reply it broke) and the addresses it chose. It is one line: a line
    break in it is shown escaped, so no line after it can read as mcpd's. ``lines``: it
    is several, one an error (a config error's): each is escaped alone, and those after
    the first are indented as in mcpd's log, where none reads as mcpd's either."""
    first, *rest = message.split("\n") if lines else [message]
    said = [f"mcpd: {_shown(first)}", *(f"    | {_shown(line)}" for line in rest)]
    print("\n".join(said), file=sys.stderr)
    raise SystemExit(code)


def fail_config(message: str) -> NoReturn:
    """Stop with ``EX_CONFIG``, saying a config error's lines."""
    fail(EX_CONFIG, message, lines=True)


def arguments_given(text: str | None) -> JsonObject:
    """A call's or a prompt's arguments on the command line: a JSON object, {} if none."""
    try:
        arguments = json.loads(text) if text else {}
    except ValueError as exc:
        fail(EXIT_USAGE, f"arguments are not valid JSON: {exc}")
    if not isinstance(arguments, dict):
        fail(EXIT_USAGE, "arguments must be a JSON object")
    return arguments


def _shown(line: str) -> str:
    return ascii_hosts(visible(line))


def for_a_person(said: str) -> str:
    """mcpd's answer to an agent, for the command line: a sentence that points at a
    method becomes one that names the command."""
    for agents, person in _COMMANDS.items():
        said = said.replace(agents, person)
    return said


def client_for(args: argparse.Namespace, timeout: float = LONG) -> Client:
    """A client on the daemon's socket (``--socket``, or where ``config.loading.paths`` says),
    waiting ``timeout`` seconds for each reply."""
    try:
        return Client(client_socket_path(args.socket), timeout)
    except DaemonUnreachable as exc:
        fail(EXIT_UNREACHABLE, str(exc))


def ask(
    client: Client,
    method: str,
    params: Mapping[str, Json] | None = None,
    *,
    code: bool = True,
    progress: Callable[[JsonObject], None] | None = None,
) -> Json:
    """The daemon's result, or the command ends with the exit code of what went wrong
    (``code``: the JSON-RPC error code is part of the message; ``progress``: see
    ``Client.request``)."""
    try:
        return client.request(method, params, progress)
    except (DaemonUnreachable, BadReply, rpc.RPCError) as exc:
        fail_asking(exc, code=code)


def ask_object(
    client: Client,
    method: str,
    params: Mapping[str, Json] | None = None,
    *,
    progress: Callable[[JsonObject], None] | None = None,
) -> JsonObject:
    """``ask``, of a method whose result is an object a server wrote, passed on as it
    came: any other value ends the command with exit code 4."""
    result = ask(client, method, params, progress=progress)
    if not isinstance(result, dict):
        fail(EXIT_BAD_REPLY, f"the answer of mcpd to {method} could not be read (not an object)")
    return result


def ask_as(
    client: Client,
    method: str,
    shape: type[T],
    params: Mapping[str, Json] | None = None,
    *,
    code: bool = True,
) -> T:
    """``ask``, the answer read as the type the daemon answers ``method`` with
    (``Client.request_as``): one of another shape ends the command with exit code 4."""
    try:
        return client.request_as(method, shape, params)
    except (DaemonUnreachable, BadReply, rpc.RPCError) as exc:
        fail_asking(exc, code=code)


def fail_asking(exc: DaemonUnreachable | BadReply | rpc.RPCError, *, code: bool = True) -> NoReturn:
    """The command ends with the exit code of what went wrong asking the daemon."""
    if isinstance(exc, DaemonUnreachable):
        fail(EXIT_UNREACHABLE, str(exc))
    if isinstance(exc, BadReply):
        fail(EXIT_BAD_REPLY, str(exc))
    if isinstance(exc.data, dict) and CONFIG_ERROR in exc.data:
        fail_config(exc.message)  # a config the daemon would not take, as for serve
    message = for_a_person(exc.message)
    fail(EXIT_FAILED, f"error {exc.code}: {message}" if code else message)
