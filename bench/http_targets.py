"""The configurations over Streamable HTTP: the echo server on HTTP, the floors
(``direct-http``, ``http-relay``) and mcpd's rows, each with an echo server of its own
on the target CPUs, its CPU counted in the row's and given apart (``--upstream-pid``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from bench.targets import (
    BENCH,
    PYTHON,
    Env,
    Launch,
    TargetUnavailable,
    log_tail,
    running_mcpd,
    socket_accepts,
    start,
    stop,
    wait_for,
)


@contextlib.contextmanager
def http_echo(env: Env, name: str, sse: bool = False) -> Iterator[tuple[str, int]]:
    """The echo server on Streamable HTTP (``bench/http_echo.py``): its URL and pid."""
    ready_file = env.workdir / f"{name}.url"
    ready_file.unlink(missing_ok=True)
    log = env.logdir / f"{name}-upstream.log"
    cmd = [PYTHON, str(BENCH / "http_echo.py"), "--ready-file", str(ready_file)]
    echo = start([*cmd, *(["--sse"] if sse else [])], env.target_cpus, log)
    try:
        try:
            wait_for(ready_file.exists, echo, 20)
        except TargetUnavailable as exc:
            raise TargetUnavailable(f"HTTP echo server {exc}{log_tail(log)}") from None
        yield ready_file.read_text().strip(), echo.pid
    finally:
        stop(echo)


def _direct_http(env: Env, name: str, sse: bool) -> contextlib.AbstractContextManager[Launch]:
    @contextlib.contextmanager
    def run() -> Iterator[Launch]:
        with http_echo(env, name, sse) as (url, pid):
            yield Launch(["--http", url, "--upstream-pid", str(pid)], "echo")

    return run()


def direct_http(env: Env) -> contextlib.AbstractContextManager[Launch]:
    return _direct_http(env, "direct-http", False)


def direct_http_sse(env: Env) -> contextlib.AbstractContextManager[Launch]:
    return _direct_http(env, "direct-http-sse", True)


@contextlib.contextmanager
def http_relay(env: Env) -> Iterator[Launch]:
    with http_echo(env, "http-relay") as (url, pid):
        sock = env.workdir / "http-relay.sock"
        log = env.logdir / "http-relay.log"
        cmd = [PYTHON, "-m", "bench.http_relay", "--socket", str(sock), "--url", url]
        proc = start(cmd, env.target_cpus, log)
        try:
            try:
                wait_for(lambda: socket_accepts(sock), proc, 20)
            except TargetUnavailable as exc:
                raise TargetUnavailable(f"http-relay {exc}{log_tail(log)}") from None
            args = ["--connect", str(sock), "--cpu-pid", str(proc.pid), "--upstream-pid", str(pid)]
            yield Launch(args, "echo")
        finally:
            stop(proc)


def _mcpd_http(env: Env, name: str, sse: bool) -> contextlib.AbstractContextManager[Launch]:
    @contextlib.contextmanager
    def run() -> Iterator[Launch]:
        with http_echo(env, name, sse) as (url, pid):
            servers = {"echo": {"url": url}}
            with running_mcpd(env, name, servers, env.target_cpus) as daemon:
                args = [*daemon.loadgen_args(), "--upstream-pid", str(pid)]
                yield Launch(args, "mcp__echo__echo")

    return run()


def mcpd_http(env: Env) -> contextlib.AbstractContextManager[Launch]:
    return _mcpd_http(env, "mcpd-http", False)


def mcpd_http_sse(env: Env) -> contextlib.AbstractContextManager[Launch]:
    return _mcpd_http(env, "mcpd-http-sse", True)


CONFIGURATIONS: dict[str, Callable[[Env], contextlib.AbstractContextManager[Launch]]] = {
    "direct-http": direct_http,
    "direct-http-sse": direct_http_sse,
    "http-relay": http_relay,
    "mcpd-http": mcpd_http,
    "mcpd-http-sse": mcpd_http_sse,
}
