"""``mcpd pins export|import|forget-unreadable``: the pins as a file, to take the
approvals of one machine to another, and the pin files mcpd could not read let go.

An export is written where the person says without writing through a link there
(``outfile``); an import reads a regular file or stdin, never more than
``MAX_IMPORT_BYTES``.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from typing import Final

import msgspec

from protocol.jsonrpc import messages as rpc
from protocol.jsonrpc.messages import JsonObject

from ...local.pins.pinanswers import PinsForgotten, PinsImported
from ...local.state.privatefile import UnsafeFileError, file_kind
from ..client import QUICK, SOCKET_HELP, BadReply, Client, DaemonUnreachable, socket_path
from ..exits import (
    EXIT_BAD_REPLY,
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ask,
    ask_as,
    client_for,
    fail,
)
from .outfile import OutputExists, write_output

# The most ``pins import`` reads: as large as a config file may be, far more than the
# pins of many servers take.
MAX_IMPORT_BYTES: Final = 64 * 1024 * 1024


def cmd_pins(args: argparse.Namespace) -> int:
    if args.pins_command == "export":
        return _export(args)
    if args.pins_command == "forget-unreadable":
        return _forget_unreadable(args)
    return _import(args)


def _forget_unreadable(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        result = ask_as(client, "mcpd/pins/forget_unreadable", PinsForgotten)
    for path in result["removed"]:
        print(f"removed {path}")
    if not result["removed"]:
        print("no unreadable pin file was kept")
    approved = ", ".join(result["approved"]) or "none"
    print(f"servers are approved by listing again; approved as they list now: {approved}")
    return 0


def _export(args: argparse.Namespace) -> int:
    with client_for(args, QUICK) as client:
        pins = ask(client, "mcpd/pins/export", {"servers": args.servers or None})
    servers = pins.get("servers") if isinstance(pins, dict) else None
    if not isinstance(servers, dict):
        fail(
            EXIT_BAD_REPLY, "the answer of mcpd to mcpd/pins/export could not be read (no servers)"
        )
    missing = sorted(set(args.servers) - set(servers))
    if missing:
        fail(EXIT_FAILED, f"no pins of {', '.join(missing)}")
    text = json.dumps(pins, indent=2, ensure_ascii=False) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        write_output(args.output, text.encode("utf-8"), force=args.force)
    except OutputExists as exc:
        fail(EXIT_USAGE, str(exc))
    except UnsafeFileError as exc:
        fail(EXIT_USAGE, f"cannot write {args.output}: {exc}")
    except OSError as exc:
        fail(EXIT_USAGE, f"cannot write {args.output}: {exc.strerror or exc}")
    count = sum(
        len(held) if isinstance(s, dict) and isinstance(held := s.get(kind), dict | list) else 0
        for s in servers.values()
        for kind in ("tools", "prompts", "templates", "instructions")
    )
    print(f"mcpd: {count} pinned items of {len(servers)} server(s) in {args.output}")
    return 0


def _import(args: argparse.Namespace) -> int:
    try:
        raw = _read_export(args.file)
        document = json.loads(raw)
    except _Unreadable as exc:
        fail(EXIT_USAGE, str(exc))
    except OSError as exc:
        fail(EXIT_USAGE, f"cannot read {args.file}: {exc.strerror or exc}")
    except ValueError as exc:
        fail(EXIT_USAGE, f"{args.file} is not JSON: {exc}")
    with client_for(args) as client:
        _fits(client, args.file, len(raw))
        params: JsonObject = {"pins": document, "replace": args.replace}
        result = ask_as(client, "mcpd/pins/import", PinsImported, params)
    servers = ", ".join(result["servers"]) or "no server"
    print(
        f"imported {result['items']} pinned items of {servers}; "
        f"{result['released']} held item(s) released"
    )
    return 0 if result.get("saved", True) else EXIT_FAILED


# What the request carries besides the export: its envelope and ``_meta``.
_ENVELOPE: Final = 4096


class _LineLimit(msgspec.Struct):
    """``mcpd/lineLimit``: the longest line the daemon reads, in bytes."""

    maxLineBytes: int


def _fits(client: Client, path: str, size: int) -> None:
    """Ends the command, saying why, when the export would make a request longer than
    the daemon reads (its ``max_line_bytes``): the daemon would close the connection on
    it, and the command could say no more than that it was lost. A daemon that does not
    say its limit is sent the export as it is."""
    try:
        limit = client.request_as("mcpd/lineLimit", _LineLimit).maxLineBytes
    except rpc.RPCError:
        return
    except DaemonUnreachable as exc:
        fail(EXIT_UNREACHABLE, str(exc))
    except BadReply as exc:
        fail(EXIT_BAD_REPLY, str(exc))
    if size + _ENVELOPE > limit:
        shown = "stdin" if path == "-" else path
        fail(
            EXIT_USAGE,
            f"cannot import {shown}: at {size:,} bytes it makes a request longer than the "
            f"{limit:,} bytes mcpd reads (max_line_bytes in [daemon]); raise that and "
            "reload, or import the export's servers a few at a time",
        )


class _Unreadable(Exception):
    """What is at the path given to ``pins import`` is no export to read; says why."""


def _read_export(path: str) -> bytes:
    """The bytes of an export: stdin for ``-``, else a regular file (through the user's
    links: it is only read, and what it says is checked against its digests), each read
    up to ``MAX_IMPORT_BYTES``. A FIFO or a device is refused unread: one could hold
    the command for ever or fill its memory."""
    if path == "-":
        data = sys.stdin.buffer.read(MAX_IMPORT_BYTES + 1)
    else:
        # Opened without waiting, as a FIFO with no writer would hold the open.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        st = os.fstat(fd)  # of what is open, so what is checked is what is read
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise _Unreadable(f"cannot read {path}: it is {file_kind(st)}, not a regular file")
        with open(fd, "rb") as f:
            if st.st_size > MAX_IMPORT_BYTES:
                raise _Unreadable(_too_large(path))
            data = f.read(MAX_IMPORT_BYTES + 1)  # it may have grown since
    if len(data) > MAX_IMPORT_BYTES:
        raise _Unreadable(_too_large("stdin" if path == "-" else path))
    return data


def _too_large(what: str) -> str:
    return (
        f"cannot read {what}: it is larger than {MAX_IMPORT_BYTES:,} bytes, "
        "the most an export may be"
    )


def add_pins(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``pins export|import|forget-unreadable`` in the command line's grammar."""
    p = sub.add_parser("pins", help="export or import the approved definitions")
    ps = p.add_subparsers(dest="pins_command", required=True)
    e = ps.add_parser("export", help="print (or write) the pins, for another machine")
    e.add_argument("servers", nargs="*", metavar="ALIAS", help="only these servers")
    e.add_argument("-o", "--output", help="write them to this file instead of stdout")
    e.add_argument("--force", action="store_true", help="replace --output if it exists")
    i = ps.add_parser("import", help="take an export's pins as approved")
    i.add_argument("file", metavar="FILE", help="an export (- for stdin)")
    i.add_argument("--replace", action="store_true", help="a server in FILE keeps no other pins")
    f = ps.add_parser(
        "forget-unreadable",
        help="remove the pin files that could not be read, and approve each server they "
        "held as it lists now",
    )
    for parser in (e, i, f):
        parser.add_argument("--socket", type=socket_path, help=SOCKET_HELP)
    p.set_defaults(func=cmd_pins)
