"""Where a grant leads as a server starts, against what every sandbox hides.

A grant is resolved through symbolic links at each start, and anything that may write
a directory on its way (the server itself, when the grant is its own to write, or a
sibling) can point it elsewhere between one start and the next: at mcpd's state
directory, which a grant would bind over the cover that hides it. So a grant is
checked where it leads at that start, and the server does not start when:

- it is, lies in or holds one of mcpd's own places (``Sandbox.own``: its state, with
  the servers' homes, its config, the secret files the config reads, its sockets'
  directories, the pages it hands a browser): no grant shows a server any of them,
  but one that holds such a place as the config names it (``read = ["~/work"]``, the
  state directory kept in it), under which the cover lands on top;
- it is, lies in or holds any other hidden place (a credential store) only through a
  symbolic link: what the config names itself (``read = ["~/.aws"]``) is how a server
  gets one back, but a link on the way says nothing of what the user meant.

A link is refused whoever made it: the refusal says how to grant where the link leads,
where a grant may (by that place's own path), and that a server may have made it.

What was checked is what is bound: a descriptor of each grant is held from its check
(``hold``) and bubblewrap binds that (``--bind-fd``), so that a link swapped on the
way after the check changes nothing of what the sandbox shows. No trio here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import msgspec

from . import anchors
from .plan import Mount, Sandbox, SandboxError, within


class Hidden(msgspec.Struct, frozen=True):
    """A place a sandbox hides at this start."""

    path: str  # as the config or mcpd names it, absolute
    place: str  # where that is now, real
    own: bool  # mcpd's own (``Sandbox.own``)


def is_own(path: str, sandbox: Sandbox) -> bool:
    return any(within(path, own) for own in sandbox.own)


def hidden_now(sandbox: Sandbox) -> list[Hidden]:
    """What ``sandbox`` would hide were it started now, found without holding or saying
    anything (``anchors.followed``): for a start's check made ahead of it."""
    if sandbox.level == "off":
        return []
    found = []
    for hide in sandbox.hide:
        for path in anchors.matching(hide):
            place = anchors.followed(path) if os.path.lexists(path) else None
            if place is not None:
                found.append(Hidden(path, place, is_own(path, sandbox)))
    return found


def overreach(written: str, real: str, hidden: Sequence[Hidden]) -> str | None:
    """Why a grant the config writes ``written`` (absolute), which leads to ``real`` at
    this start, may not be bound (a clause after the grant's name); None when it may."""
    for h in hidden:
        if within(real, h.place):
            how = "is" if real == h.place else "lies in"
        elif within(h.place, real):
            how = "holds"
        else:
            continue
        # Named in the config: the config's path is (or holds, for a grant that holds
        # it) the hidden place, by where it is or by a name mcpd hides it by.
        spellings = [h.place, *(o.path for o in hidden if o.place == h.place)]
        if how == "holds":
            named = any(within(s, written) for s in spellings)
        else:
            named = any(within(written, s) for s in spellings)
        lead = f"{written} leads to {real}" if real != written else written
        if h.own and how != "holds":
            said = f"{lead}, which {how} {h.place}, mcpd's own ({h.path}), hidden from every "
            said += "server: no grant shows a server what mcpd keeps"
            if real == written:
                return said
            said += ", and no link leads there, whoever made it: remove the link or point "
            return said + "it elsewhere (a server may have made it)"
        if h.own and not named:
            said = f"{lead}, which holds {h.place}, mcpd's own ({h.path}), hidden from every "
            said += "server: a grant is bound over what mcpd keeps, with it covered, only "
            said += "where the config names the grant by its own path, not through a link"
            return said + _by_its_own_path(real)
        if not named:
            said = f"{lead}, which {how} {h.place} ({h.path}), hidden from every server, "
            said += "through a symbolic link the config does not name: a grant gives a "
            said += "hidden place back only where the config names it by its own path"
            return said + _by_its_own_path(real)
    return None


def _by_its_own_path(real: str) -> str:
    # A link the user made and one a server made look the same, so neither is followed
    # to what is hidden: what the user means to grant, the config says by its own path.
    said = f"; to grant it, write {real} in the config; a link you did not make, a server "
    return said + "may have: remove it"


def hold(mounts: Sequence[Mount], where: str) -> list[Mount]:
    """``mounts`` with a descriptor held of each grant (``Mount.fd``), for bubblewrap to
    bind what was checked, whatever is renamed or relinked after. Raises SandboxError
    when a grant is no longer where it was found (the server's next try finds it
    afresh); nothing is left open then."""
    out: list[Mount] = []
    try:
        for m in mounts:
            if m.kind not in ("read", "write"):
                out.append(m)
                continue
            fd = os.open(m.path, os.O_PATH | os.O_CLOEXEC)
            out.append(msgspec.structs.replace(m, fd=fd))
            # The kernel's name for what was opened: a directory on the way swapped
            # since the check would lead elsewhere.
            now = os.readlink(f"/proc/self/fd/{fd}")
            if now != m.path:
                raise SandboxError(f"{where}: {m.path}, granted, led to {now} as it started")
    except OSError as exc:
        let_go(out)
        raise SandboxError(f"{where}: cannot hold its grant {m.path}: {exc.strerror}") from None
    except BaseException:
        let_go(out)
        raise
    return out


def let_go(mounts: Sequence[Mount]) -> None:
    """Close the descriptors ``hold`` opened."""
    for m in mounts:
        if m.fd is not None:
            os.close(m.fd)
