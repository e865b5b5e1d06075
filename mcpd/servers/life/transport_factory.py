"""How a runner reaches its server: a stdio process, a Streamable HTTP endpoint, or an
old HTTP+SSE one (``cfg.kind``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from transports.base import AuthHook, NotificationHandler, Transport
from transports.stdio.params import StdioParams
from transports.stdio.transport import open_stdio_transport

from ...config.sandboxing.per_server import inherit_of, provided_env, sandbox_of
from ...config.tables.model import Config
from ...config.tables.servertable import ServerConfig

if TYPE_CHECKING:
    from transports.http.params import HttpParams


@contextlib.asynccontextmanager
async def open_transport(
    alias: str,
    cfg: ServerConfig,
    config: Config,
    on_notification: NotificationHandler,
    auth: AuthHook | None = None,
) -> AsyncIterator[Transport]:
    """``auth``: the credentials an HTTP server's messages carry (a stdio one gets none)."""
    if cfg.command is not None:
        params = stdio_params(alias, cfg, config)
        async with open_stdio_transport(alias, params, on_notification=on_notification) as t:
            yield t
    elif cfg.kind == "sse":
        from transports.sse.transport import open_legacy_sse_transport

        assert cfg.url is not None
        async with open_legacy_sse_transport(
            alias,
            cfg.url,
            http_settings(alias, cfg, config),
            on_notification=on_notification,
            auth=auth,
        ) as sse:
            yield sse
    else:
        from transports.http.transport import open_http_transport

        assert cfg.url is not None
        async with open_http_transport(
            alias,
            cfg.url,
            http_settings(alias, cfg, config),
            on_notification=on_notification,
            auth=auth,
        ) as t:
            yield t


def stdio_params(alias: str, cfg: ServerConfig, config: Config) -> StdioParams:
    assert cfg.command is not None
    sandbox = sandbox_of(alias, cfg, config)
    return StdioParams(
        command=cfg.command,
        args=tuple(cfg.args),
        env=cfg.env or None,
        cwd=cfg.cwd,
        inherit_env=inherit_of(cfg),
        withheld=config.withheld_from(alias),
        provided=provided_env(sandbox, config),
        sandbox=sandbox,
        max_line=config.daemon.max_line_bytes,
        read_budget=config.read_budget(alias),
    )


def http_settings(alias: str, cfg: ServerConfig, config: Config) -> HttpParams:
    """What both HTTP transports take from a server's config."""
    from transports.http.params import HttpParams

    return HttpParams(
        headers=cfg.headers,
        connect_timeout=cfg.connect_timeout,
        tls_verify=cfg.tls_verify,
        ca_file=cfg.ca_file,
        pool_size=cfg.concurrency(),
        max_body=config.daemon.max_line_bytes,
        read_budget=config.read_budget(alias),
    )


TransportFactory = Callable[
    [str, ServerConfig, Config, NotificationHandler, AuthHook | None],
    AbstractAsyncContextManager[Transport],
]
