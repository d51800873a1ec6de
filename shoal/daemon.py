"""What the four daemons share with Slurm's: option errors, logging, signals and systemd readiness.

Slurm's daemons answer a bad option with the usage on stderr and exit 1; `-D` keeps them in the
foreground with the log on the terminal. shoal's daemons never fork away (systemd, containers and
`shoal up` all supervise them directly), so `-D` means: copy the log to stderr even when a log file
is configured. SIGHUP and SIGUSR2 reopen the log file (logrotate); SIGTERM and SIGINT stop.
With `Type=notify` units, READY=1 goes to $NOTIFY_SOCKET once the daemon serves (sd_notify's
datagram protocol, without libsystemd).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

LOG_FORMAT = "[%(asctime)s] %(name)s %(levelname)s: %(message)s"


class DaemonArgumentParser(argparse.ArgumentParser):
    """argparse with Slurm's daemon convention for bad options: one line, the usage, exit 1 (not 2)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


class ReopeningFileHandler(logging.FileHandler):
    """A log file that can be closed and opened again by name, after logrotate moved it away."""

    def reopen(self) -> None:
        self.acquire()
        try:
            if self.stream is not None:
                self.stream.close()
            self.stream = self._open()
        finally:
            self.release()


def open_log_file(path: str) -> ReopeningFileHandler:
    """The handler for SlurmctldLogFile/SlurmdLogFile/LogFile/-L; OSError when it cannot be opened."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return ReopeningFileHandler(path)


def setup_logging(path: str | None, level: int, foreground: bool, fmt: str = LOG_FORMAT) -> None:
    """Log to `path` if given, else to stderr; with -D (foreground) also to stderr, as Slurm's -D does.

    Raises OSError when the file cannot be opened (the caller says so and exits 1)."""
    handlers: list[logging.Handler] = []
    if path:
        handlers.append(open_log_file(path))
    if foreground or not path:
        handlers.append(logging.StreamHandler(sys.stderr))
    formatter = logging.Formatter(fmt)
    for handler in handlers:
        handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = handlers
    root.setLevel(level)


def reopen_log_files() -> None:
    for handler in logging.getLogger().handlers:
        if isinstance(handler, ReopeningFileHandler):
            handler.reopen()


def install_signals(stop: threading.Event, prog: str, on_hup: Callable[[], None] | None = None) -> None:
    """SIGTERM/SIGINT set `stop`; SIGHUP/SIGUSR2 reopen the log file (the daemon keeps running);
    SIGHUP then calls `on_hup` (ctld: reconfigure; it must only set an event, it runs in the handler)."""

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def on_reopen(signum: int, frame: FrameType | None) -> None:
        reopen_log_files()
        if signum == signal.SIGHUP and on_hup is not None:
            on_hup()
        elif signum == signal.SIGHUP:
            logging.getLogger("shoal").info(
                "%s: SIGHUP: log file reopened; configuration changes take effect on restart", prog
            )

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_reopen)
    signal.signal(signal.SIGUSR2, on_reopen)


class Notifier:
    """systemd's readiness protocol (sd_notify(3)): datagrams to $NOTIFY_SOCKET, without libsystemd.

    Made first thing in main(): it takes $NOTIFY_SOCKET out of the environment, so that no child
    (stepd, tasks, the command runner) inherits it."""

    def __init__(self) -> None:
        self.address = os.environ.pop("NOTIFY_SOCKET", "")

    def send(self, state: str) -> bool:
        """Send `state` ("READY=1", "STOPPING=1"); False when there is no socket or sending fails.
        An address starting with '@' is in the abstract namespace."""
        if not self.address or self.address[0] not in "/@":
            return False
        target = "\0" + self.address[1:] if self.address[0] == "@" else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(state.encode(), target)
        except OSError as exc:
            logging.getLogger("shoal").warning(
                "cannot notify systemd at %s: %s", self.address, exc.strerror or exc
            )
            return False
        return True

    def ready(self) -> bool:
        return self.send(f"READY=1\nMAINPID={os.getpid()}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def status(self, text: str) -> bool:
        """What `systemctl status` shows, e.g. a standby controller's "standing by for the lease"."""
        return self.send(f"STATUS={text}")
