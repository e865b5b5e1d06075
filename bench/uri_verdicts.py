"""What a profile's ``resources`` patterns cost the loop for one server's resource list:
the first listing after the list changed (each URI judged), and the next one of another
agent of the profile (each verdict kept with the list). The list is read as a server's
is (``ListTrim``): a URI past ``MAX_URI``, or past what a list's URIs may hold in all
(``LISTED_URI_CHARS``), is left out.

    .venv/bin/python -m bench.uri_verdicts [--items N] [--rounds N]

Two lists: ``plain``, N resources of short ``file`` URIs; ``climbing``, N resources whose
URIs climb ``%2e%2e/`` up to the longest a list may hold (``MAX_URI``), the costliest
shape to judge. The profile denies ``*/file:///etc/*``. Prints milliseconds for each,
the median of the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcpd.config.tables.model import NamingConfig
from mcpd.config.tables.profiles import Patterns, ProfileConfig
from mcpd.registry.gating.limits import DEFAULT_LIMITS, ListTrim
from mcpd.registry.profiles.views import ProfileView
from mcpd.registry.tables.catalog import Catalog
from protocol.mcp import features
from protocol.mcp.uri_templates import MAX_URI

CLIMB = "%2e%2e/"
PROFILE = ProfileConfig(resources=Patterns(deny=["*/file:///etc/*"]))


def _uris(shape: str, items: int) -> Callable[[int], list[str]]:
    """The list's URIs at each of its versions."""
    if shape == "plain":
        return lambda v: [f"file:///home/user/project/docs/{v}/note-{i}.md" for i in range(items)]
    climbs = CLIMB * ((MAX_URI - 16) // len(CLIMB))
    return lambda v: [f"file:///{climbs}{v}/{i}" for i in range(items)]


def _view(catalog: Catalog) -> ProfileView:
    view = ProfileView("default", catalog)
    view.configure(PROFILE, catalog.naming, 128)
    return view


def _ms(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000


def measure(shape: str, items: int, rounds: int) -> tuple[int, float, float]:
    catalog = Catalog(NamingConfig())
    uris = _uris(shape, items)
    first, again, kept = [], [], 0
    for version in range(rounds):
        trim = ListTrim("srv", "resources", "resources/list", DEFAULT_LIMITS)
        listed = [features.Resource(uri=u, name="r") for u in uris(version)]
        listed = [r for r in listed if trim.addressable(r)]
        kept = len(listed)
        catalog.resources.update("srv", listed, [])
        first.append(_ms(_view(catalog).offered))
        again.append(_ms(_view(catalog).offered))
    return kept, statistics.median(first), statistics.median(again)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for shape in ("plain", "climbing"):
        kept, first, again = measure(shape, args.items, args.rounds)
        print(
            f"{shape:9} {args.items:6} resources ({kept:6} kept): first listing "
            f"{first:8.1f} ms, another agent's {again:6.1f} ms"
        )


if __name__ == "__main__":
    main()
