"""How an unavailable server is shown to a model: a tool result it can read and act on."""

from __future__ import annotations

import time
from datetime import UTC, datetime, tzinfo

import msgspec
import trio

from protocol.mcp import core as mcp
from protocol.shown.visible import QUOTED, cut, quote, visible

from ...policy.redaction.guard import SecretGuard
from ...registry.text.clean import clean_text


def wall(mono: float) -> float:
    """A trio clock reading as Unix time (the clock may be a test's MockClock)."""
    return time.time() + (mono - trio.current_time())


def _moment(mono: float, tz: tzinfo | None) -> datetime:
    """The moment ``mono`` is; one past the dates a datetime holds as the last it does,
    so that writing a far time down never fails whoever writes it."""
    try:
        return datetime.fromtimestamp(wall(mono), tz)
    except (OverflowError, OSError, ValueError):
        return datetime.max.replace(tzinfo=tz)


def iso_of_monotonic(mono: float | None) -> str | None:
    if mono is None:
        return None
    return _moment(mono, UTC).isoformat(timespec="seconds")


def clock_time(mono: float | None) -> str:
    """Local wall time for people (status tables, markers, the journal), with its date
    when that is not today's: a retry a day away is not read as one just past."""
    if mono is None:
        return "-"
    at = _moment(mono, None)
    return at.strftime("%H:%M:%S" if at.date() == datetime.now().date() else "%Y-%m-%d %H:%M:%S")


_PHRASES = {
    "failed": "is down",
    "open": "is failing (circuit open)",
    "half_open": "is being probed",
    "crash_loop": "keeps crashing",
    "unreachable": "cannot be reached",
    "starting": "is starting",
    "stopped": "is stopped",
    "busy": "is busy",
    "timeout": "timed out",
    "needs_login": "needs a login",
    "unresolved": "cannot start",
}


def last_line(lines: list[str]) -> str | None:
    """The last line of a child's stderr that says anything, for an outage to quote."""
    return next((cut(line.strip(), QUOTED) for line in reversed(lines) if line.strip()), None)


def cleaned_line(text: str) -> str:
    """``text`` cleaned, with what is left of its line breaks and tabs as escapes."""
    return visible(clean_text(text)[0])


