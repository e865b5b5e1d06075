"""Running a demo server as a process: stdio by default, or Streamable HTTP with
``--http HOST:PORT``, until its input ends or a signal comes."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence

import trio

from ..config.checks.endpoints import parse_listen
from ..config.tables.model import ConfigError
from ..local.service.logsetup import setup_logging
from .http import serve_http
from .runtime import DemoServer
from .stdio import DEFAULT_EOF_GRACE, serve_stdio

log = logging.getLogger("mcpd.demo")


def _parse_args(argv: Sequence[str] | None, server: DemoServer) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=f"The {server.info.name} MCP demo server (stdio unless --http)."
    )
    parser.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP at /mcp")
    parser.add_argument(
        "--ready-file", metavar="PATH", help="with --http: write the bound port here when ready"
    )
    parser.add_argument("--page-size", type=int, help="tools per tools/list page")
    parser.add_argument(
        "--eof-grace",
        type=float,
        default=DEFAULT_EOF_GRACE,
        metavar="SECONDS",
        help="stdio: how long requests may still run after stdin closes",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    if args.page_size is not None and args.page_size < 1:
        parser.error("--page-size must be at least 1")
    if args.http is not None:
        try:
            args.host, args.port = parse_listen(args.http, "--http")
        except ConfigError:
            parser.error("--http wants HOST:PORT, e.g. 127.0.0.1:0")
    elif args.ready_file is not None:
        parser.error("--ready-file needs --http")
    return args


def run_demo(server: DemoServer, argv: Sequence[str] | None = None) -> None:
    """Command-line entry point: serve ``server`` on stdio or HTTP until EOF or a signal."""
    args = _parse_args(argv, server)
    # In mcpd's own format: the demo's HTTP server writes to the terminal mcpd serve --demo
    # runs in, beside mcpd's lines.
    setup_logging("stderr", args.log_level)
    if args.page_size is not None:
        server.page_size = args.page_size
    trio.run(_main, server, args)


async def _main(server: DemoServer, args: argparse.Namespace) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal, nursery.cancel_scope, server.info.name)
        if args.http is not None:
            await serve_http(server, args.host, args.port, ready_file=args.ready_file)
        else:
            await _serve_process_stdio(server, args.eof_grace)
            nursery.cancel_scope.cancel()


async def _stop_on_signal(scope: trio.CancelScope, name: str) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            # Under mcpd serve --demo, the signal is mcpd stopping its server (as it
            # ends, or when it refuses to start): beside mcpd's own lines, a line at
            # info would read as if the demo had been stopped from outside.
            log.debug("%s stopping on %s", name, signal.Signals(signum).name)
            scope.cancel()
            return


async def _serve_process_stdio(server: DemoServer, eof_grace: float) -> None:
    # Only protocol messages may reach stdout: keep a private copy of it for them and
    # point fd 1 (and print) at stderr, so a stray print cannot corrupt the stream.
    in_fd, out_fd = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        async with trio.lowlevel.FdStream(in_fd) as stdin, trio.lowlevel.FdStream(out_fd) as out:
            await serve_stdio(server, stdin, out, eof_grace=eof_grace)
    finally:
        log.info("%s stopped", server.info.name)
