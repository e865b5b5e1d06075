"""A string that does not show itself: tokens, client secrets, codes, verifiers.

``repr()``/``str()`` print a fixed placeholder, so a struct holding a ``Secret``
can be logged, shown in a traceback or put into an error message without leaking
it. Reading the value takes an explicit ``reveal()``, which is easy to grep for.
"""

from __future__ import annotations

import hmac
from typing import Final

from .errors import OAuthProtocolError

_SHOWN: Final = "Secret('…')"


class Secret:
    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("a Secret holds a str")
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return _SHOWN

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> tuple[type[Secret], tuple[str]]:
        return (Secret, (self._value,))


def enc_hook(obj: object) -> object:
    """For ``msgspec`` encoders writing credentials to mcpd's own store."""
    if isinstance(obj, Secret):
        return obj.reveal()
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


def dec_hook(kind: type, obj: object) -> object:
    if kind is Secret:
        if isinstance(obj, str):
            return Secret(obj)
        # A file of the wrong shape is the file's fault: msgspec reports it with its path.
        raise TypeError(f"Expected `str`, got `{type(obj).__name__}`")
    raise NotImplementedError(f"cannot decode {kind!r}")


# The longest credential (access or refresh token, client id or secret) mcpd takes from
# an authorization server. A token rides in an ``Authorization`` header, which common
# HTTP servers hold to about 8 KiB, so a longer one could not be used anyway; and
# every credential mcpd holds is searched for in all that servers send, so its length
# is a cost an authorization server must not choose.
ISSUED_LONGEST: Final = 8192


def check_issued(what: str, field: str, value: str) -> str:
    """``value`` (the ``field`` an authorization server issued in ``what``), refused
    with an ``OAuthProtocolError`` naming the field when longer than ``ISSUED_LONGEST``."""
    if len(value) > ISSUED_LONGEST:
        raise OAuthProtocolError(
            f"{what} returned a {field} of {len(value)} characters; mcpd takes at most "
            f"{ISSUED_LONGEST}"
        )
    return value
