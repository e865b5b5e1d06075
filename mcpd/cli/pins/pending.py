"""``mcpd approve`` and ``mcpd tools --pending|--findings``: what waits for approval,
shown so a person can judge it (``files`` moves the pins between machines).

A pending change is shown as a unified diff of the definition as approved and as the
server offers it now, one field to a line and a description one line of its own to a
line, with every character that hides or acts on a terminal escaped (``visible``): a
change of one invisible character shows. ``mcpd approve`` pins exactly what it
showed (each item's digest goes with the approval), so a server that changes an item
again while the person reads keeps it held.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shlex
import sys
from collections.abc import Callable
from typing import Final

from protocol.jsonrpc.messages import Json, JsonObject
from protocol.shown.visible import visible

from ...local.pins.pinanswers import Approved, FoundItem, FoundItems, HeldItem, HeldItems
from ..client import QUICK
from ..exits import EXIT_FAILED, ask, ask_as, client_for, fail

_WHY: Final = {
    "changed": "changed since it was approved",
    "forgotten": "its name is among those whose pins the server had mcpd forget{}, or matches one "
    "by chance",
    "new": "new since the server was approved",
    "new_server": "its server is not approved yet",
    "finding": "flagged by the finding rules",
}
# A definition's fields in the order they are shown; others follow, sorted.
_SCALARS: Final = ("name", "uri", "uriTemplate", "title", "mimeType")
_TEXTS: Final = ("description", "instructions")
# A name shown as it is: printable ASCII, with no space at either end.
_PLAIN_NAME: Final = re.compile(r"[!-~](?:[ -~]*[!-~])?")


def shown_name(name: str) -> str:
    """A server's name for an item as a person can tell it from its look-alikes: as it
    is when plain, else quoted, with every other character escaped (``purg\\u0435``)."""
    return name if _PLAIN_NAME.fullmatch(name) else f"'{escaped_name(name)}'"


def escaped_name(name: str) -> str:
    """``name`` in printable ASCII alone: a quote and a backslash after a backslash, a
    control character as ``visible`` writes it, any other as ``\\uXXXX``."""
    out = []
    for ch in name:
        code = ord(ch)
        if ch in "'\\":
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(visible(ch))
        elif code < 0x80:
            out.append(ch)
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return "".join(out)


def _shown_label(label: str) -> str:
    """An approval's ``kind name`` with the name shown as ``shown_name`` shows it."""
    kind, _, name = label.partition(" ")
    return f"{kind} {shown_name(name)}" if name else visible(kind)


def lines_of(definition: object) -> list[str]:
    """A definition as lines to compare: what a person reads, escaped (none of what
    is not an object)."""
    if not isinstance(definition, dict):
        return []
    out = [
        f"{k}: {shown_name(str(definition[k])) if k == 'name' else visible(str(definition[k]))}"
        for k in _SCALARS
        if k in definition
    ]
    for text in _TEXTS:
        if text in definition:
            out.append(f"{text}:")
            out += [f"  {visible(line)}" for line in str(definition[text]).split("\n")]
    for key in sorted(set(definition) - {*_SCALARS, *_TEXTS}):
        out.append(f"{key}:")
        dumped = json.dumps(definition[key], indent=2, sort_keys=True, ensure_ascii=False)
        out += [f"  {visible(line)}" for line in dumped.split("\n")]
    return out


def diff_of(item: HeldItem, color: bool = False) -> list[str]:
    before, after = lines_of(item["approved"]), lines_of(item["offered"])
    label = "approved"
    if item["approved"] is None:
        # A change of a pin kept by its digest alone: what was approved is not known.
        kept = item["why"] not in ("changed", "forgotten")
        label = "(nothing approved)" if kept else "(approved, its definition not kept)"
    out = list(difflib.unified_diff(before, after, label, "offered now", lineterm="", n=3))
    if not color:
        return out
    paint = {"+": "32", "-": "31", "@": "36"}
    return [f"\x1b[{paint[line[0]]}m{line}\x1b[0m" if line[:1] in paint else line for line in out]


