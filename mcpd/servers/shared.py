"""What the agent side and the servers share: the values that cross between them.

A call and what it comes to (``Call``, its ``Outcome``: the server's bytes, an
``Outage``, the server's JSON-RPC error, or mcpd's own result; ``Unqueued`` and
``CallRefused`` for what mcpd refused to send), the agent it is kept under (``AgentKey``)
and whose it is as bytes are shared out (``Whose``), the session it was sent in
(``SessionMark``), where its progress goes (``ProgressSink``) and who answers what its
server asks back (``Asker``, ``NO_ANSWER``); what the agent side says of a call still
queued (``QueuedCheck``); what a server said of itself (``Said``) and its history as
the status page draws it (``ServerHistory``), its row in ``mcpd status``
(``ServerRow``), its state as a listing carries it (``ServerState``) and what ``mcpd
reset`` did to it (``ResetOutcome``); the longest id of a server's task mcpd keeps
(``MAX_TASK_ID``); and what ``mcpd auth`` is answered of a login (``LoginBegun``,
``LoginDone``, ``LoggedOut``). The rows and the answers to ``mcpd`` commands are
``mcpd.server_row``'s and ``mcpd.login_answers``', where the command line, which may
not import ``servers/``, reads them too.

The agent side imports these from here, not from the modules that define them, and
from the rest of ``servers/`` only the two fronts ``daemon.py`` wires for it:
``all_servers.AllServers`` and ``auth_commands.Logins`` (``tests/test_layering.py``).
"""

from __future__ import annotations

from ..login_answers import LoggedOut, LoginBegun, LoginDone
from ..server_row import ResetOutcome, ServerRow, ServerState
from .asking.askback import NO_ANSWER, Asker
from .asking.progress import ProgressSink
from .calling.agent_key import AgentKey
from .calling.calls import Call, CallRefused, Outcome, QueuedCheck, SessionMark, Unqueued, Whose
from .calling.task_tools import MAX_TASK_ID
from .status.history import DAY, HOUR, ServerHistory
from .status.outage import Outage
from .status.state import Said

__all__ = [
    "DAY",
    "HOUR",
    "MAX_TASK_ID",
    "NO_ANSWER",
    "AgentKey",
    "Asker",
    "Call",
    "CallRefused",
    "LoggedOut",
    "LoginBegun",
    "LoginDone",
    "Outage",
    "Outcome",
    "ProgressSink",
    "QueuedCheck",
    "ResetOutcome",
    "Said",
    "ServerHistory",
    "ServerRow",
    "ServerState",
    "SessionMark",
    "Unqueued",
    "Whose",
]
