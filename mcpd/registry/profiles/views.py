"""A profile's view of the aggregated table: its servers, the tools its patterns admit,
under its own names, and what ``tools/list`` shows of them.

A view never copies what it can share: with the table's naming its entries are the
table's own, and a view that admits everything under the table's naming is the table.
Under another template each tool gets a name of its own, by the table's rules (unsafe
characters to ``_``, a short hash of ``alias::tool`` for a name too long or shared),
derived afresh whenever the table changes, so it is the same in every process.

Each entry also carries the tool's other names (``Entry.other_names``), derived with
its own: the table's, the default profile's when that names tools its own way, and
each before its hash. A policy rule matches them all, so it holds for a tool however
a profile names it and whatever look-alike its server lists beside it. Where the
default profile has a naming of its own, no other profile shares the table's entries:
they would lack its names.

``version`` grows only when what the view's agents are listed may have changed: a tool
of the view re-encoded by the table (even if it went down and came back before anyone
looked), or in search mode the pinned tools and what the search tool's description
says (the servers and the tool count), not every tool behind it. A server coming and
going elsewhere leaves this profile's agents alone.

``NameFilter`` is the same allow/deny rule over any ``(alias, name)``: prompts and
resources go through ``admits_prompt`` and ``admits_resource``. ``offered`` keeps a
version of what the view lists of prompts and of resources, which grows only when
that changed, as ``version`` does for tools.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from ...config.tables.model import NamingConfig
from ...config.tables.profiles import EVERYTHING, Patterns, ProfileConfig
from ..naming.names import assign
from ..naming.spelling import candidate_name
from ..tables.catalog import Catalog
from ..tables.shown import Entry
from ..uris.scheme import Sight
from .filters import NameFilter, UriFilter

if TYPE_CHECKING:
    from .search import Hit, ToolDoc, ToolIndex

Mode = Literal["all", "search"]
_decode_schema: Final = msgspec.json.Decoder(dict[str, Any])
_SCHEMA_INDEXED: Final = 64 * 1024  # bytes of a tool's input schema read for the index


class ProfileView(Sight):
    def __init__(self, name: str, registry: Catalog) -> None:
        self.name = name
        self.registry = registry
        self.profile = EVERYTHING
        self.naming: NamingConfig | None = None  # None: the table's, whatever it is
        self.cap = 128
        self.version = 0
        self._servers: list[str] = ["*"]
        self._tools = NameFilter(Patterns())
        self._prompts = NameFilter(Patterns())
        self._resources = UriFilter(Patterns())
        self._pinned: NameFilter | None = None
        self.identity = True
        self._synced = -1
        self._entries: list[Entry] = []
        self._by_local: dict[str, Entry] = {}
        self._own: dict[tuple[str, str], tuple[Entry, object, Entry]] = {}
        # For another profile, the default profile's view while that names tools under
        # a naming of its own: the names it gives a tool are the tool's here too.
        self._default: ProfileView | None = None
        self._exposed: Any = None
        self._exposed_refs: Any = None  # keeps the objects whose ids _exposed holds
        self._index: ToolIndex | None = None
        self._index_key: list[tuple[str, Any]] = []
        self._offered = _Offered()

    def configure(
        self,
        profile: ProfileConfig,
        naming: NamingConfig,
        max_tools: int,
        default: ProfileView | None = None,
    ) -> None:
        """Apply (or re-apply, on reload) the profile; ``naming`` and ``max_tools`` are the
        global ones, used where the profile sets none. ``default``: the default profile's
        view (configured first), for any other profile."""
        self.profile = profile
        if profile.template is None and profile.max_length is None:
            self.naming = None
        else:
            self.naming = NamingConfig(
                template=profile.template or naming.template,
                max_length=profile.max_length or naming.max_length,
            )
        self.cap = profile.max_tools or max_tools
        self._servers = list(profile.servers)
        self._tools = NameFilter(profile.tools)
        self._prompts = NameFilter(profile.prompts)
        self._resources = UriFilter(profile.resources)
        self._pinned = NameFilter(Patterns(allow=profile.pinned)) if profile.pinned else None
        self._default = default if default is not None and default.naming is not None else None
        # Everything under the table's names: the view is the table (and costs nothing).
        self.identity = (
            self.naming is None
            and self._servers == ["*"]
            and self._tools.everything
            and self._default is None
        )
        self._synced = -1
        self._offered.synced = (-1, -1)

    # -- which servers, tools, prompts and resources --

    def has_server(self, alias: str) -> bool:
        return any(fnmatchcase(alias, p) for p in self._servers)

    def admits_tool(self, alias: str, name: str) -> bool:
        return self.has_server(alias) and self._tools.admits(alias, name)

    def admits_prompt(self, alias: str, name: str) -> bool:
        return self.has_server(alias) and self._prompts.admits(alias, name)

    def admits_resource(self, alias: str, uri: str) -> bool:
        return self.has_server(alias) and self._resources.admits_uri(alias, uri)

    def rules(self) -> Hashable:
        return (tuple(self._servers), self._resources.rules())

    # -- keeping up with the table --

    def sync(self) -> int:
        """Catch up with the table; returns ``version``."""
        if self._synced == self.registry.version:
            return self.version
        self._synced = self.registry.version
        if self.identity:
            # The table's own entries and listing, built only when asked for: a change
            # during start-up must not cost a listing (see ToolTable.size).
            self._entries = []
            self._by_local = {}
        else:
            kept = [e for e in self.registry.entries() if self.admits_tool(e.alias, e.name)]
            table, naming, default = self.registry.naming, self.naming, self._default
            own = naming if naming is not None and naming != table else None
            if default is not None and default.naming == table:
                default = None
            if own is not None or default is not None:
                kept = self._rename(kept, own, default)
            self._entries = kept
            self._by_local = {e.local: e for e in kept}
        refs, exposed = self._exposure()
        if exposed != self._exposed:
            self._exposed, self._exposed_refs = exposed, refs
            self.version += 1
        return self.version

    def _rename(
        self, entries: list[Entry], naming: NamingConfig | None, default: ProfileView | None
    ) -> list[Entry]:
        """The view's own entries: under ``naming`` (None: the table's names), each with
        every other name it has (``Entry.other_names``): the table's, ``default``'s
        (another naming of the default profile's) and these before their hashes."""
        names = {} if naming is None else assign(naming, ((e.alias, e.name) for e in entries))
        theirs = {} if default is None else default.names_by_key()
        # A tool the default does not show: what its naming would call it.
        template = None if default is None or default.naming is None else default.naming.template
        own: dict[tuple[str, str], tuple[Entry, object, Entry]] = {}
        out: list[Entry] = []
        for e in entries:
            key = (e.alias, e.name)
            wanted = [e.local, *e.other_names]
            if naming is None:
                local = e.local
            else:
                local = names[key]
                wanted.append(candidate_name(naming.template, *key))
            if template is not None:
                wanted.extend(theirs.get(key) or (candidate_name(template, *key),))
            others = tuple(dict.fromkeys(n for n in wanted if n != local))
            cached = self._own.get(key)
            # The table marks an entry changed whenever its server's state changes.
            if (
                cached is not None
                and cached[0] is e
                and cached[1] is e.look
                and cached[2].local == local
                and cached[2].other_names == others
            ):
                mine = cached[2]
            else:
                mine = e.renamed(local, others)
            own[key] = (e, e.look, mine)
            out.append(mine)
        self._own = own
        return out

    def names_by_key(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """Every name of each of the view's tools, by ``(alias, name)``: its local name
        first."""
        return {(e.alias, e.name): (e.local, *e.other_names) for e in self.entries()}

    def _exposure(self) -> tuple[Any, Any]:
        """What ``tools/list`` depends on, to compare with the last time: each listed
        entry and its look by identity (a new one is a change), and the objects, kept
        so that no identity is reused while it is compared."""
        if self.identity and self.profile.discovery == "all":
            return None, ("table", self.registry.version)  # any change of the table
        if self.mode == "all":
            looks = [(e, e.look) for e in self.listing()]
            return looks, ("all", [(id(e), id(look)) for e, look in looks])
        pinned = [(e, e.look) for e in self.pinned()]
        key = ("search", tuple(self.servers()), self.count(), [(id(e), id(k)) for e, k in pinned])
        return pinned, key

    def offered(self) -> tuple[int, int]:
        """(prompts, resources): each grows only when what the view's agents are listed
        of it changed (a server outside the view leaves them alone)."""
        catalog = self.registry
        held = self._offered
        now = (catalog.prompts.version, catalog.resources.version)
        if now[0] != held.synced[0]:
            prompts = catalog.prompts.listing(self.admits_prompt)
            if prompts != held.prompts:
                held.prompts = prompts
                held.versions[0] += 1
        if now[1] != held.synced[1]:
            listed = catalog.resources.listing(self)
            templates = catalog.resources.template_listing(self)
            if (listed, templates) != held.resources:
                held.resources = (listed, templates)
                held.versions[1] += 1
        held.synced = now
        return held.versions[0], held.versions[1]

    # -- queries --

    @property
    def mode(self) -> Mode:
        discovery = self.profile.discovery
        if discovery == "auto":
            return "search" if self.count() > self.cap else "all"
        return discovery

    def entries(self) -> list[Entry]:
        self.sync()
        return self.registry.entries() if self.identity else self._entries

    def count(self) -> int:
        self.sync()
        return self.registry.size() if self.identity else len(self._entries)

    def listing(self) -> list[Entry]:
        self.sync()
        if self.identity:
            return self.registry.listing()
        return self._entries

    def lookup(self, local: str) -> Entry | None:
        if self.identity:  # the hot path of every call: no sync needed
            return self.registry.lookup(local)
        self.sync()
        return self._by_local.get(local)

    def closest(self, name: str, n: int = 3) -> list[str]:
        names = [e.local for e in self.entries() if e.held is None]  # approved
        # A ratio of 0.5 needs the name within 3x the length of a local name, and difflib
        # indexes every character of it: a huge name from an agent would cost memory
        # and time in proportion to its length, for a match that cannot exist.
        if len(name) > 3 * max((len(x) for x in names), default=0):
            return []
        return difflib.get_close_matches(name, names, n=n, cutoff=0.5)

    def pinned(self) -> list[Entry]:
        rule = self._pinned
        if rule is None:
            return []
        return [e for e in self.entries() if rule.admits(e.alias, e.name)]

    def servers(self) -> list[str]:
        """The aliases with a tool in the view."""
        return sorted({e.alias for e in self.entries()})

    def markers(self) -> dict[str, str]:
        """The outage marker of each of the view's servers that is down."""
        out = {}
        for alias in self.servers():
            marker = self.registry.server_flags(alias)[1]
            if marker:
                out[alias] = marker
        return out

    def search(self, query: str, k: int) -> list[Hit]:
        return self.index().search(query, k)

    def index(self) -> ToolIndex:
        """The search index over the view, rebuilt only when its tools change (not when
        a server merely goes down: an outage does not move a tool in the ranking)."""
        entries = self.entries()
        key = [(e.local, e.tool) for e in entries]
        same = len(key) == len(self._index_key) and all(
            a[0] == b[0] and a[1] is b[1] for a, b in zip(key, self._index_key, strict=True)
        )
        if self._index is None or not same:
            # Here, not at the top: only a profile in search mode loads the index.
            from .search import ToolDoc, ToolIndex

            self._index = ToolIndex(_doc(e, ToolDoc) for e in entries)
            self._index_key = key
        return self._index

    def over_cap(self) -> str | None:
        count = self.count()
        if self.profile.discovery == "all" and count > self.cap:
            return (
                f"profile {self.name!r}: {count} tools is more than its cap ({self.cap}); "
                'some hosts refuse that many (discovery = "auto" would switch to search)'
            )
        return None


class _Offered:
    """What a view last listed of prompts and of resources, at which versions of the
    tables, and its own versions of each."""

    __slots__ = ("prompts", "resources", "synced", "versions")

    def __init__(self) -> None:
        self.synced = (-1, -1)
        self.versions = [0, 0]
        self.prompts: list[msgspec.Raw] | None = None
        self.resources: tuple[list[msgspec.Raw], list[msgspec.Raw]] | None = None


def _doc(entry: Entry, doc: type[ToolDoc]) -> ToolDoc:
    tool = entry.tool
    try:
        # A schema past what any tool's arguments need is searched by the tool's texts
        # alone: reading it for the index again at each change would cost the loop more.
        if len(tool.inputSchema) > _SCHEMA_INDEXED:
            schema = {}
        else:
            schema = _decode_schema.decode(tool.inputSchema)
    except (msgspec.DecodeError, RecursionError):
        # Not an object, or nested too deep to read here (the index may be built
        # deeper in the stack than the listing was decoded): searched by its texts.
        schema = {}
    return doc(
        name=entry.local,
        server=entry.alias,
        original=entry.name,
        title=tool.title if isinstance(tool.title, str) else "",
        description=tool.description if isinstance(tool.description, str) else "",
        input_schema=schema,
    )
