"""What this machine offers a sandbox, as ``host.probe`` finds it: a value the
sandbox's plan (``plan``) is made for."""

from __future__ import annotations

import msgspec


class SystemPath(msgspec.Struct, frozen=True):
    """A top-level system directory a strict sandbox shows, or the symlink it is."""

    path: str
    link: str | None = None  # the symlink's target, as read


class Machine(msgspec.Struct, frozen=True, kw_only=True):
    """What this machine offers (``host.probe``)."""

    bwrap: str | None = None
    prlimit: str | None = None
    nsenter: str | None = None  # joins a network namespace made beforehand
    # None when user, mount and PID namespaces work; else why they do not.
    namespaces: str | None = "not probed"
    network: str | None = "not probed"  # the same for a network namespace
    system: tuple[SystemPath, ...] = ()
    nofile_hard: int | None = None  # mcpd's own hard limit: a child cannot go above it
    # mcpd runs as root, whom RLIMIT_NPROC never holds: processes are limited by a pids
    # cgroup instead, where one can be made (``process.pidgroup``).
    root: bool = False
    pids_cgroup: bool = False
    # The command line that runs what follows it in a Landlock domain scoped to
    # abstract Unix sockets and signals (``landlock``); empty where there is none.
    # Its being there also says that a server may be started from the thread in such a
    # domain (``confined``), as every sandboxed one is but one that joins a netns; that
    # thread refuses the keyrings too, so it is there only where ``keyring_denial`` is None.
    confine: tuple[str, ...] = ()
    # None when ``confine`` is there; else why a sandboxed server still reaches the
    # host's abstract Unix sockets.
    scoping: str | None = "not probed"
    # None when bubblewrap can keep a server from making user namespaces of its own;
    # else why not.
    userns_denial: str | None = "not probed"
    # None when a sandboxed server can be started under the filter that refuses it the
    # kernel's keyrings (``keyring_filter``); else why not.
    keyring_denial: str | None = "not probed"
    # None when bubblewrap can size a tmpfs (``--size``); else why not, and a server's
    # /dev/shm (and a strict one's /tmp) holds what the kernel lets a tmpfs hold.
    tmpfs_unsized: str | None = "not probed"