class Outage(msgspec.Struct, frozen=True):
    """Why a call could not reach its server. ``since``/``retry_at`` are trio clock times."""

    server: str
    state: str
    reason: str
    since: float | None = None
    retry_at: float | None = None
    # A child's last line on stderr ("Error: missing API_KEY"), where an exit status
    # alone would tell a model (and the user it talks to) nothing they can act on.
    stderr: str | None = None

    def __post_init__(self) -> None:
        # The reason quotes what a server wrote, and a model reads it: cleaned as
        # everything else a server writes for it is, and one line: it goes into
        # sentences of mcpd's (the instructions' outages, a call's result), where a
        # line break of the server's would start a line that reads as mcpd's. The
        # server's words in a reason are quoted where they are put in. The stderr line
        # is kept as written: ``meta`` and ``sentence`` show its hidden characters as
        # escapes alike, so that what hid in it is seen, not silently left out.
        msgspec.structs.force_setattr(self, "reason", cleaned_line(self.reason))

    def masked(self, guard: SecretGuard) -> Outage:
        """This outage, or a copy with the secrets mcpd holds masked in what it quotes
        of the server."""
        reason = guard.text(self.server, self.reason, "why a call failed")
        stderr = self.stderr
        if stderr is not None:
            stderr = guard.text(self.server, stderr, "its stderr")
        if reason is self.reason and stderr is self.stderr:
            return self
        return msgspec.structs.replace(self, reason=reason, stderr=stderr)

    def for_agent(self, own_user: bool) -> Outage:
        """This outage as an agent is told it: with the server's last line on stderr
        only for an agent of the daemon's own user or root (``own_user``). A server
        that several agents share writes there what any of them sent it."""
        if own_user or self.stderr is None:
            return self
        return msgspec.structs.replace(self, stderr=None)

    def meta(self) -> dict[str, str | None]:
        out = {
            "server": self.server,
            "state": self.state,
            "reason": self.reason,
            "since": iso_of_monotonic(self.since),
            "retry_at": iso_of_monotonic(self.retry_at),
        }
        if self.stderr is not None:
            out["stderr"] = visible(self.stderr)
        return out

    def plain_reason(self) -> str:
        """The reason without the alias most transport messages start with."""
        for lead in (f"{self.server}: ", f"{self.server} "):
            if self.reason.startswith(lead) and lead.endswith(": "):
                return self.reason[len(lead) :]
        return self.reason

    def sentence(self) -> str:
        if self.state == "too_large":
            return (
                f"The result from the tool server '{self.server}' was too large to pass on: "
                f"{self.plain_reason()}. '{self.server}' is still running"
            ) + "."
        if self.state == "cancelled":
            return (
                f"The tool server '{self.server}' cancelled this call itself: "
                f"{self.plain_reason()}. '{self.server}' is still running"
            ) + "."
        if self.state == "malformed":
            return (
                f"The tool server '{self.server}' sent a malformed reply to this call: "
                f"{self.plain_reason()}. '{self.server}' is still running"
            ) + "."
        if self.state == "timeout":
            # One call took too long: the server itself may be fine, and a model told it
            # is unavailable gives up on all its tools.
            text = (
                f"The tool server '{self.server}' did not answer this call in time: "
                f"{self.plain_reason()}."
            )
        else:
            text = (
                f"The tool server '{self.server}' is unavailable ({self.state}): "
                f"{self.plain_reason()}."
            )
        if self.retry_at is not None:
            wait = max(0.0, self.retry_at - trio.current_time())
            text += f" mcpd will retry at {clock_time(self.retry_at)} (in {wait:.0f} s)."
        if self.stderr:
            text += f" Its last line on stderr: {quote(self.stderr)}."
        return text

    def result(self) -> mcp.CallToolResult:
        if self.state == "too_large":
            text = (
                f"{self.sentence()} Ask for less (a narrower query, a smaller page or "
                "range), or raise daemon.max_line_bytes."
            )
        elif self.state == "malformed":
            text = (
                f"{self.sentence()} The call was not completed. Other tools keep working; "
                "the same call would most likely get the same reply, so try another "
                "approach or different arguments."
            )
        elif self.state == "needs_login":
            # Waiting does not help here; the user has to act, so say who and how.
            text = (
                f"{self.sentence()} The call was not completed. Other tools keep working; "
                f"ask the user to log in to '{self.server}' (`mcpd auth login {self.server}`) "
                "or to give mcpd a token for it, then call this tool again."
            )
        elif self.state == "unresolved":
            # Calling again cannot help until the config (or its environment) is fixed.
            text = (
                f"{self.sentence()} The call was not completed. Other tools keep working; "
                f"ask the user to fix mcpd's configuration for '{self.server}' and run "
                "`mcpd reload`, then call this tool again."
            )
        elif self.state == "timeout":
            text = (
                f"{self.sentence()} The call was not completed. Other tools keep working; "
                "call this tool again (with a smaller request if it takes one) or try "
                "another approach."
            )
        else:
            text = (
                f"{self.sentence()} The call was not completed. Other tools keep working; "
                "try another approach or call this tool again later."
            )
        return mcp.CallToolResult(
            content=[mcp.TextContent(text)],
            isError=True,
            meta={"mcpd/outage": self.meta()},
        )

    def marker(self) -> str:
        """The short prefix put on an unavailable tool's description."""
        since = f" since {clock_time(self.since)}" if self.since is not None else ""
        retry = f", retrying at {clock_time(self.retry_at)}" if self.retry_at is not None else ""
        phrase = _PHRASES.get(self.state, f"is {self.state}")
        if self.state == "needs_login":
            retry = f" (run `mcpd auth login {self.server}`)"
        elif self.state == "unresolved":
            retry = f": {self.reason}"
        return f"unavailable: {self.server} {phrase}{since}{retry}"
