"""Symbolic links on the way to mcpd's state directory or config file that a server
could repoint from inside its sandbox.

Every sandbox hides what those paths name, and keeps the directories above it in
place (``transports.stdio.sandbox.fixed_dirs``). A mount cannot be put on a link, though: a
link on the way (``~/.local`` pointing into another disk) lying in a directory the
server may write can be replaced by a directory of the server's making. mcpd, which
finds its state directory once as it starts, would start next time on what the server
left there (a fresh state, pins and approvals gone, or a config of the server's), and
hide that instead of the real one, which the server could then read. So such a
server does not start, and its reason names the link and the remedy: the resolved
path in the config (``state_dir``) or on mcpd's command line (``--config``), which no
server can move.

Whether the server may write the link's directory is found from the view its sandbox
gives (what is hidden and granted, at its level) and from the directory's own
permissions for mcpd's user, which the server runs as.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Final

from transports.stdio.sandbox import anchors
from transports.stdio.sandbox.fixed_dirs import writable
from transports.stdio.sandbox.plan import Level, Mount

_MAX_LINKS: Final = 40  # as the kernel gives up on a path (ELOOP)


def links_on_the_way(path: str) -> list[str]:
    """The symbolic links met in finding ``path`` (absolute), in order, each as the
    path it is at; the walk stops at the first part that does not exist."""
    found: list[str] = []
    pending = [part for part in path.split("/") if part]
    here = "/"
    while pending and len(found) < _MAX_LINKS:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            here = os.path.dirname(here)
            continue
        step = os.path.join(here, part)
        try:
            target = os.readlink(step)
        except OSError:
            if not os.path.lexists(step):
                break
            here = step
            continue
        found.append(step)
        pending = [p for p in target.split("/") if p] + pending
        if target.startswith("/"):
            here = "/"
    return found


def view(
    level: Level, home: str, hide: tuple[str, ...], read: tuple[str, ...], write: tuple[str, ...]
) -> list[Mount]:
    """The sandbox's mounts as the server would see them, without making anything."""
    shown = [Mount(os.path.realpath(home), "write")]
    for path in hide:
        if "*" in os.path.basename(path) or not os.path.lexists(path):
            continue
        real = anchors.followed(path)
        if real is not None:  # another user's name hides nothing (``anchors``)
            shown.append(Mount(real, "hide_dir" if os.path.isdir(real) else "hide_file"))
    shown += [Mount(os.path.realpath(p), "read") for p in read]
    shown += [Mount(os.path.realpath(p), "write") for p in write]
    return shown


def exposed(what: Mapping[str, str], level: Level, shown: list[Mount]) -> Iterator[tuple[str, str]]:
    """For each of ``what`` (a name such as ``state_dir``, and the path it is), the
    links on its way that a server at ``level`` seeing ``shown`` could replace."""
    if level == "off":
        return
    for name, path in what.items():
        for link in links_on_the_way(os.path.abspath(path)):
            folder = os.path.dirname(link)
            if writable(folder, shown, level) and os.access(folder, os.W_OK):
                yield name, link


def link_refusal(name: str, path: str, link: str, level: Level) -> str:
    """Why a server does not start, naming the link and what makes it safe."""
    real = os.path.realpath(path)
    if name == "state_dir":
        what = f"mcpd's state directory {path}"
        remedy = f'name the directory it leads to in the config: state_dir = "{real}"'
    else:
        what = f"mcpd's config file {path}"
        remedy = f"start mcpd with the path it leads to: --config {real} (or MCPD_CONFIG)"
    return (
        f"{what} is reached through the symbolic link {link}, in {os.path.dirname(link)}, "
        f"where this server ({level} sandbox) may write: it could point the link at a "
        "directory of its own, so that mcpd, once restarted, would start afresh there and "
        f"leave the real one in its reach; {remedy}"
    )
