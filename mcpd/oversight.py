"""Who may call what, and the record of every call, as the daemon holds them: the
secrets mcpd knows, the policy gate, the approvals that wait for a person and the
audit log, built together from the config and reconfigured together on reload. Each
time rules come into force, the config's risks are warned of in the log as
``check-config`` warns of them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable

import trio

from protocol.shown.logfields import log_extra

from .audit.counts import render_call_metrics
from .audit.log import AuditLog
from .config.checks.aliases import alias_warnings
from .config.checks.held_args import secrets_in_args
from .config.checks.policy_rules import leavable
from .config.checks.servers import plain_http_credentials
from .config.credentials.secrets import HeldSecret
from .config.tables.model import Config
from .policy.decision.gate import CallGate
from .policy.redaction.guard import LogMask, SecretGuard
from .policy.redaction.masking import KnownSecrets
from .policy.waiting.approvals import Approvals
from .status_document import AuditStatus, PendingView

logger = logging.getLogger("mcpd")


class Oversight:
    def __init__(
        self, config: Config, state_dir: str, changed: Callable[[], None] = lambda: None
    ) -> None:
        """``changed``: called when a call begins or ends waiting for approval."""
        self.secrets = KnownSecrets()
        # What servers send is searched for the secrets held (``policy.redaction.guard``).
        self.guard = SecretGuard(self.secrets)
        self.approvals = Approvals(changed=changed)
        self.call_gate = CallGate(self.approvals, self.secrets)
        self.audit = AuditLog(state_dir, config.daemon, self.secrets, guard=self.guard)
        self.configure(config)
        self.settle(config)

    def expect(self, config: Config) -> None:
        """A config about to be in force: its secrets are guarded from now on, beside
        those of the config in force, until ``configure`` takes it up."""
        self.secrets.replace("next config", config.held_secrets)
        self.guard.refresh()

    def configure(self, config: Config, restarted: Collection[str] = ()) -> None:
        """The config's rules and audit settings: at start, and as soon as a reload
        accepts a config, before it stops or starts any server (``restarted``: those
        it stops or starts again). The servers that still run meanwhile are searched
        for what the config they were started under says too, until ``settle``."""
        self.guard.configure({*self.guard.patterns_for, *config.redacting()})
        self.call_gate.configure(config.policy, restarted)
        for warning in [*leavable(config), *alias_warnings(config)]:
            logger.warning("%s", warning, extra=log_extra(None, "config"))
        for alias, server in sorted(config.servers.items()):
            for warning in plain_http_credentials(alias, server):
                logger.warning("%s", warning, extra=log_extra(alias, "plain_http_credential"))
        for alias, warning in secrets_in_args(config):
            logger.warning("%s", warning, extra=log_extra(alias, "secret_in_args"))
        self.audit.configure(config.daemon)

    def settle(self, config: Config) -> None:
        """Every server that runs was started under ``config``: only its secrets are
        held, and only its servers' texts searched for credential formats."""
        self.secrets.replace("next config", ())
        self.secrets.replace("config", config.held_secrets)
        self.guard.configure(config.redacting())
        self.guard.forget(lambda alias: alias in config.servers)

    def watch_secrets(self, name: str, source: Callable[[], Iterable[HeldSecret]]) -> None:
        """Secrets that change on their own (OAuth tokens, the endpoint token)."""
        self.secrets.watch(name, source)
        self.guard.refresh()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # Every log record passes the guard on its way out, whoever wrote it: a
        # server's stderr, or its words quoted in an event.
        mask = LogMask(self.guard)
        handlers = list(logging.getLogger().handlers)
        for handler in handlers:
            handler.addFilter(mask)
        try:
            await self.audit.run(task_status=task_status)
        finally:
            for handler in handlers:
                handler.removeFilter(mask)

    def approvals_waiting(self, only: Callable[[str], bool] | None = None) -> list[PendingView]:
        """What ``mcpd status`` shows of the calls waiting for approval (of the servers
        ``only`` admits)."""
        return [v for v in self.approvals.list() if only is None or only(v.server)]

    def audit_status(self) -> AuditStatus:
        """What ``mcpd status`` shows of the audit log."""
        audit = self.audit
        return AuditStatus(
            file=audit.path if audit.to_file else None,
            journal=audit.to_journal,
            written=audit.written,
            dropped=audit.counts.dropped,
            write_errors=audit.counts.write_errors,
        )

    def metrics(self, only: Callable[[str], bool] | None = None) -> str:
        pending = len(self.approvals_waiting(only))
        return "\n".join(render_call_metrics(self.audit.counts, pending, only)) + "\n"
