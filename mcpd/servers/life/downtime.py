"""A server's phase, and while it is down: since when, why, and when mcpd tries again.

The runner decides when an attempt starts, fails or connects; this record keeps what
the server's state, its outage and its journal lines are made from, publishes every
change, and waits out the time until the next attempt. Its journal lines name the
runner's code that called it as their source (``stacklevel``), as the server's other
lines do.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from .backoff import RestartPolicy
from .events import Failure, LifecycleJournal

# The longest a server's own Retry-After keeps it from being tried again: a time
# further off would leave it down for good, and one past what a clock can show could
# be neither logged nor shown in status.
MAX_RETRY_AFTER: Final = 86_400.0


def server_wait(retry_after: float | None) -> float | None:
    """How long a server's Retry-After keeps it from being asked again, in seconds: None
    when it said nothing that is a wait (no header, one that does not parse, a time
    already past), capped at ``MAX_RETRY_AFTER``."""
    return min(retry_after, MAX_RETRY_AFTER) if retry_after else None


class Downtime:
    def __init__(
        self,
        events: LifecycleJournal,
        policy: RestartPolicy,
        publish: Callable[[], None],
        *,
        process: bool,
        login_changed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.events = events
        self.policy = policy
        self._publish = publish
        # A child process (stdio) stays one: an HTTP server switches only between the
        # two HTTP transports.
        self.process = process
        # For a server with OAuth: returns once its login changed.
        self._login_changed = login_changed
        self.phase = "starting"
        self.since = trio.current_time()
        self.last_error: str | None = None
        self.down_since: float | None = None
        self.retry_at: float | None = None
        self.unreachable = False  # the last attempt could not connect at all
        self.not_started = False  # the last attempt could not start the child at all
        self._phase_changed = trio.Event()

    def set_phase(self, phase: str, error: str | None = None) -> None:
        now = trio.current_time()
        if error is not None:
            self.last_error = error
        if phase != self.phase:
            self.phase = phase
            self.since = now
            self._phase_changed.set()
            self._phase_changed = trio.Event()
        self._publish()

    async def phase_changed(self) -> None:
        await self._phase_changed.wait()

    def failed(self, failure: Failure, *, unreachable: bool) -> None:
        """An attempt failed: the restart policy says when to try again."""
        now = trio.current_time()
        self.unreachable = unreachable
        self.not_started = failure.log_event == "spawn_failed"
        first = self.down_since is None
        if first:
            self.down_since = now
        restart = self.policy.on_failure(now)
        # A server that said when to come back (429/503 Retry-After) is not asked sooner.
        wait = server_wait(failure.retry_after)
        self.retry_at = restart.at if wait is None else max(restart.at, now + wait)
        changed = failure.reason != self.last_error
        self.last_error = failure.reason
        self.events.failed(
            failure.log_event,
            failure.detail,
            failure.reason,
            retry_at=self.retry_at,
            restart=restart,
            policy=self.policy.config,
            first=first,
            changed=changed,
            process=self.process,
        )
        self.set_phase("waiting", failure.reason)

    def login_needed(self, reason: str) -> None:
        """The server wants a person to log in: no backoff, no breaker, a state of its own."""
        now = trio.current_time()
        if self.down_since is None:
            self.down_since = now
        self.retry_at = None
        if self.phase != "needs_login" or reason != self.last_error:
            # The runner calls this from its own _login_needed: the line names that one's caller.
            message = f"needs a login: {reason}"
            self.events.event(logging.WARNING, "needs_login", message, reason, depth=2)
        self.set_phase("needs_login", reason)

    def cannot_start(self, reason: str) -> None:
        """The server's config cannot be expanded here (``ServerConfig.unresolved``).
        Not retried: nothing changes until the environment or the secret file does, and
        then a reload re-reads the config (a changed server gets a new runner)."""
        if self.down_since is None:
            self.down_since = trio.current_time()
        self.retry_at = None
        message = f"cannot start: {reason}"
        self.events.event(logging.ERROR, "unresolved", message, reason, depth=2)
        self.set_phase("unresolved", reason)

    async def until_retry(self) -> None:
        """Until the next attempt is worth making: its restart time, or a new login."""
        if self.phase == "unresolved":
            await trio.sleep_forever()
        if self.phase == "needs_login" and self._login_changed is not None:
            # Retrying cannot help; a login can (`mcpd auth login`).
            await self._login_changed()
            return
        assert self.retry_at is not None
        if self._login_changed is None:
            await trio.sleep_until(self.retry_at)
        else:
            with trio.move_on_at(self.retry_at):
                await self._login_changed()  # a login is worth trying at once
        self.retry_at = None
        what = "restarting" if self.process else "reconnecting"
        self.events.restarting(what, self.policy.failures)

    def back_up(self) -> bool:
        """Connected and listed: the downtime, if any, is over. Whether there was one."""
        was_down = self.down_since is not None
        self.down_since = None
        self.last_error = None
        return was_down
