"""What the daemon answers ``mcpd approvals`` with: the calls that wait for a person
with the list's version (``ApprovalsListing``), one of them with its arguments whole
(``ApprovalShown``), and one decided (``ApprovalDecided``).

Both ends read these: the daemon builds them (``agents.own_methods.approval_methods``)
and the command line decodes its replies into them, so they hold only msgspec values
and import nothing of mcpd's but the pending call as the status shows it. The fields
are in the order the JSON shows them."""

from __future__ import annotations

import msgspec

from .status_document import PendingView


class ApprovalsListing(msgspec.Struct, kw_only=True):
    """``mcpd/approvals/list`` and ``watch``: what waits, oldest first, and the
    version of the list, which a watch waits past."""

    approvals: list[PendingView]
    version: int


class ApprovalShown(msgspec.Struct, kw_only=True):
    """``mcpd/approvals/show``: a call that waits, with its arguments whole, written
    one member or item a line."""

    approval: PendingView
    arguments: str


class ApprovalDecided(msgspec.Struct, kw_only=True):
    """``mcpd/approvals/decide``: the call decided, how, and by whom."""

    decided: PendingView
    approved: bool
    by: str
