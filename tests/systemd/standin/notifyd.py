"""A stand-in Type=notify daemon, stdlib only: READY/STATUS, reload on SIGHUP with
RELOADING=1, STOPPING=1 on SIGTERM, watchdog pings. Used to prove the harness."""

import os
import signal
import socket
import sys
import time


def notify(*assignments: str) -> None:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    target = "\0" + address[1:] if address.startswith("@") else address
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto("".join(a + "\n" for a in assignments).encode(), target)


def main() -> int:
    runtime = os.environ.get("RUNTIME_DIRECTORY", "/run/notifyd")
    with open(os.path.join(runtime, "pid"), "w") as f:
        f.write(str(os.getpid()))
    watchdog = int(os.environ.get("WATCHDOG_USEC", "0")) / 2e6 or None
    signals = {signal.SIGHUP, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    print("notifyd starting", flush=True)
    notify("READY=1", "STATUS=serving")
    reloads = 0
    while True:
        if watchdog:
            notify("WATCHDOG=1")
        info = signal.sigtimedwait(signals, watchdog or 3600)
        if info is None:
            continue
        if info.si_signo == signal.SIGHUP:
            reloads += 1
            usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
            notify("RELOADING=1", f"MONOTONIC_USEC={usec}")
            print(f"notifyd got SIGHUP, reload #{reloads}", flush=True)
            notify("READY=1", f"STATUS=reloaded {reloads}")
        else:
            notify("STOPPING=1")
            print("notifyd stopping", flush=True)
            return 0


if __name__ == "__main__":
    sys.exit(main())
