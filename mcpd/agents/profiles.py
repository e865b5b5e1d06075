"""Which profile an agent gets, and what it sees through it.

An agent's profile is fixed by the socket it connects to when the profile has one;
on the daemon's own socket (and the HTTP endpoint) it may pick one with
``mcpd/useProfile`` (what ``mcpd bridge --profile`` sends) or ``?profile=``; without
that it gets the default profile: ``[profiles.default]`` if the config has one, else
every tool under the ``[naming]`` names. Each known host has a profile of its name
(``mcpd.config.tables.hosts``) unless the config defines one; such a built-in profile is
shown in the status only while an agent uses it. A profile that has its own socket is
a boundary (its socket's mode and peers say who may use it), so from the daemon's socket
only the daemon's own user and root may pick it.

Status follows the profile too (``Profiles.scope``): an agent in a profile reads the
states, errors and metrics of that profile's servers only; the owner in the default
profile reads everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

from protocol.jsonrpc import messages as rpc

from ..config.tables.hosts import builtin_profiles
from ..config.tables.model import NamingConfig
from ..config.tables.profiles import DEFAULT_PROFILE, EVERYTHING, ProfileConfig
from ..registry.profiles.views import ProfileView
from ..registry.tables.eras import listing_for_era
from ..registry.tables.shown import Entry
from ..registry.tables.table import ListedTool
from ..servers.all_servers import AllServers
from ..status_document import NamingShown, ProfileStatus
from .entry.peers import Peer, is_owner
from .lists.search_mode import exposed_listing

# What a removed profile becomes for the agents still connected to it: nothing.
_NOTHING = ProfileConfig(servers=[])


class Profile:
    """One profile: its view of the tools (its names, its listing) and which servers
    it has. What the servers are doing is asked of the servers themselves
    (``AllServers``), with ``has_server`` to keep to this profile's: their states,
    outages and words reach its agents only of the servers it has."""

    def __init__(self, view: ProfileView) -> None:
        self.view = view
        self.name = view.name  # each call's record says it
        # A host's built-in profile is the default one under other names: a policy
        # rule about the default is about its agents too.
        self.derived_from: str | None = None
        self.removed = False
        # Per era (modern or not): the listing last projected for it, and its projection.
        self._shown: dict[bool, tuple[Sequence[ListedTool], Sequence[ListedTool]]] = {}

    @property
    def version(self) -> int:
        """Grows whenever what this profile's agents are listed changes."""
        return self.view.sync()

    def has_server(self, alias: str) -> bool:
        return self.view.has_server(alias)

    @property
    def template(self) -> str:
        """How this profile names its tools: ``[naming]``'s template, or its own."""
        return (self.view.naming or self.view.registry.naming).template

    def listing(self) -> Sequence[ListedTool]:
        """What ``tools/list`` gives this profile's agents (meta-tools in search mode)."""
        return exposed_listing(self.view)

    def shown_to(self, modern: bool) -> Sequence[ListedTool]:
        """``listing`` as agents of one era are shown it (``eras``): projected once for
        as long as the listing stands (a listing changes as a new sequence)."""
        listing = self.listing()
        last = self._shown.get(modern)
        if last is not None and last[0] is listing:
            return last[1]
        shown = listing_for_era(listing, modern)
        self._shown[modern] = (listing, shown)
        return shown

    def lookup(self, name: str) -> Entry | None:
        view = self.view  # every call looks up: the table itself when the view is it
        return view.registry.lookup(name) if view.identity else view.lookup(name)

    def closest(self, name: str) -> list[str]:
        """Listed names like ``name``, for "did you mean"."""
        return self.view.closest(name)

    @property
    def lists_tools(self) -> bool:
        """Whether tools/list holds the tools (else the meta-tools that search them)."""
        return self.view.mode == "all"

    def named(self, name: str) -> list[Entry]:
        """The approved tools of the view whose server's name or curated name is
        ``name``: an agent that calls a tool by the name its server gave it means one of
        these. One pass over the view, however many tools it has."""
        return [e for e in self.view.listing() if e.held is None and name in (e.original, e.name)]


