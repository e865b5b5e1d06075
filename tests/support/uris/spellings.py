"""Spellings of ``file:///home/u/.ssh/id_rsa`` that a server's URL reading takes for
that path: what a profile's deny of the folder must keep out, however an agent writes
it."""

from __future__ import annotations

from typing import Final

DENIED: Final = "file:///home/u/.ssh/id_rsa"
DENIED_FOLDER: Final = "file:///home/u/.ssh/*"
RESPELLED: Final = (
    "file:///home/u/./.ssh/id_rsa",
    "file:///home/u/x/../.ssh/id_rsa",
    "file:///home/u/%2essh/id_rsa",
    "file:///home/u\\.ssh\\id_rsa",
    "file:////home//u/.ssh/id_rsa",
    "file:///home/u/.ssh/id_rsa#",
    "file:///home/u/.ssh/id_rsa?x=1",
    "FILE:///home/u/.ssh/id_rsa",
    " file:///home/u/.ssh/id_rsa",
    # Node's fileURLToPath(new URL(uri)) and Python's url2pathname read these as
    # /home/u/.ssh/id_rsa too.
    "file://localhost/home/u/.ssh/id_rsa",
    "FILE://LOCALHOST/home/u/.ssh/id_rsa",
    "file:/home/u/.ssh/id_rsa",
    "file:home/u/.ssh/id_rsa",
    "file:///home/u/x%3f/../.ssh/id_rsa",
    "file:///home/u/x%23/../.ssh/id_rsa",
    # Node maps look-alike letters of a host to localhost and drops it; Python's
    # urllib takes any host that resolves to this machine.
    "file://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/home/u/.ssh/id_rsa",
    "file://local\u00adhost/home/u/.ssh/id_rsa",
    "file://lo%C2%ADcalhost/home/u/.ssh/id_rsa",
    "file://\u2113ocalhost/home/u/.ssh/id_rsa",
    "file://127.1/home/u/.ssh/id_rsa",
)