def _why(item: HeldItem) -> str:
    why = _WHY.get(item["why"], item["why"])
    if item["why"] == "forgotten":
        # How many: with many, a chance match is likely.
        count = item.get("forgotten_names")
        why = why.format("" if count is None else f" (about {count})")
    rules = ", ".join(item["rules"])
    if not rules:
        return why
    return f"{why} ({rules})" if item["why"] == "finding" else f"{why}; flagged: {rules}"


def describe_pin(item: HeldItem) -> str:
    what = f"{item['kind']} {shown_name(item['name'])}" if item["name"] else item["kind"]
    if item.get("local"):
        what += f" ({visible(item['local'])})"
    return f"{what} of {item['server']}: {_why(item)}"


def _named(item: HeldItem) -> str:
    """The name an item is picked by: a server's instructions (which have none) by
    their kind."""
    return str(item["name"] or item["kind"])


def _matching(waiting: list[HeldItem], wanted: str) -> list[HeldItem]:
    """The waiting items a name a person gave picks: the one whose name as the server
    spells it is ``wanted``, if one is; else every one ``wanted`` is the escaped or the
    shown form of (``shown_name``), which may be several look-alikes."""
    raw = [i for i in waiting if _named(i) == wanted]
    if len(raw) == 1:
        return raw
    return [
        i for i in waiting if wanted in {_named(i), escaped_name(_named(i)), shown_name(_named(i))}
    ]


def _how_to_name(waiting: list[HeldItem], item: HeldItem, server: str) -> str:
    """How to pick ``item`` alone, as a person can paste it; approving the whole
    server when no spelling of its name picks it alone."""
    name = _named(item)
    for spelling in (shown_name(name), name, escaped_name(name)):
        if _matching(waiting, spelling) == [item]:
            return f"mcpd approve {server} {shlex.quote(spelling)}"
    return f"no name picks it alone: mcpd approve {server}, naming nothing"


def _picked(waiting: list[HeldItem], wanted: list[str], server: str) -> list[HeldItem]:
    """The items the names a person gave pick; a name that picks none, or several,
    ends the command, saying so."""
    missing = [n for n in wanted if not _matching(waiting, n)]
    if missing:
        them = ", ".join(shown_name(_named(i)) for i in waiting) or "nothing"
        fail(
            EXIT_FAILED,
            f"nothing of {server} named {', '.join(map(shown_name, missing))} "
            f"waits for approval; waiting: {them} (`mcpd tools --pending` lists it all)",
        )
    for n in wanted:
        several = _matching(waiting, n)
        if len(several) > 1:
            each = "; ".join(
                f"{i['kind']} {shown_name(_named(i))}: {_how_to_name(waiting, i, server)}"
                for i in several
            )
            fail(
                EXIT_FAILED,
                f"nothing approved: {shown_name(n)} names {len(several)} items of {server} "
                f"that wait for approval; name one: {each}",
            )
    picked = {id(i) for n in wanted for i in _matching(waiting, n)}
    return [i for i in waiting if id(i) in picked]