class Profiles:
    def __init__(self, servers: AllServers) -> None:
        self.servers = servers
        self._all: dict[str, Profile] = {}
        self._configs: dict[str, ProfileConfig] = {}
        self._builtin: frozenset[str] = frozenset()

    def configure(
        self, profiles: Mapping[str, ProfileConfig], naming: NamingConfig, max_tools: int
    ) -> list[str]:
        """Apply the config's profiles (at start and on reload); returns the names of
        those that changed. An agent that chose a profile now removed keeps its
        connection and is listed nothing (it is told the list changed); one on the
        removed profile's socket has its connection ended (``sockets.Leave``)."""
        builtin = builtin_profiles(profiles)
        self._builtin = frozenset(builtin)
        # The default first: the others take the names it gives their tools as well.
        wanted = {DEFAULT_PROFILE: profiles.get(DEFAULT_PROFILE, EVERYTHING)}
        wanted.update(builtin)
        wanted.update(profiles)
        changed = []
        for name, cfg in wanted.items():
            held = self._all.get(name)
            default = None if name == DEFAULT_PROFILE else self._all[DEFAULT_PROFILE].view
            if held is None:
                held = self._all[name] = Profile(self.servers.view_of(name))
            held.derived_from = DEFAULT_PROFILE if name in builtin else None
            if self._configs.get(name) == cfg and not held.removed:
                # The global parts may differ, and the default's naming.
                held.view.configure(cfg, naming, max_tools, default)
                continue
            held.removed = False
            held.view.configure(cfg, naming, max_tools, default)
            self._configs[name] = cfg
            changed.append(name)
        for name, held in self._all.items():
            if name not in wanted and not held.removed:
                held.removed = True
                held.view.configure(_NOTHING, naming, max_tools)
                self._configs.pop(name, None)
                changed.append(name)
        return changed

    def views(self, names: Iterable[str]) -> list[ProfileView]:
        """The views of the profiles ``names`` (those removed too: agents may be on one)."""
        return [self._all[name].view for name in names if name in self._all]

    @property
    def default(self) -> Profile:
        return self._all[DEFAULT_PROFILE]

    def get(self, name: str) -> Profile | None:
        held = self._all.get(name)
        return None if held is None or held.removed else held

    def config(self, name: str) -> ProfileConfig:
        return self._configs.get(name, _NOTHING)

    def names(self) -> list[str]:
        return sorted(n for n, p in self._all.items() if not p.removed)

    def configs(self) -> dict[str, ProfileConfig]:
        """Every profile in force, by name (those with a socket of their own too)."""
        return dict(self._configs)

    def granting(self, server: str, socket: str | None) -> str | None:
        """The profile whose ``allow_servers`` lets ``server``'s processes in through
        the socket of the profile ``socket`` (None: the daemon's, where the first such
        profile by name is the one)."""
        for name in [socket] if socket is not None else self.names():
            if any(fnmatchcase(server, p) for p in self.config(name).allow_servers):
                return name
        return None

    def choose(self, name: str, peer: Peer | None, fixed: str | None) -> Profile:
        """The profile ``name`` for an agent that asks for it; raises ``rpc.RPCError``
        with what to do instead."""
        if fixed is not None and name != fixed:
            raise rpc.RPCError(rpc.INVALID_PARAMS, f"this socket serves the profile {fixed!r} only")
        held = self.get(name)
        if held is None:
            configured = [n for n in self.names() if n not in self._builtin]
            hosts = sorted(self._builtin)
            raise rpc.RPCError(
                rpc.INVALID_PARAMS,
                f"no profile named {name!r} (profiles: {', '.join(configured)})"
                + (f"; one for each host too: {', '.join(hosts)}" if hosts else ""),
            )
        own_socket = self.config(name).socket
        if fixed is None and own_socket is not None and not is_owner(peer):
            raise rpc.RPCError(
                rpc.INVALID_PARAMS,
                f"the profile {name!r} is served on its own socket, {own_socket}",
            )
        return held

    def scope(self, profile: Profile, peer: Peer | None, fixed: str | None) -> ProfileView | None:
        """What an agent in ``profile`` may read of the daemon's status: None for all of
        it (the owner, on the daemon's own socket or the HTTP endpoint, in the default
        profile), else its profile's view: that profile's servers and nothing of the
        others or of the daemon's own files."""
        if fixed is None and profile is self.default and is_owner(peer):
            return None
        return profile.view

    def status(
        self, agents: Mapping[str, int], default_cap_warned: bool, only: str | None = None
    ) -> list[ProfileStatus]:
        """Per profile (only the one named ``only``, if given): what it exposes and to
        how many agents."""
        out = []
        for name in self.names():
            if only is not None and name != only:
                continue
            if only is None and name in self._builtin and not agents.get(name):
                continue  # there for any host that asks, not something to look at
            held = self._all[name]
            view = held.view
            mode = view.mode
            cfg = self.config(name)
            naming = view.naming or view.registry.naming
            row = ProfileStatus(
                name=name,
                discovery=cfg.discovery,
                mode=mode,
                tools=view.count(),
                listed=len(held.listing()),
                servers=view.servers(),
                pinned=[e.local for e in view.pinned()],
                naming=NamingShown(template=naming.template, max_length=naming.max_length),
                max_tools=view.cap,
                socket=cfg.socket,
                agents=agents.get(name, 0),
            )
            warning = view.over_cap()
            if warning and not (name == DEFAULT_PROFILE and view.identity and default_cap_warned):
                row.warning = warning
            out.append(row)
        return out
