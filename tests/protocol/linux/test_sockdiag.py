"""The sock_diag request for one TCP socket by its addresses, and the owner read from
the kernel's reply: found, held by no process, unknown, refused, or a reply that
answers something else."""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable

import pytest

from protocol.linux import sockdiag
from protocol.linux.proctcp import HeldSocket
from protocol.linux.sockdiag import DiagRefused, holder, numbered, owner, requests

V4 = ipaddress.ip_address("127.0.0.1")
MAPPED = ipaddress.ip_address("::ffff:127.0.0.1")
V6 = ipaddress.ip_address("::1")
HEADER = struct.Struct("=IHHII")


def fields(body: bytes) -> tuple[int, int, int, bytes, bytes]:
    """A request's family, ports and both addresses."""
    family, protocol, _ext, _pad, _states = struct.unpack_from("=BBBBI", body)
    assert protocol == 6  # TCP
    port, peer = struct.unpack_from("!HH", body, 8)
    return family, port, peer, body[12:28], body[28:44]


def reply_to(request: bytes, uid: int = 1000, inode: int = 777, *, same: bool = True) -> bytes:
    """The kernel's answer to ``request``: the socket it names (``same``: the one asked
    for, else a listener on its port, whose peer is no address)."""
    body = request[HEADER.size :]
    ident = body[8:44] if same else body[8:10] + b"\0\0" + body[12:28] + bytes(16)
    msg = (
        struct.pack("=BBBB", body[0], 1, 0, 0)
        + ident
        + struct.pack("=III", 0, 0xFFFFFFFF, 0xFFFFFFFF)
        + struct.pack("=III", 0, 0, 0)
        + struct.pack("=II", uid, inode)
    )
    seq = HEADER.unpack_from(request)[3]
    return HEADER.pack(HEADER.size + len(msg), sockdiag.SOCK_DIAG_BY_FAMILY, 0, seq, 0) + msg


def error_to(request: bytes, errno: int) -> bytes:
    seq = HEADER.unpack_from(request)[3]
    payload = struct.pack("=i", -errno) + request[:16]
    return HEADER.pack(HEADER.size + len(payload), 2, 0, seq, 0) + payload


def test_an_ipv4_pair_is_asked_as_ipv4_then_as_mapped_ipv6() -> None:
    first, second = requests((V4, 40000), (V4, 8080))
    assert fields(first) == (2, 40000, 8080, V4.packed + bytes(12), V4.packed + bytes(12))
    assert fields(second) == (10, 40000, 8080, MAPPED.packed, MAPPED.packed)
    # How mcpd's dual-stack socket writes an IPv4 peer is the same question.
    assert requests((MAPPED, 40000), (MAPPED, 8080)) == [first, second]


def test_an_ipv6_pair_is_one_question() -> None:
    [only] = requests((V6, 40000), (V6, 8080))
    assert fields(only) == (10, 40000, 8080, V6.packed, V6.packed)


def test_a_request_is_one_numbered_message_for_all_states() -> None:
    [body] = requests((V6, 1), (V6, 2))
    message = numbered(body, 42)
    length, kind, flags, seq, port = HEADER.unpack_from(message)
    assert (length, kind, flags, seq, port) == (len(message), 20, 1, 42, 0)
    assert struct.unpack_from("=I", message, HEADER.size + 4) == (0xFFFFFFFF,)


def test_the_socket_asked_for_names_its_owner() -> None:
    request = numbered(requests((V4, 40000), (V4, 8080))[0], 7)
    assert owner(reply_to(request, uid=65534), request) == 65534
    assert owner(reply_to(request, uid=0), request) == 0
    # and the inode of its file, which its holders' descriptors link to
    assert holder(reply_to(request, uid=1000, inode=4321), request) == HeldSocket(1000, 4321)
    assert holder(reply_to(request, uid=0, inode=0), request) is None


def test_a_socket_no_process_holds_or_none_at_all_names_nobody() -> None:
    request = numbered(requests((V4, 40000), (V4, 8080))[0], 7)
    assert owner(reply_to(request, uid=0, inode=0), request) is None  # closed, lingering
    assert owner(error_to(request, 2), request) is None  # ENOENT: no such socket


def test_another_socket_in_the_reply_is_not_taken_for_the_one_asked() -> None:
    request = numbered(requests((V4, 40000), (V4, 8080))[0], 7)
    assert owner(reply_to(request, uid=1001, same=False), request) is None


def test_a_refusal_is_not_an_answer() -> None:
    request = numbered(requests((V6, 1), (V6, 2))[0], 9)
    with pytest.raises(DiagRefused) as refused:
        owner(error_to(request, 13), request)
    assert refused.value.errno == 13


@pytest.mark.parametrize(
    "broken",
    [
        lambda reply: reply[:10],  # shorter than a header
        lambda reply: reply[:40],  # shorter than it says
        lambda reply: HEADER.pack(len(reply), 20, 0, 8, 0) + reply[HEADER.size :],  # seq 8
        lambda reply: HEADER.pack(len(reply), 3, 0, 7, 0) + reply[HEADER.size :],  # NLMSG_DONE
        lambda reply: HEADER.pack(24, 20, 0, 7, 0) + reply[HEADER.size : 24],  # no owner
    ],
    ids=["cut-header", "cut-body", "other-sequence", "other-kind", "no-owner"],
)
def test_a_reply_that_answers_nothing_asked_is_an_error(broken: Callable[[bytes], bytes]) -> None:
    request = numbered(requests((V4, 40000), (V4, 8080))[0], 7)
    with pytest.raises(ValueError):
        owner(broken(reply_to(request)), request)