def cmd_approve(args: argparse.Namespace) -> int:
    color = sys.stdout.isatty()
    with client_for(args) as client:
        # Before anything is shown: a person told only after reading it all, and
        # answering, that this terminal may not approve would have read it for nothing.
        ask(client, "mcpd/pins/may_approve")
        waiting = ask_as(client, "mcpd/pins/pending", HeldItems, {"server": args.server})["pending"]
        if args.names:
            waiting = _picked(waiting, list(dict.fromkeys(args.names)), args.server)
        if not waiting:
            print(f"nothing of {args.server} waits for approval")
            return 0
        for item in waiting:
            print(describe_pin(item))
            for line in diff_of(item, color):
                print(f"  {line}")
            print()
        count = f"{len(waiting)} item{'s' if len(waiting) != 1 else ''}"
        if not args.yes and not _confirmed(f"Approve {count} of {args.server}? [y/N] "):
            print("nothing approved")
            return EXIT_FAILED
        picks: list[Json] = [
            {"kind": i["kind"], "name": i["name"], "digest": i["digest"]} for i in waiting
        ]
        params: JsonObject = {"server": args.server, "items": picks, "whole": not args.names}
        result = ask_as(client, "mcpd/pins/approve", Approved, params)
    for label in result["approved"]:
        print(f"approved: {_shown_label(label)}")
    stale = result["stale"]
    for label in stale:
        print(f"still held: {_shown_label(label)} changed again since it was shown; run this again")
    whole_only = result.get("whole_only", [])
    for label in whole_only:
        print(
            f"still held: {_shown_label(label)} is released with its server alone: "
            f"`mcpd approve {args.server}`, naming nothing"
        )
    if not result.get("saved", True):
        print("mcpd: the pins could not be saved (see the journal): approved until mcpd stops")
    return EXIT_FAILED if stale or whole_only else 0


def _confirmed(question: str) -> bool:
    if not sys.stdin.isatty():
        fail(
            EXIT_FAILED,
            "nothing approved: not at a terminal to ask (--yes approves what is shown)",
        )
    try:
        answer = input(question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def cmd_held_or_found(args: argparse.Namespace) -> int:
    """``mcpd tools --pending`` and ``--findings``."""
    with client_for(args, QUICK) as client:
        if args.pending:
            held = ask_as(client, "mcpd/pins/pending", HeldItems)
        else:
            found = ask_as(client, "mcpd/pins/findings", FoundItems)
    if args.json:
        print(json.dumps(held if args.pending else found, indent=2))
        return 0
    return print_pending(held["pending"]) if args.pending else print_findings(found["findings"])


def print_pending(items: list[HeldItem]) -> int:
    if not items:
        print("nothing waits for approval")
        return 0
    rows = [
        (
            i["server"],
            i["kind"],
            shown_name(i["name"]) if i["name"] else "-",
            visible(i.get("local") or "-"),
        )
        for i in items
    ]
    name_w = max(len(r[2]) for r in rows)
    local_w = max(len("LISTED AS"), *(len(r[3]) for r in rows))
    print(f"{'SERVER':<16} {'KIND':<8} {'NAME':<{name_w}}  {'LISTED AS':<{local_w}}  WHY")
    for (server, kind, name, local), i in zip(rows, items, strict=True):
        print(f"{server:<16} {kind:<8} {name:<{name_w}}  {local:<{local_w}}  {_why(i)}")
    servers = sorted({i["server"] for i in items})
    print(
        f"{len(items)} item{'s wait' if len(items) != 1 else ' waits'} for approval; "
        + "; ".join(f"mcpd approve {s}" for s in servers)
        + " shows each change and asks"
    )
    return 0


def print_findings(items: list[FoundItem]) -> int:
    if not items:
        print("no findings")
        return 0
    for f in items:
        what = f"{f['kind']} {visible(f['name'])}" if f["name"] else f["kind"]
        print(
            f"{f['server']} {what}: {f['rule']} in {visible(f['where'])}: {visible(f['excerpt'])}"
        )
    print(f"{len(items)} finding{'s' if len(items) != 1 else ''}")
    return 0


def add_approve(client_cmd: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """``approve`` in the command line's grammar."""
    a = client_cmd("approve", "show what changed in a server's definitions, and approve it")
    a.add_argument("server", metavar="ALIAS", help="the server whose changes to show")
    a.add_argument("names", nargs="*", metavar="NAME", help="only these (the server's names)")
    a.add_argument("--yes", action="store_true", help="approve what is shown without asking")
    a.set_defaults(func=cmd_approve)
